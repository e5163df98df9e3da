package io.granary.protocol;

import io.netty.buffer.ByteBuf;

import static io.granary.protocol.FrameDescriptor.*;

/**
 * A decoded transfer frame header: a reusable mutable holder, not thread safe.
 *
 * <p>{@link #decode(ByteBuf, int)} validates only what any frame must satisfy (magic, version,
 * opcode, length within {@code maxFrameLength}); range checks against a segment are the
 * receiver's job.
 */
public final class FrameHeader
{
    /** Decode outcomes; negative values mean the stream cannot continue and must be closed. */
    public static final int DECODE_OK = 0;
    public static final int DECODE_BAD_MAGIC = -1;
    public static final int DECODE_BAD_VERSION = -2;
    public static final int DECODE_BAD_OPCODE = -3;
    public static final int DECODE_BAD_LENGTH = -4;

    public int opcode;
    public int flags;
    public long requestId;
    public int segmentId;
    public int status;
    public long offset;
    public long length;
    /** Request offset minus the base of the granted extent (unsigned 32-bit); 0 without a token. */
    public long grantDelta;
    /** Length of the granted extent (unsigned 32-bit); 0 without a token. */
    public long grantLength;
    /** Token expiry in epoch seconds (unsigned 32-bit); 0 = the frame carries no token. */
    public long tokenExpirySec;
    public final byte[] tokenMac = new byte[TOKEN_MAC_LENGTH];

    public FrameHeader set(
        final int opcode, final long requestId, final int segmentId, final long offset, final long length)
    {
        this.opcode = opcode;
        this.flags = 0;
        this.requestId = requestId;
        this.segmentId = segmentId;
        this.status = 0;
        this.offset = offset;
        this.length = length;
        this.grantDelta = 0;
        this.grantLength = 0;
        this.tokenExpirySec = 0;
        java.util.Arrays.fill(tokenMac, (byte)0);
        return this;
    }

    /** True when the frame carries an access token (a non-zero expiry). */
    public boolean hasToken()
    {
        return tokenExpirySec != 0;
    }

    /**
     * True when payload bytes follow this header on the wire: {@link #length} of them (a WRITE_COMMIT: {@link #flags}
     * more; a WRITEV's {@code length} includes its table).
     */
    public boolean hasPayload()
    {
        return carriesPayload(opcode, status);
    }

    public static boolean carriesPayload(final int opcode, final int status)
    {
        return opcode == Opcode.WRITE || opcode == Opcode.COMMIT || opcode == Opcode.READV || opcode == Opcode.WRITE_COMMIT ||
            opcode == Opcode.WRITEV || opcode == Opcode.RDMA_CONNECT || ((opcode == Opcode.READ_RESPONSE ||
            opcode == Opcode.READV_RESPONSE || opcode == Opcode.WRITEV_RESPONSE ||
            opcode == Opcode.RDMA_CONNECT_RESPONSE || opcode == Opcode.LOCAL_CONNECT_RESPONSE) && status == 0);
    }

    /** Writes the header (64 bytes) at the writer index of {@code out}. */
    public void encode(final ByteBuf out)
    {
        encode(out, opcode, flags, requestId, segmentId, status, offset, length, grantDelta, grantLength,
            tokenExpirySec, tokenMac);
    }

    /** Writes a header with zero grant fields: every response, and requests without a token (expiry 0, MAC null). */
    public static void encode(
        final ByteBuf out,
        final int opcode,
        final int flags,
        final long requestId,
        final int segmentId,
        final int status,
        final long offset,
        final long length,
        final long tokenExpirySec,
        final byte[] tokenMac)
    {
        encode(out, opcode, flags, requestId, segmentId, status, offset, length, 0, 0, tokenExpirySec, tokenMac);
    }

    /**
     * Writes a header (64 bytes) at the writer index of {@code out}; the grant fields and the expiry are written as
     * unsigned 32-bit values, a null MAC as zeros.
     */
    public static void encode(
        final ByteBuf out,
        final int opcode,
        final int flags,
        final long requestId,
        final int segmentId,
        final int status,
        final long offset,
        final long length,
        final long grantDelta,
        final long grantLength,
        final long tokenExpirySec,
        final byte[] tokenMac)
    {
        out.ensureWritable(HEADER_LENGTH);
        out.writeInt(MAGIC);
        out.writeByte(VERSION);
        out.writeByte(opcode);
        out.writeShort(flags);
        out.writeLong(requestId);
        out.writeInt(segmentId);
        out.writeInt(status);
        out.writeLong(offset);
        out.writeInt((int)length);
        out.writeInt((int)grantDelta);
        out.writeInt((int)grantLength);
        out.writeInt((int)tokenExpirySec);
        if (tokenMac == null)
        {
            out.writeZero(TOKEN_MAC_LENGTH);
        }
        else
        {
            out.writeBytes(tokenMac, 0, TOKEN_MAC_LENGTH);
        }
    }

    /**
     * Reads a header from the reader index of {@code in}, which must hold at least
     * {@link FrameDescriptor#HEADER_LENGTH} readable bytes; the reader index advances by exactly that.
     *
     * @return {@link #DECODE_OK} or one of the negative DECODE_ codes.
     */
    public int decode(final ByteBuf in, final int maxFrameLength)
    {
        final int start = in.readerIndex();
        final int magic = in.getInt(start + MAGIC_OFFSET);
        final int version = in.getUnsignedByte(start + VERSION_OFFSET);
        opcode = in.getUnsignedByte(start + OPCODE_OFFSET);
        flags = in.getUnsignedShort(start + FLAGS_OFFSET);
        requestId = in.getLong(start + REQUEST_ID_OFFSET);
        segmentId = in.getInt(start + SEGMENT_ID_OFFSET);
        status = in.getInt(start + STATUS_OFFSET);
        offset = in.getLong(start + OFFSET_OFFSET);
        length = in.getUnsignedInt(start + LENGTH_OFFSET);
        grantDelta = in.getUnsignedInt(start + GRANT_DELTA_OFFSET);
        grantLength = in.getUnsignedInt(start + GRANT_LENGTH_OFFSET);
        tokenExpirySec = in.getUnsignedInt(start + TOKEN_EXPIRY_OFFSET);
        in.getBytes(start + TOKEN_MAC_OFFSET, tokenMac);
        in.skipBytes(HEADER_LENGTH);

        if (magic != MAGIC)
        {
            return DECODE_BAD_MAGIC;
        }
        if (version != VERSION)
        {
            return DECODE_BAD_VERSION;
        }
        if (!Opcode.isRequest(opcode) && !Opcode.isResponse(opcode))
        {
            return DECODE_BAD_OPCODE;
        }
        if (length > maxFrameLength)
        {
            return DECODE_BAD_LENGTH;
        }
        return DECODE_OK;
    }

    public static String decodeErrorText(final int decodeResult)
    {
        switch (decodeResult)
        {
            case DECODE_BAD_MAGIC: return "bad magic (not a Granary transfer frame)";
            case DECODE_BAD_VERSION: return "unsupported frame version";
            case DECODE_BAD_OPCODE: return "unknown opcode";
            case DECODE_BAD_LENGTH: return "frame length above the limit";
            default: return "ok";
        }
    }

    @Override
    public String toString()
    {
        return "FrameHeader{op=" + Opcode.name(opcode) + ", id=" + requestId + ", seg=" + Integer.toUnsignedString(segmentId) +
            ", status=" + status + ", offset=" + offset + ", length=" + length +
            (hasToken() ? ", grant=-" + grantDelta + "+" + grantLength + ", expiry=" + tokenExpirySec : "") + '}';
    }
}
