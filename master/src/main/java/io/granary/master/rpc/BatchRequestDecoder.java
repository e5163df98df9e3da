package io.granary.master.rpc;

import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.master.meta.KeyBatch;
import io.netty.buffer.ByteBuf;

import java.nio.charset.StandardCharsets;

/**
 * Decodes the protobuf wire form of BatchKeysRequest and BatchProbeKeyRequest straight from a
 * frame into a {@link KeyBatch}: the key bytes are copied and hashed, never turned into Strings.
 * Unknown fields are skipped as protobuf requires; anything malformed is an
 * InvalidProtocolBufferException. One instance per connection (it reuses its batch); not thread safe.
 */
final class BatchRequestDecoder
{
    private static final int WIRE_VARINT = 0;
    private static final int WIRE_FIXED64 = 1;
    private static final int WIRE_LEN = 2;
    private static final int WIRE_FIXED32 = 5;

    final KeyBatch keys = new KeyBatch(1024, 32 << 10);
    String tenant;
    int mode;
    int candidateSize;

    /** BatchKeysRequest: 1 tenant, 2 client_id, 3 repeated keys. */
    void decodeBatchKeys(final ByteBuf in) throws InvalidProtocolBufferException
    {
        decode(in, 3, 1, -1, -1);
    }

    /** BatchProbeKeyRequest: 1 tenant, 2 mode, 3 candidate_size, 4 repeated keys. */
    void decodeBatchProbe(final ByteBuf in) throws InvalidProtocolBufferException
    {
        decode(in, 4, 1, 2, 3);
    }

    private void decode(
        final ByteBuf in, final int keysField, final int tenantField, final int modeField, final int sizeField)
        throws InvalidProtocolBufferException
    {
        keys.clear();
        tenant = "";
        mode = 0;
        candidateSize = 0;
        while (in.isReadable())
        {
            final long tag = readVarint(in);
            final int field = (int)(tag >>> 3);
            final int wire = (int)(tag & 7);
            if (field <= 0)
            {
                throw new InvalidProtocolBufferException("invalid field number " + field);
            }
            if (wire == WIRE_LEN && (field == keysField || field == tenantField))
            {
                final int len = readLength(in);
                if (field == keysField)
                {
                    final int at = keys.reserve(len);
                    in.readBytes(keys.bytes(), at, len);
                    keys.commit(at, len);
                }
                else
                {
                    tenant = in.readCharSequence(len, StandardCharsets.UTF_8).toString();
                }
            }
            else if (wire == WIRE_VARINT && field == modeField)
            {
                mode = (int)readVarint(in);
            }
            else if (wire == WIRE_VARINT && field == sizeField)
            {
                candidateSize = (int)readVarint(in);
            }
            else
            {
                skip(in, wire);
            }
        }
    }

    private static void skip(final ByteBuf in, final int wire) throws InvalidProtocolBufferException
    {
        switch (wire)
        {
            case WIRE_VARINT:
                readVarint(in);
                break;
            case WIRE_FIXED64:
                need(in, 8);
                in.skipBytes(8);
                break;
            case WIRE_LEN:
                in.skipBytes(readLength(in));
                break;
            case WIRE_FIXED32:
                need(in, 4);
                in.skipBytes(4);
                break;
            default:
                throw new InvalidProtocolBufferException("unsupported wire type " + wire);
        }
    }

    private static int readLength(final ByteBuf in) throws InvalidProtocolBufferException
    {
        final long len = readVarint(in);
        if (len < 0 || len > in.readableBytes())
        {
            throw new InvalidProtocolBufferException("length " + len + " beyond the end of the message");
        }
        return (int)len;
    }

    private static void need(final ByteBuf in, final int bytes) throws InvalidProtocolBufferException
    {
        if (in.readableBytes() < bytes)
        {
            throw new InvalidProtocolBufferException("truncated message");
        }
    }

    private static long readVarint(final ByteBuf in) throws InvalidProtocolBufferException
    {
        long value = 0;
        for (int shift = 0; shift < 64; shift += 7)
        {
            if (!in.isReadable())
            {
                throw new InvalidProtocolBufferException("truncated varint");
            }
            final byte b = in.readByte();
            value |= (long)(b & 0x7F) << shift;
            if (b >= 0)
            {
                return value;
            }
        }
        throw new InvalidProtocolBufferException("malformed varint");
    }
}
