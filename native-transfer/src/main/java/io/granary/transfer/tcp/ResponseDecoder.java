package io.granary.transfer.tcp;

import io.granary.common.tls.TlsContexts;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.HeaderAssembler;
import io.granary.proto.ErrorCode;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Decodes response frames of one lane without accumulating them: only a split header is buffered
 * (64 bytes); READ payload bytes go from the socket buffer straight into the caller's buffer. Runs on
 * the lane's event loop.
 */
final class ResponseDecoder extends ChannelInboundHandlerAdapter implements InPlaceReceiveAllocator.Receiver
{
    private static final Logger LOG = LoggerFactory.getLogger(ResponseDecoder.class);

    private final Lane lane;
    private final FrameHeader header = new FrameHeader();
    private HeaderAssembler headers;
    private long payloadRemaining;
    private InflightFrame payloadTarget;
    private ByteBuf inPlace;
    private long lastResponseId;
    private boolean broken;

    private final boolean receiveInPlace;

    /** @param receiveInPlace let READ payloads land in the caller's direct buffer (plain TCP only, never TLS). */
    ResponseDecoder(final Lane lane, final boolean receiveInPlace)
    {
        this.lane = lane;
        this.receiveInPlace = receiveInPlace;
    }

    @Override
    public void handlerAdded(final ChannelHandlerContext ctx)
    {
        headers = new HeaderAssembler(ctx.alloc());
        if (receiveInPlace)
        {
            ctx.channel().config().setRecvByteBufAllocator(new InPlaceReceiveAllocator(this));
        }
    }

    @Override
    public int nextReadLimit()
    {
        // Responses come in request order: if the next one is a big READ, read its header alone.
        if (payloadRemaining == 0 && !broken &&
            lane.expectsLargeRead(lastResponseId + 1, InPlaceReceiveAllocator.MIN_IN_PLACE_BYTES))
        {
            return FrameDescriptor.HEADER_LENGTH;
        }
        return 0;
    }

    @Override
    public ByteBuf inPlaceBuffer()
    {
        final InflightFrame target = payloadTarget;
        if (broken || payloadRemaining < InPlaceReceiveAllocator.MIN_IN_PLACE_BYTES || target == null ||
            target.isDone())
        {
            return null;
        }
        inPlace = target.inPlaceView((int)payloadRemaining);
        return inPlace;
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
        if (in == inPlace)
        {
            inPlace = null;
            receivedInPlace(in);
            return;
        }
        try
        {
            while (!broken && in.isReadable())
            {
                if (payloadRemaining > 0)
                {
                    readPayload(ctx, in);
                    continue;
                }

                final int result = headers.decodeNext(in, header, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                if (result == HeaderAssembler.NEED_MORE)
                {
                    break;
                }
                if (result != FrameHeader.DECODE_OK || !Opcode.isResponse(header.opcode))
                {
                    protocolError(ctx, result != FrameHeader.DECODE_OK ?
                        FrameHeader.decodeErrorText(result) : "request opcode in a response stream");
                    return;
                }
                if (!onHeader(ctx))
                {
                    return;
                }
            }
        }
        finally
        {
            in.release();
        }
    }

    /** @return false when the stream is broken and the lane was failed. */
    private boolean onHeader(final ChannelHandlerContext ctx)
    {
        if (!lane.wasIssued(header.requestId))
        {
            protocolError(ctx, "response " + header + " to a request id this lane never sent");
            return false;
        }
        lastResponseId = header.requestId;
        final InflightFrame frame = lane.takeInflight(header.requestId);
        final boolean hasPayload = header.hasPayload();
        if (frame != null && (header.opcode != (frame.opcode() | Opcode.RESPONSE_BIT) || !frame.echoedBy(header) ||
            (hasPayload && !frame.acceptsPayload(header.length))))
        {
            frame.complete(TRANSFER_FAIL_VALUE);
            protocolError(ctx, "response " + header + " does not echo its request " + frame);
            return false;
        }
        if (header.status > 0 || (header.status < 0 && ErrorCode.forNumber(header.status) == null))
        {
            if (frame != null)
            {
                frame.complete(TRANSFER_FAIL_VALUE);
            }
            protocolError(ctx, "response " + header + " carries an unknown status");
            return false;
        }

        if (hasPayload && header.length > 0)
        {
            payloadRemaining = header.length;
            payloadTarget = frame; // null: the request timed out, discard the bytes
        }
        else if (frame != null)
        {
            frame.complete(header.status);
        }
        return true;
    }

    /** Payload bytes the socket read put straight into the caller's buffer: only count them. */
    private void receivedInPlace(final ByteBuf in)
    {
        final int count = in.readableBytes();
        in.release(); // a view: frees nothing
        final InflightFrame target = payloadTarget;
        if (broken || count == 0)
        {
            return;
        }
        if (target != null)
        {
            target.receivedInPlace(count);
        }
        payloadRemaining -= count;
        if (payloadRemaining == 0)
        {
            payloadTarget = null;
            if (target != null)
            {
                target.payloadComplete();
            }
        }
    }

    private void readPayload(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(payloadRemaining, in.readableBytes());
        final InflightFrame target = payloadTarget;
        if (target != null && !target.isDone())
        {
            target.receive(in, count);
            if (target.mismatch() != null)
            {
                protocolError(ctx, target.mismatch() + " (" + target + ")");
                return;
            }
        }
        in.skipBytes(count);
        payloadRemaining -= count;
        if (payloadRemaining == 0)
        {
            payloadTarget = null;
            if (target != null)
            {
                target.payloadComplete();
            }
        }
    }

    private void protocolError(final ChannelHandlerContext ctx, final String reason)
    {
        LOG.warn("closing transfer lane to {}: {}", lane.endpoint(), reason);
        broken = true;
        lane.fail(TRANSFER_FAIL_VALUE, reason);
        ctx.close();
    }

    @Override
    public void channelInactive(final ChannelHandlerContext ctx)
    {
        lane.fail(TRANSFER_FAIL_VALUE, "connection closed");
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        if (!broken)
        {
            broken = true;
            if (cause.getCause() instanceof javax.net.ssl.SSLException)
            {
                LOG.warn("transfer lane to {} failed: {}", lane.endpoint(), TlsContexts.describe(cause));
            }
            else
            {
                LOG.debug("transfer lane to {} failed: {}", lane.endpoint(), cause.toString());
            }
            lane.fail(TRANSFER_FAIL_VALUE, String.valueOf(cause));
        }
        ctx.close();
    }
}
