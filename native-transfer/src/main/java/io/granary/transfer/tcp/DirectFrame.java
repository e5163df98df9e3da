package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;

/**
 * A request frame of a {@link DirectConnection} from the moment it is queued until its answer (or failure): a
 * {@link Slice} of a transfer (READ, WRITE, COMMIT or WRITE_COMMIT), a {@link Vector} of small READ slices sent as one
 * READV, or a {@link WriteVector} of small WRITE_COMMIT slices sent as one WRITEV. Confined to the loop's thread.
 */
abstract class DirectFrame
{
    long requestId;
    long deadlineNs;
    boolean done;

    abstract int opcode();

    /** False when {@code response} (opcode already matched) does not answer this request: the stream is out of sync. */
    abstract boolean echoedBy(FrameHeader response);

    /** Finishes the frame (every slice it carries) with {@code status}; later calls do nothing. */
    abstract void finish(int status);

    /** Writes this frame's request header(s) into {@code out} at its writer index. */
    abstract void encode(ByteBuf out);

    /** Header bytes {@link #encode} writes. */
    abstract int headerBytes();

    /** One frame's worth of a transfer: a range of the caller's buffer and of the remote segment. */
    static final class Slice extends DirectFrame
    {
        final DirectTransfer transfer;
        final int opcode;
        final long remoteOffset;
        final int length;
        /** The caller's bytes (WRITE), where the answer lands (READ), or the commit record; exactly the slice range. */
        final ByteBuffer local;
        /** A WRITE_COMMIT's commit record, sent between the header and {@link #local}; else null. */
        final ByteBuffer record;

        Slice(final DirectTransfer transfer, final int opcode, final long remoteOffset, final ByteBuffer local,
            final int length)
        {
            this(transfer, opcode, remoteOffset, local, length, null);
        }

        Slice(final DirectTransfer transfer, final int opcode, final long remoteOffset, final ByteBuffer local,
            final int length, final ByteBuffer record)
        {
            this.transfer = transfer;
            this.opcode = opcode;
            this.remoteOffset = remoteOffset;
            this.local = local;
            this.length = length;
            this.record = record;
        }

        @Override
        int opcode()
        {
            return opcode;
        }

        boolean carriesPayload()
        {
            return (opcode == Opcode.WRITE || opcode == Opcode.COMMIT || opcode == Opcode.WRITE_COMMIT) && length > 0;
        }

        @Override
        boolean echoedBy(final FrameHeader response)
        {
            return response.segmentId == transfer.segmentId && response.offset == remoteOffset &&
                response.length == length;
        }

        @Override
        void finish(final int status)
        {
            if (done)
            {
                return;
            }
            done = true;
            transfer.onFrameDone(this, status);
        }

        @Override
        void encode(final ByteBuf out)
        {
            encodeWithId(out, requestId);
        }

        void encodeWithId(final ByteBuf out, final long id)
        {
            final FrameToken t = transfer.token;
            final int flags = record == null ? 0 : record.remaining(); // a WRITE_COMMIT's record length
            if (t == null)
            {
                FrameHeader.encode(out, opcode, flags, id, transfer.segmentId, 0, remoteOffset, length, 0, null);
            }
            else
            {
                FrameHeader.encode(out, opcode, flags, id, transfer.segmentId, 0, remoteOffset, length,
                    t.deltaOf(remoteOffset), t.grantLength, t.expirySec, t.mac);
            }
        }

        @Override
        int headerBytes()
        {
            return FrameDescriptor.HEADER_LENGTH;
        }

        @Override
        public String toString()
        {
            return Opcode.name(opcode) + "{id=" + requestId + ", seg=" + Integer.toUnsignedString(transfer.segmentId) +
                ", off=" + remoteOffset + ", len=" + length + '}';
        }
    }

    /**
     * Small slices to one peer in one vector frame (READV or WRITEV): the entries in order, and what both answers
     * share (an echo of only the id; a refusal of the whole vector without payload; finishing every entry not
     * answered yet).
     */
    abstract static class Entries extends DirectFrame
    {
        final Slice[] slices;
        final int count;
        /** The entries' range bytes. */
        final long bytes;

        Entries(final Slice[] slices, final int count, final long bytes)
        {
            this.slices = slices;
            this.count = count;
            this.bytes = bytes;
        }

        /** Whether an answer with statuses may announce {@code announced} payload bytes. */
        abstract boolean acceptsPayload(long announced);

        /** A vector's answer echoes only the id; a refusal of the whole vector carries no payload. */
        @Override
        boolean echoedBy(final FrameHeader response)
        {
            return response.segmentId == 0 && response.offset == 0 && (response.status == 0 || response.length == 0);
        }

        @Override
        void finish(final int status)
        {
            if (done)
            {
                return;
            }
            done = true;
            for (int i = 0; i < count; i++)
            {
                slices[i].finish(status); // entries already answered ignore it
            }
        }
    }

    /**
     * Small READ slices to one peer in one READV frame (docs/protocol.md, "READV"): the answer is a status per entry,
     * then the bytes of the good entries in order, which land straight in the slices' buffers.
     */
    static final class Vector extends Entries
    {
        Vector(final Slice[] slices, final int count, final long bytes)
        {
            super(slices, count, bytes);
        }

        @Override
        int opcode()
        {
            return Opcode.READV;
        }

        /** The status block plus at most every byte asked for. */
        @Override
        boolean acceptsPayload(final long announced)
        {
            return VectorRead.answerFits(count, bytes, announced);
        }

        @Override
        void encode(final ByteBuf out)
        {
            FrameHeader.encode(out, Opcode.READV, 0, requestId, 0, 0, 0, (long)count * FrameDescriptor.HEADER_LENGTH,
                0, null);
            for (int i = 0; i < count; i++)
            {
                slices[i].encodeWithId(out, i); // the READ it would have been alone, token included
            }
        }

        @Override
        int headerBytes()
        {
            return FrameDescriptor.HEADER_LENGTH * (1 + count);
        }

        @Override
        public String toString()
        {
            return "READV{id=" + requestId + ", reads=" + count + ", bytes=" + bytes + '}';
        }
    }

    /**
     * Small WRITE_COMMIT slices to one peer in one WRITEV frame (docs/protocol.md, "WRITEV"): the request carries a
     * table (each slice's WRITE_COMMIT header, then their records) and then the values straight from the callers'
     * buffers; the answer is a status per entry.
     */
    static final class WriteVector extends Entries
    {
        /** The table's bytes: 64 per entry and the records. */
        final long table;

        WriteVector(final Slice[] slices, final int count, final long bytes, final long table)
        {
            super(slices, count, bytes);
            this.table = table;
        }

        /** True for a slice that may be an entry: a WRITE_COMMIT of 1 byte to a READV entry's bound. */
        static boolean fits(final Slice slice)
        {
            return slice.opcode == Opcode.WRITE_COMMIT && slice.record != null && slice.length > 0 &&
                slice.length <= VectorRead.MAX_ENTRY_BYTES;
        }

        /** The bytes {@code slice} adds to a WRITEV's table: its header and its record. */
        static long tableBytes(final Slice slice)
        {
            return FrameDescriptor.HEADER_LENGTH + slice.record.remaining();
        }

        @Override
        int opcode()
        {
            return Opcode.WRITEV;
        }

        /** Exactly a status per entry. */
        @Override
        boolean acceptsPayload(final long announced)
        {
            return announced == (long)count * FrameDescriptor.VECTOR_STATUS_LENGTH;
        }

        /** The WRITEV header, then the table: each entry's WRITE_COMMIT header (request id = its index), the records. */
        @Override
        void encode(final ByteBuf out)
        {
            FrameHeader.encode(out, Opcode.WRITEV, count, requestId, 0, 0, table, table + bytes, 0, null);
            for (int i = 0; i < count; i++)
            {
                slices[i].encodeWithId(out, i); // the WRITE_COMMIT it would have been alone, token included
            }
            for (int i = 0; i < count; i++)
            {
                out.writeBytes(slices[i].record.duplicate());
            }
        }

        @Override
        int headerBytes()
        {
            return FrameDescriptor.HEADER_LENGTH + (int)table;
        }

        @Override
        public String toString()
        {
            return "WRITEV{id=" + requestId + ", writes=" + count + ", bytes=" + bytes + '}';
        }
    }
}
