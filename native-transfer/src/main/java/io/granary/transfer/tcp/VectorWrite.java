package io.granary.transfer.tcp;

import io.granary.proto.ErrorCode;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Small WRITE_COMMIT slices bound for one lane, sent as one WRITEV frame (docs/protocol.md, "WRITEV"): the request
 * carries a table (each slice's WRITE_COMMIT header, then their records) and then the values, straight from the
 * callers' buffers; the answer is a status per slice. Saves a frame, an answer and a timeout per small value.
 * Event-loop confined.
 */
final class VectorWrite extends VectorFrame implements ChannelFutureListener
{
    private long table;
    private boolean payloadWritten;
    private String mismatch;

    // Receiving the answer: a status per slice.
    private byte[] statusBlock;
    private int statusBytes;

    VectorWrite(final int maxEntries)
    {
        super(maxEntries);
    }

    /** True for a slice that may be an entry: a WRITE_COMMIT of 1 byte to a READV entry's bound. */
    static boolean fits(final TransferSlice slice)
    {
        return slice.opcode == Opcode.WRITE_COMMIT && slice.recordLength() > 0 && slice.length > 0 &&
            slice.length <= VectorRead.MAX_ENTRY_BYTES;
    }

    /**
     * Adds a slice; false (nothing added) when the vector is full by count, by values ({@link VectorRead#MAX_VECTOR_BYTES})
     * or by table ({@link FrameDescriptor#MAX_WRITEV_TABLE}).
     */
    boolean add(final TransferSlice slice)
    {
        final long entryTable = FrameDescriptor.HEADER_LENGTH + slice.recordLength();
        if (count == slices.length || bytes + slice.length > VectorRead.MAX_VECTOR_BYTES ||
            table + entryTable > FrameDescriptor.MAX_WRITEV_TABLE)
        {
            return false;
        }
        slices[count++] = slice;
        bytes += slice.length;
        table += entryTable;
        return true;
    }


    /** Slice {@code i}, in entry order. */
    TransferSlice entry(final int i)
    {
        return slices[i];
    }

    /** The bytes of the WRITEV header and its table, which {@link #encode} writes. */
    int headerBytes()
    {
        return FrameDescriptor.HEADER_LENGTH + (int)table;
    }

    /** The WRITEV header, then the table: each slice's WRITE_COMMIT header (request id = its index), the records. */
    void encode(final ByteBuf out, final long id)
    {
        FrameHeader.encode(out, Opcode.WRITEV, count, id, 0, 0, table, table + bytes, 0, null);
        for (int i = 0; i < count; i++)
        {
            slices[i].encodeHeader(out, i); // the WRITE_COMMIT request it would have been alone, token included
        }
        for (int i = 0; i < count; i++)
        {
            slices[i].writeRecord(out);
        }
    }

    @Override
    int opcode()
    {
        return Opcode.WRITEV;
    }

    /** Exactly a status per slice. */
    @Override
    boolean acceptsPayload(final long announced)
    {
        final long statusLength = (long)count * FrameDescriptor.VECTOR_STATUS_LENGTH;
        if (announced != statusLength)
        {
            return false;
        }
        statusBlock = new byte[(int)statusLength];
        return true;
    }

    @Override
    void receive(final ByteBuf in, final int count)
    {
        final int n = Math.min(count, statusBlock.length - statusBytes);
        in.getBytes(in.readerIndex(), statusBlock, statusBytes, n);
        statusBytes += n;
        if (statusBytes == statusBlock.length)
        {
            onStatuses();
        }
    }

    /** Every status is in: each slice completes with its own, unless one is no ErrorCode number (all then fail). */
    private void onStatuses()
    {
        for (int i = 0; i < count; i++)
        {
            final int status = statusAt(i);
            if (status > 0 || (status < 0 && ErrorCode.forNumber(status) == null))
            {
                mismatch = "WRITEV answer carries an unknown status " + status;
                complete(TRANSFER_FAIL_VALUE);
                return;
            }
        }
        for (int i = 0; i < count; i++)
        {
            slices[i].complete(statusAt(i));
        }
        complete(TRANSFER_FAIL_VALUE); // every slice is answered by now; this only marks the vector done
    }

    private int statusAt(final int i)
    {
        final int at = i * FrameDescriptor.VECTOR_STATUS_LENGTH;
        return ((statusBlock[at] & 0xFF) << 24) | ((statusBlock[at + 1] & 0xFF) << 16) |
            ((statusBlock[at + 2] & 0xFF) << 8) | (statusBlock[at + 3] & 0xFF);
    }

    @Override
    String mismatch()
    {
        return mismatch;
    }

    @Override
    ByteBuf inPlaceView(final int maxBytes)
    {
        return null; // four bytes per entry: they go through the socket buffer
    }

    @Override
    void receivedInPlace(final int count)
    {
        throw new IllegalStateException("a vector offers no in-place buffer");
    }

    @Override
    void payloadComplete()
    {
        // Every slice completed with the last status; anything still open means the answer was short.
        complete(TRANSFER_FAIL_VALUE);
    }

    /** Until the last value left for the kernel, the callers' buffers sit in the outbound queue. */
    @Override
    boolean payloadPending()
    {
        return !payloadWritten;
    }

    /** Completion of the last value's write: the kernel holds every value, the callers' buffers are free. */
    @Override
    public void operationComplete(final ChannelFuture future)
    {
        payloadWritten = future.isSuccess();
    }

    @Override
    public String toString()
    {
        return "vector{id=" + requestId + ", writes=" + count + ", bytes=" + bytes + '}';
    }
}
