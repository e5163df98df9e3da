package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Small READ slices bound for one lane, sent as one READV frame: the request carries each slice's READ header,
 * the answer a status per slice and then the bytes of the good ones in order, which this frame hands out to its
 * slices as they stream in. Saves a frame, a timeout and a flush entry per small page. Event-loop confined.
 */
final class VectorRead extends VectorFrame
{
    /** Slices of at most this many bytes are worth batching; bigger ones go alone (and may land in place). */
    static final int MAX_ENTRY_BYTES = 64 << 10;
    /** Most payload bytes one vector asks for, so that its answer stays well inside a node's frame limit. */
    static final int MAX_VECTOR_BYTES = 4 << 20;


    // Receiving the answer: the status block first, then the payload of each good slice in order.
    private byte[] statusBlock;
    private int statusBytes;
    private int current = -1;
    private int currentRemaining;
    private long payloadBytes;

    VectorRead(final int maxEntries)
    {
        super(maxEntries);
    }

    static boolean fits(final TransferSlice slice)
    {
        return slice.opcode == Opcode.READ && slice.length > 0 && slice.length <= MAX_ENTRY_BYTES;
    }

    /** Adds a slice; false (nothing added) when the vector is full by count or bytes. */
    boolean add(final TransferSlice slice)
    {
        if (count == slices.length || bytes + slice.length > MAX_VECTOR_BYTES)
        {
            return false;
        }
        slices[count++] = slice;
        bytes += slice.length;
        return true;
    }


    /** The READV request: its header, then one READ header per slice. */
    void encode(final ByteBuf out, final long id)
    {
        FrameHeader.encode(out, Opcode.READV, 0, id, 0, 0, 0, (long)count * FrameDescriptor.HEADER_LENGTH, 0, null);
        for (int i = 0; i < count; i++)
        {
            slices[i].encodeHeader(out, i); // the READ request it would have been alone, token included
        }
    }

    @Override
    int opcode()
    {
        return Opcode.READV;
    }

    /**
     * Whether a READV answer of {@code announced} payload bytes fits a vector of {@code count} reads of {@code bytes}
     * in all: at least the status block, at most the status block and every byte asked for. Both client engines.
     */
    static boolean answerFits(final int count, final long bytes, final long announced)
    {
        final long statusLength = (long)count * FrameDescriptor.VECTOR_STATUS_LENGTH;
        return announced >= statusLength && announced <= statusLength + bytes;
    }

    @Override
    boolean acceptsPayload(final long announced)
    {
        if (!answerFits(count, bytes, announced))
        {
            return false;
        }
        payloadBytes = announced;
        statusBlock = new byte[count * FrameDescriptor.VECTOR_STATUS_LENGTH];
        return true;
    }

    @Override
    void receive(final ByteBuf in, final int count)
    {
        int index = in.readerIndex();
        int left = count;
        while (left > 0 && !done)
        {
            if (statusBytes < statusBlock.length)
            {
                final int n = Math.min(left, statusBlock.length - statusBytes);
                in.getBytes(index, statusBlock, statusBytes, n);
                statusBytes += n;
                index += n;
                left -= n;
                if (statusBytes == statusBlock.length)
                {
                    onStatuses();
                }
                continue;
            }
            if (current >= this.count)
            {
                return; // more bytes than the statuses promised: payloadComplete fails what is left
            }
            final int n = Math.min(left, currentRemaining);
            final TransferSlice slice = slices[current];
            if (!slice.isDone())
            {
                slice.receiveAt(in, index, n);
            }
            index += n;
            left -= n;
            currentRemaining -= n;
            if (currentRemaining == 0)
            {
                slice.complete(0);
                advance();
            }
        }
    }

    /** Every status is in: answer the refused slices now, and check the byte count the header announced. */
    private void onStatuses()
    {
        long expected = statusBlock.length;
        for (int i = 0; i < count; i++)
        {
            final int status = statusAt(i);
            if (status == 0)
            {
                expected += slices[i].length;
            }
        }
        if (expected != payloadBytes)
        {
            complete(TRANSFER_FAIL_VALUE); // the rest of the payload is discarded by the decoder
            return;
        }
        for (int i = 0; i < count; i++)
        {
            final int status = statusAt(i);
            if (status != 0)
            {
                slices[i].complete(status);
            }
        }
        advance();
    }

    private int statusAt(final int i)
    {
        final int at = i * FrameDescriptor.VECTOR_STATUS_LENGTH;
        return ((statusBlock[at] & 0xFF) << 24) | ((statusBlock[at + 1] & 0xFF) << 16) |
            ((statusBlock[at + 2] & 0xFF) << 8) | (statusBlock[at + 3] & 0xFF);
    }

    /** Moves to the next slice whose status is 0. */
    private void advance()
    {
        current++;
        while (current < count && statusAt(current) != 0)
        {
            current++;
        }
        currentRemaining = current < count ? slices[current].length : 0;
    }

    @Override
    ByteBuf inPlaceView(final int maxBytes)
    {
        return null; // entries are small: they go through the socket buffer
    }

    @Override
    void receivedInPlace(final int count)
    {
        throw new IllegalStateException("a vector offers no in-place buffer");
    }

    @Override
    public String toString()
    {
        return "vector{id=" + requestId + ", reads=" + count + ", bytes=" + bytes + '}';
    }

    @Override
    void payloadComplete()
    {
        // Every good slice completed as its last byte arrived; anything still open means the answer was short.
        complete(TRANSFER_FAIL_VALUE);
    }
}
