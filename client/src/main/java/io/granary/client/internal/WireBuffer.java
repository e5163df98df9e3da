package io.granary.client.internal;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.MessageLite;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * A growable byte buffer that writes protobuf wire format directly, so a batch of keys is encoded
 * in one pass (ASCII keys are copied char by char, no intermediate message or UTF-8 size pass).
 * Not thread safe.
 */
final class WireBuffer
{
    private static final int WIRE_VARINT = 0;
    private static final int WIRE_LEN = 2;

    private byte[] bytes;
    private int position;

    WireBuffer(final int capacity)
    {
        bytes = new byte[capacity];
    }

    byte[] array()
    {
        return bytes;
    }

    int position()
    {
        return position;
    }

    void reset(final int position)
    {
        ensure(position);
        this.position = position;
    }

    /** Makes room for {@code more} bytes after the position (the array may be replaced). */
    void ensure(final int more)
    {
        if (position + more > bytes.length)
        {
            bytes = java.util.Arrays.copyOf(bytes, Math.max(position + more, bytes.length * 2));
        }
    }

    void writeMessage(final MessageLite message) throws IOException
    {
        final int size = message.getSerializedSize();
        ensure(size);
        final CodedOutputStream cos = CodedOutputStream.newInstance(bytes, position, size);
        message.writeTo(cos);
        cos.flush();
        position += size;
    }

    void writeVarint(final long value)
    {
        ensure(10);
        long v = value;
        while ((v & ~0x7FL) != 0)
        {
            bytes[position++] = (byte)((v & 0x7F) | 0x80);
            v >>>= 7;
        }
        bytes[position++] = (byte)v;
    }

    void writeVarintField(final int field, final long value)
    {
        if (value != 0)
        {
            writeVarint(((long)field << 3) | WIRE_VARINT);
            writeVarint(value);
        }
    }

    /** A string field; skipped when empty, as proto3 does. */
    void writeStringField(final int field, final String value)
    {
        if (!value.isEmpty())
        {
            writeString(field, value);
        }
    }

    /** Every element of a repeated string field. */
    void writeStrings(final int field, final List<String> values)
    {
        for (int i = 0, n = values.size(); i < n; i++)
        {
            writeString(field, values.get(i));
        }
    }

    private void writeString(final int field, final String value)
    {
        final int chars = value.length();
        writeVarint(((long)field << 3) | WIRE_LEN);
        ensure(5 + chars);
        // Optimistic ASCII copy: one byte per char, length known up front.
        final int lengthAt = position;
        int p = lengthAt + varintSize(chars);
        boolean ascii = true;
        for (int i = 0; i < chars; i++)
        {
            final char c = value.charAt(i);
            if (c >= 0x80)
            {
                ascii = false;
                break;
            }
            bytes[p++] = (byte)c;
        }
        if (ascii)
        {
            writeVarint(chars);
            position = p;
            return;
        }
        final byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
        writeVarint(utf8.length);
        ensure(utf8.length);
        System.arraycopy(utf8, 0, bytes, position, utf8.length);
        position += utf8.length;
    }

    private static int varintSize(final int value)
    {
        int size = 1;
        int v = value;
        while ((v & ~0x7F) != 0)
        {
            size++;
            v >>>= 7;
        }
        return size;
    }
}
