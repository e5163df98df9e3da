package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.HeaderAssembler;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.LinkedHashMap;
import java.util.Map;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;

/**
 * Serves the frames of one client connection: a state machine that reads a 64-byte header, checks the
 * segment and range before any byte moves, streams WRITE payloads straight into segment memory and
 * sends READ payloads from it without copying. A WRITE first removes the ledger entries its range
 * overlaps; a COMMIT records its extent in the segment's ledger unless a WRITE of that extent failed on
 * this connection. Runs on the connection's event loop only.
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

    // The COMMIT whose payload is arriving; commitPayload null means discard (too long).
    private long commitRemaining;
    private byte[] commitPayload;
    private int commitFilled;
    private long commitRequestId;
    private int commitSegmentId;
    private long commitOffset;
    private long commitLength;
    /** WRITEs refused on this connection, by (segment, offset): their COMMIT must be refused too. Bounded. */
    private final Map<Long, Integer> failedWrites = new LinkedHashMap<>(16, 0.75f, false)
    {
        @Override
        protected boolean removeEldestEntry(final Map.Entry<Long, Integer> eldest)
        {
            return size() > MAX_FAILED_WRITES_REMEMBERED;
        }
    };
    private static final int MAX_FAILED_WRITES_REMEMBERED = 4096;

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
                if (commitRemaining > 0)
                {
                    consumeCommitPayload(ctx, in);
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

            case Opcode.COMMIT:
                onCommit(ctx);
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
        if (writeStatus == 0)
        {
            writeStatus = invalidateLedger(segment);
        }
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

    /** Validation before any byte moves: segment known, then range non-empty and inside it. */
    private int check(final Segment segment)
    {
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
        rememberWriteOutcome(writeSegmentId, writeOffset, writeStatus);
        respond(ctx, Opcode.WRITE_RESPONSE, writeRequestId, writeSegmentId, writeStatus, writeOffset, writeLength);
    }

    /** Before a WRITE moves bytes: the ledger forgets what the range held (or the segment was re-keyed). */
    private int invalidateLedger(final Segment segment)
    {
        if (segment.ledger().beforeWrite(header.segmentId, header.offset, header.length))
        {
            return 0;
        }
        server.onErrorResponse();
        return SEGMENT_NOT_FOUND_VALUE;
    }

    private void rememberWriteOutcome(final int segmentId, final long offset, final int status)
    {
        final long extent = extentKey(segmentId, offset);
        if (status != 0)
        {
            failedWrites.put(extent, status);
        }
        else if (!failedWrites.isEmpty())
        {
            failedWrites.remove(extent);
        }
    }

    private static long extentKey(final int segmentId, final long offset)
    {
        return offset * 0x9E3779B97F4A7C15L ^ segmentId;
    }

    private void onCommit(final ChannelHandlerContext ctx)
    {
        commitRequestId = header.requestId;
        commitSegmentId = header.segmentId;
        commitOffset = header.offset;
        commitLength = header.length;
        commitRemaining = header.length;
        commitFilled = 0;
        commitPayload = header.length > 0 && header.length <= FrameDescriptor.MAX_COMMIT_PAYLOAD ?
            new byte[(int)header.length] : null;
        if (commitRemaining == 0)
        {
            finishCommit(ctx);
        }
    }

    private void consumeCommitPayload(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(commitRemaining, in.readableBytes());
        if (commitPayload != null)
        {
            in.readBytes(commitPayload, commitFilled, count);
            commitFilled += count;
        }
        else
        {
            in.skipBytes(count);
        }
        commitRemaining -= count;
        if (commitRemaining == 0)
        {
            finishCommit(ctx);
        }
    }

    private void finishCommit(final ChannelHandlerContext ctx)
    {
        final int status = commitStatus();
        commitPayload = null;
        if (status != 0)
        {
            server.onErrorResponse();
        }
        respond(ctx, Opcode.COMMIT_RESPONSE, commitRequestId, commitSegmentId, status, commitOffset, commitLength);
    }

    /** Validates a COMMIT and records it: payload, segment, range, then the outcome of its WRITE here. */
    private int commitStatus()
    {
        final CommitRecord record = commitPayload == null ? null :
            CommitRecord.decode(commitPayload, 0, commitPayload.length);
        if (record == null)
        {
            return INVALID_PARAMS_VALUE;
        }
        final Segment segment = registry.get(commitSegmentId);
        if (segment == null)
        {
            return SEGMENT_NOT_FOUND_VALUE;
        }
        if (!segment.contains(commitOffset, Math.max(1, record.valueLength())))
        {
            return INVALID_PARAMS_VALUE;
        }
        final Integer failed = failedWrites.remove(extentKey(commitSegmentId, commitOffset));
        if (failed != null)
        {
            return failed;
        }
        return segment.ledger().commit(commitSegmentId, commitOffset, record, Clock.SYSTEM.epochMillis());
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
