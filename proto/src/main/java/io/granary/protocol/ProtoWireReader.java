package io.granary.protocol;

import com.google.protobuf.InvalidProtocolBufferException;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * The protobuf wire format read from a byte array, for the few hot messages Granary decodes without building message
 * objects (the master's batch requests, the client's BatchPutStart answers). A subclass sets {@link #payload},
 * {@link #pos} and {@link #end} and reads tags with {@link #readTag()}; it must treat everything the way
 * protobuf-java's generated parser does: a known field number with an unexpected wire type is an unknown field
 * ({@link #skip}), scalars repeat with the last one winning, string fields must be UTF-8
 * ({@link #validUtf8}), and whatever is malformed is an {@link InvalidProtocolBufferException}. Not thread safe.
 */
public abstract class ProtoWireReader
{
    protected static final int WIRE_VARINT = 0;
    protected static final int WIRE_FIXED64 = 1;
    protected static final int WIRE_LEN = 2;
    protected static final int WIRE_START_GROUP = 3;
    protected static final int WIRE_END_GROUP = 4;
    protected static final int WIRE_FIXED32 = 5;
    /** Protobuf's own recursion limit. */
    private static final int MAX_GROUP_DEPTH = 100;
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    protected byte[] payload;
    protected int pos;
    protected int end;

    /**
     * The next tag (a varint32: higher bits are dropped, as protobuf does); its field number is {@code tag >>> 3} and
     * at least 1, its wire type {@code tag & 7}.
     */
    protected final int readTag() throws InvalidProtocolBufferException
    {
        final int tag = (int)readVarint();
        if (tag >>> 3 <= 0)
        {
            throw new InvalidProtocolBufferException("invalid field number " + (tag >>> 3));
        }
        return tag;
    }

    /** Skips a field this reader does not use (any wire type, groups to their matching end). */
    protected final void skip(final int field, final int wire, final int depth) throws InvalidProtocolBufferException
    {
        switch (wire)
        {
            case WIRE_START_GROUP:
                if (depth >= MAX_GROUP_DEPTH)
                {
                    throw new InvalidProtocolBufferException("groups nested deeper than " + MAX_GROUP_DEPTH);
                }
                skipGroup(field, depth + 1);
                break;
            case WIRE_VARINT:
                readVarint();
                break;
            case WIRE_FIXED64:
                advance(8);
                break;
            case WIRE_LEN:
                advance(readLength());
                break;
            case WIRE_FIXED32:
                advance(4);
                break;
            default:
                throw new InvalidProtocolBufferException("unsupported wire type " + wire);
        }
    }

    /** Skips an unknown (deprecated) group up to its matching end tag, as protobuf's parser does. */
    private void skipGroup(final int groupField, final int depth) throws InvalidProtocolBufferException
    {
        while (true)
        {
            if (pos >= end)
            {
                throw new InvalidProtocolBufferException("truncated group");
            }
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (wire == WIRE_END_GROUP)
            {
                if (field != groupField)
                {
                    throw new InvalidProtocolBufferException("end-group tag does not match its start");
                }
                return;
            }
            skip(field, wire, depth);
        }
    }

    protected final void advance(final int bytes) throws InvalidProtocolBufferException
    {
        if (end - pos < bytes)
        {
            throw new InvalidProtocolBufferException("truncated message");
        }
        pos += bytes;
    }

    /** A length prefix, checked against what is left of the message (or of the enclosing one, {@link #end}). */
    protected final int readLength() throws InvalidProtocolBufferException
    {
        final long len = readVarint();
        if (len < 0 || len > end - pos)
        {
            throw new InvalidProtocolBufferException("length " + len + " beyond the end of the message");
        }
        return (int)len;
    }

    /**
     * A varint of up to ten bytes. The tenth byte is read as protobuf-java reads one from an array: it must not have
     * the continuation bit, and whatever its value it stands for bit 63 alone (only 0x01 is canonical there).
     */
    protected final long readVarint() throws InvalidProtocolBufferException
    {
        long value = 0;
        for (int shift = 0; shift < 63; shift += 7)
        {
            if (pos >= end)
            {
                throw new InvalidProtocolBufferException("truncated varint");
            }
            final byte b = payload[pos++];
            value |= (long)(b & 0x7F) << shift;
            if (b >= 0)
            {
                return value;
            }
        }
        if (pos >= end)
        {
            throw new InvalidProtocolBufferException("truncated varint");
        }
        if (payload[pos++] < 0)
        {
            throw new InvalidProtocolBufferException("malformed varint");
        }
        return value | Long.MIN_VALUE;
    }

    /** A length-delimited string field's bytes, checked to be UTF-8 as protobuf checks proto3 strings; returns them. */
    protected final int readUtf8Length(final int field) throws InvalidProtocolBufferException
    {
        final int len = readLength();
        if (!validUtf8(payload, pos, len))
        {
            throw new InvalidProtocolBufferException("string field " + field + " is not valid UTF-8");
        }
        return len;
    }

    /**
     * Whether {@code len} bytes at {@code off} are well-formed UTF-8 (protobuf refuses string fields that are
     * not, and so must a decoder that stands in for it). ASCII runs go 8 at a time.
     */
    public static boolean validUtf8(final byte[] b, final int off, final int len)
    {
        int i = off;
        final int end = off + len;
        while (i < end)
        {
            if (i + 8 <= end && ((long)LONGS.get(b, i) & 0x8080808080808080L) == 0)
            {
                i += 8;
                continue;
            }
            final int c = b[i] & 0xFF;
            if (c < 0x80)
            {
                i++;
                continue;
            }
            final int extra;
            final int min;
            if (c >= 0xC2 && c <= 0xDF)
            {
                extra = 1;
                min = 0x80;
            }
            else if (c >= 0xE0 && c <= 0xEF)
            {
                extra = 2;
                min = 0x800;
            }
            else if (c >= 0xF0 && c <= 0xF4)
            {
                extra = 3;
                min = 0x10000;
            }
            else
            {
                return false;
            }
            if (end - i <= extra)
            {
                return false;
            }
            int cp = c & (0x3F >> extra);
            for (int k = 1; k <= extra; k++)
            {
                final int cc = b[i + k] & 0xFF;
                if ((cc & 0xC0) != 0x80)
                {
                    return false;
                }
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            {
                return false;
            }
            i += extra + 1;
        }
        return true;
    }
}
