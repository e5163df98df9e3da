package io.granary.transfer.tcp;

import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One frame's worth of a transfer: a range of the caller's buffer and of the remote segment, sent
 * with its own request id. Created when it is handed to a lane, then owned by that lane's event loop;
 * {@link #complete(int)} is safe from any thread and takes effect once.
 */
final class TransferSlice extends InflightFrame implements ChannelFutureListener
{
    private static final AtomicIntegerFieldUpdater<TransferSlice> DONE =
        AtomicIntegerFieldUpdater.newUpdater(TransferSlice.class, "done");

    final int opcode;
    final int segmentId;
    final long remoteOffset;
    final int length;
    /** The transfer's access token, or null. */
    final FrameToken token;

    private final PendingTransfer transfer;
    private final ByteBuffer local;
    /** A WRITE_COMMIT's commit record, sent between the header and the payload; else null. */
    private final ByteBuffer record;
    private final int localEnd;

    // Event-loop confined once handed to a lane.
    boolean payloadWritten;

    private volatile int done;

    TransferSlice(
        final PendingTransfer transfer,
        final int opcode,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final FrameToken token,
        final ByteBuffer record)
    {
        this.transfer = transfer;
        this.opcode = opcode;
        this.segmentId = segmentId;
        this.remoteOffset = remoteOffset;
        this.local = local;
        this.localEnd = local.limit();
        this.length = length;
        this.token = token;
        this.record = record;
    }

    @Override
    int opcode()
    {
        return opcode;
    }

    @Override
    boolean isDone()
    {
        return done != 0;
    }

    /** A READ or WRITE answer echoes segment, offset and length, whatever its status. */
    @Override
    boolean echoedBy(final FrameHeader response)
    {
        return response.segmentId == segmentId && response.offset == remoteOffset && response.length == length;
    }

    @Override
    boolean acceptsPayload(final long payloadBytes)
    {
        return payloadBytes == length;
    }

    @Override
    void payloadComplete()
    {
        complete(0);
    }

    @Override
    boolean payloadPending()
    {
        return !payloadWritten;
    }

    /** Writes this slice's request header with {@code requestId}, its token placed in the transfer's grant. */
    void encodeHeader(final ByteBuf out, final long requestId)
    {
        final FrameToken t = token;
        final int flags = record == null ? 0 : record.remaining(); // a WRITE_COMMIT's record length
        if (t == null)
        {
            FrameHeader.encode(out, opcode, flags, requestId, segmentId, 0, remoteOffset, length, 0, null);
        }
        else
        {
            FrameHeader.encode(out, opcode, flags, requestId, segmentId, 0, remoteOffset, length,
                t.deltaOf(remoteOffset), t.grantLength, t.expirySec, t.mac);
        }
    }

    /** A WRITE_COMMIT's record (a view), or null. */
    ByteBuf record()
    {
        return record == null ? null : Unpooled.wrappedBuffer(record.duplicate());
    }

    /** The length of a WRITE_COMMIT's record; 0 for other frames. */
    int recordLength()
    {
        return record == null ? 0 : record.remaining();
    }

    /** Copies a WRITE_COMMIT's record to {@code out} at its writer index (a WRITEV's table). */
    void writeRecord(final ByteBuf out)
    {
        out.writeBytes(record.duplicate());
    }

    /** The WRITE payload: a zero-copy view of the caller's range. */
    ByteBuf payload()
    {
        return Unpooled.wrappedBuffer(local.duplicate());
    }

    /** Copies {@code count} READ response bytes from {@code in} (reader index untouched) into the caller's buffer. */
    @Override
    void receive(final ByteBuf in, final int count)
    {
        receiveAt(in, in.readerIndex(), count);
    }

    /** Copies {@code count} READ response bytes of {@code in} from {@code index} into the caller's buffer. */
    void receiveAt(final ByteBuf in, final int index, final int count)
    {
        final ByteBuffer dst = local;
        dst.limit(dst.position() + count);
        in.getBytes(index, dst);
        dst.limit(localEnd);
    }

    /**
     * A writable view of the next {@code maxBytes} (at most) of the caller's buffer for a READ payload to land
     * in, or null when the caller's buffer is on the heap (the bytes then go through a socket buffer).
     */
    @Override
    ByteBuf inPlaceView(final int maxBytes)
    {
        if (!local.isDirect())
        {
            return null;
        }
        final ByteBuffer view = local.duplicate();
        view.limit(view.position() + Math.min(maxBytes, view.remaining()));
        return Unpooled.wrappedBuffer(view.slice()).clear();
    }

    /** {@code count} READ payload bytes landed in the caller's buffer through {@link #inPlaceView}. */
    @Override
    void receivedInPlace(final int count)
    {
        local.position(local.position() + count);
    }

    /** Completes this slice once; later calls are ignored. */
    @Override
    void complete(final int status)
    {
        if (!DONE.compareAndSet(this, 0, 1))
        {
            return;
        }
        cancelTimeout();
        if (opcode == Opcode.WRITE_COMMIT)
        {
            transfer.onWriteCommitDone(status);
            return;
        }
        transfer.onSliceDone(status, opcode == Opcode.COMMIT, remoteOffset);
    }

    /** Completion of the payload write: the kernel holds the bytes, the caller's buffer is no longer needed. */
    @Override
    public void operationComplete(final ChannelFuture future)
    {
        payloadWritten = future.isSuccess();
    }

    @Override
    public String toString()
    {
        return "slice{id=" + requestId + ", op=" + Opcode.name(opcode) + ", seg=" +
            Integer.toUnsignedString(segmentId) + ", off=" + remoteOffset + ", len=" + length + '}';
    }
}
