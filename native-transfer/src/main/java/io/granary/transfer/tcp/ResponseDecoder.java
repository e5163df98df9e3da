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
final class ResponseDecoder extends ChannelInboundHandlerAdapter
{
    private static final Logger LOG = LoggerFactory.getLogger(ResponseDecoder.class);

    private final Lane lane;
    private final FrameHeader header = new FrameHeader();
    private HeaderAssembler headers;
    private long payloadRemaining;
    private TransferSlice payloadTarget;
    private boolean broken;

    ResponseDecoder(final Lane lane)
    {
        this.lane = lane;
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
            while (!broken && in.isReadable())
            {
                if (payloadRemaining > 0)
                {
                    readPayload(in);
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
        final TransferSlice slice = lane.takeInflight(header.requestId);
        final boolean hasPayload = header.hasPayload();
        if (slice != null && (header.opcode != (slice.opcode | Opcode.RESPONSE_BIT) ||
            header.segmentId != slice.segmentId || header.offset != slice.remoteOffset ||
            header.length != slice.length))
        {
            slice.complete(TRANSFER_FAIL_VALUE);
            protocolError(ctx, "response " + header + " does not echo its request " + slice);
            return false;
        }
        if (header.status > 0 || (header.status < 0 && ErrorCode.forNumber(header.status) == null))
        {
            if (slice != null)
            {
                slice.complete(TRANSFER_FAIL_VALUE);
            }
            protocolError(ctx, "response " + header + " carries an unknown status");
            return false;
        }

        if (hasPayload && header.length > 0)
        {
            payloadRemaining = header.length;
            payloadTarget = slice; // null: the request timed out, discard the bytes
        }
        else if (slice != null)
        {
            slice.complete(header.status);
        }
        return true;
    }

    private void readPayload(final ByteBuf in)
    {
        final int count = (int)Math.min(payloadRemaining, in.readableBytes());
        final TransferSlice target = payloadTarget;
        if (target != null && !target.isDone())
        {
            target.receive(in, count);
        }
        in.skipBytes(count);
        payloadRemaining -= count;
        if (payloadRemaining == 0)
        {
            payloadTarget = null;
            if (target != null)
            {
                target.complete(0);
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
