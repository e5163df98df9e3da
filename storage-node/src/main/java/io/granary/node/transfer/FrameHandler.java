package io.granary.node.transfer;

import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.HeaderAssembler;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;

/**
 * Serves the frames of one client connection: a state machine that reads a 64-byte header, checks the
 * segment and range before any byte moves, streams WRITE payloads straight into segment memory and
 * sends READ payloads from it without copying. Runs on the connection's event loop only.
 */
final class FrameHandler extends ChannelInboundHandlerAdapter
{
    private static final Logger LOG = LoggerFactory.getLogger(FrameHandler.class);

    private final TransferServer server;
    private final SegmentRegistry registry;
    private final int maxFrameBytes;
    private final FrameHeader header = new FrameHeader();
    private HeaderAssembler headers;
    private boolean broken;
    private boolean flushPending;

    // The WRITE whose payload is arriving; writeAddress 0 means discard (rejected request).
    private long writeRemaining;
    private long writeAddress;
    private int writeStatus;
    private long writeRequestId;
    private int writeSegmentId;
    private long writeOffset;
    private long writeLength;

    FrameHandler(final TransferServer server, final SegmentRegistry registry, final int maxFrameBytes)
    {
        this.server = server;
        this.registry = registry;
        this.maxFrameBytes = maxFrameBytes;
    }

    @Override
    public void handlerAdded(final ChannelHandlerContext ctx)
    {
        headers = new HeaderAssembler(ctx.alloc());
    }

    @Override
    public void handlerRemoved(final ChannelHandlerContext ctx)
    {
        if (headers != null)
        {
            headers.release();
            headers = null;
        }
    }

    @Override
    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
        final ByteBuf in = (ByteBuf)msg;
        try
        {
            if (broken)
            {
                return;
            }
            server.onBytesIn(in.readableBytes());
            while (in.isReadable())
            {
                if (writeRemaining > 0)
                {
                    consumeWritePayload(ctx, in);
                    continue;
                }

                int result = headers.decodeNext(in, header, maxFrameBytes);
                if (result == HeaderAssembler.NEED_MORE)
                {
                    break;
                }
                if (result == FrameHeader.DECODE_OK && !Opcode.isRequest(header.opcode))
                {
                    result = FrameHeader.DECODE_BAD_OPCODE;
                }
                if (result != FrameHeader.DECODE_OK)
                {
                    // The stream cannot be resynchronised: say why once and hang up.
                    broken = true;
                    server.onProtocolError();
                    LOG.warn("closing transfer connection from {}: {} ({}, max frame {} bytes)",
                        ctx.channel().remoteAddress(), FrameHeader.decodeErrorText(result), header, maxFrameBytes);
                    ctx.close();
                    return;
                }
                onRequest(ctx);
            }
        }
        finally
        {
            in.release();
        }
    }

    private void onRequest(final ChannelHandlerContext ctx)
    {
        server.onRequest();
        switch (header.opcode)
        {
            case Opcode.READ:
                onRead(ctx);
                break;

            case Opcode.WRITE:
                onWrite(ctx);
                break;

            default:
                respond(ctx, Opcode.PING_RESPONSE, header.requestId, header.segmentId, 0, header.offset, header.length);
                break;
        }
    }

    private void onRead(final ChannelHandlerContext ctx)
    {
        final Segment segment = registry.get(header.segmentId);
        final int status = check(segment);
        respond(ctx, Opcode.READ_RESPONSE, header.requestId, header.segmentId, status, header.offset, header.length);
        if (status == 0)
        {
            final int length = (int)header.length;
            ctx.write(MemoryCopier.readView(ctx.alloc(), segment.address() + header.offset, length), ctx.voidPromise());
            server.onBytesOut(length);
        }
    }

    private void onWrite(final ChannelHandlerContext ctx)
    {
        final Segment segment = registry.get(header.segmentId);
        writeStatus = check(segment);
        writeAddress = writeStatus == 0 ? segment.address() + header.offset : 0;
        writeRemaining = header.length;
        writeRequestId = header.requestId;
        writeSegmentId = header.segmentId;
        writeOffset = header.offset;
        writeLength = header.length;
        if (writeRemaining == 0)
        {
            finishWrite(ctx);
        }
    }

    /** Validation before any byte moves: a request's status 0, segment known, then range non-empty and inside it. */
    private int check(final Segment segment)
    {
        if (header.status != 0)
        {
            server.onErrorResponse();
            return INVALID_PARAMS_VALUE;
        }
        if (segment == null)
        {
            server.onErrorResponse();
            return SEGMENT_NOT_FOUND_VALUE;
        }
        if (header.length == 0 || !segment.contains(header.offset, header.length))
        {
            server.onErrorResponse();
            return INVALID_PARAMS_VALUE;
        }
        return 0;
    }

    private void consumeWritePayload(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(writeRemaining, in.readableBytes());
        if (writeAddress != 0)
        {
            MemoryCopier.copyToAddress(in, in.readerIndex(), writeAddress, count);
            writeAddress += count;
        }
        in.skipBytes(count);
        writeRemaining -= count;
        if (writeRemaining == 0)
        {
            finishWrite(ctx);
        }
    }

    private void finishWrite(final ChannelHandlerContext ctx)
    {
        writeAddress = 0;
        respond(ctx, Opcode.WRITE_RESPONSE, writeRequestId, writeSegmentId, writeStatus, writeOffset, writeLength);
    }

    private void respond(
        final ChannelHandlerContext ctx,
        final int opcode,
        final long requestId,
        final int segmentId,
        final int status,
        final long offset,
        final long length)
    {
        final ByteBuf out = ctx.alloc().directBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
        FrameHeader.encode(out, opcode, 0, requestId, segmentId, status, offset, length, 0, null);
        ctx.write(out, ctx.voidPromise());
        server.onBytesOut(FrameDescriptor.HEADER_LENGTH);
        flushPending = true;
    }

    @Override
    public void channelReadComplete(final ChannelHandlerContext ctx)
    {
        // One flush for every response produced by this read batch (pipelined requests).
        if (flushPending)
        {
            flushPending = false;
            ctx.flush();
        }
        if (!ctx.channel().isWritable())
        {
            ctx.channel().config().setAutoRead(false);
        }
        ctx.fireChannelReadComplete();
    }

    @Override
    public void channelWritabilityChanged(final ChannelHandlerContext ctx)
    {
        if (ctx.channel().isWritable())
        {
            ctx.channel().config().setAutoRead(true);
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelActive(final ChannelHandlerContext ctx)
    {
        server.onConnectionOpened();
        ctx.fireChannelActive();
    }

    @Override
    public void channelInactive(final ChannelHandlerContext ctx)
    {
        server.onConnectionClosed();
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        if (!broken)
        {
            // Once per connection: after a reset every queued write fails the same way.
            broken = true;
            LOG.debug("transfer connection from {} failed: {}", ctx.channel().remoteAddress(), cause.toString());
        }
        ctx.close();
    }
}
