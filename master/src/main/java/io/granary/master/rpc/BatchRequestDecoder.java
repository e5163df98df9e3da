package io.granary.master.rpc;

import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.master.meta.KeyBatch;
import io.granary.proto.PutOptions;
import io.granary.proto.SettledReplicas;
import io.granary.protocol.ProtoWireReader;
import io.netty.buffer.ByteBuf;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Decodes the protobuf wire form of BatchKeysRequest, BatchProbeKeyRequest and BatchPutStartRequest straight from a
 * frame into a {@link KeyBatch}: the payload is copied once into a reusable array and the keys are
 * ranges of it, hashed but never turned into Strings. Unknown fields are skipped as protobuf
 * requires; anything malformed is an InvalidProtocolBufferException. One instance per connection
 * (it reuses its buffers); not thread safe.
 */
final class BatchRequestDecoder extends ProtoWireReader
{
    private static final int INITIAL_PAYLOAD_BYTES = 32 << 10;
    /** A buffer grown above this for one big request is dropped after it, so idle connections stay small. */
    private static final int RETAINED_PAYLOAD_BYTES = 1 << 20;

    final KeyBatch keys = new KeyBatch(1024, 16);
    String tenant;
    int mode;
    int candidateSize;
    /** BatchProbeKeyRequest.with_replicas, replicas_from and replicas_count (uint32s, kept as their 32 bits). */
    boolean withReplicas;
    int replicasFrom;
    int replicasCount;
    /** BatchKeysRequest.shared_grants or BatchProbeKeyRequest.shared_grants. */
    boolean sharedGrants;
    /** BatchKeysRequest.client_id ("" when absent or for other requests). */
    String clientId;
    /** BatchKeysRequest.crc32c, packed or not, in order: the first {@link #crcCount} entries. */
    int[] crcs = new int[128];
    int crcCount;

    BatchRequestDecoder()
    {
        payload = new byte[INITIAL_PAYLOAD_BYTES];
    }

    /**
     * BatchKeysRequest: 1 tenant, 2 client_id, 3 repeated keys, 4 packed fixed32 crc32c (BatchPutEnd's), 5 repeated
     * SettledReplicas (BatchPutRevoke's, unused here: checked as protobuf checks it), 6 shared_grants.
     */
    void decodeBatchKeys(final ByteBuf in) throws InvalidProtocolBufferException
    {
        decode(in, 3, 1, -1, -1, -1, 2, 4, 5, 6);
    }

    /**
     * BatchProbeKeyRequest: 1 tenant, 2 mode, 3 candidate_size, 4 repeated keys, 5 with_replicas, 6 replicas_from,
     * 7 replicas_count, 8 shared_grants.
     */
    void decodeBatchProbe(final ByteBuf in) throws InvalidProtocolBufferException
    {
        decode(in, 4, 1, 2, 3, 5, -1, -1, -1, 8);
    }

    private void decode(
        final ByteBuf in, final int keysField, final int tenantField, final int modeField, final int sizeField,
        final int flagField, final int clientIdField, final int crcField, final int ignoredSettledField,
        final int grantsField)
        throws InvalidProtocolBufferException
    {
        load(in);
        tenant = "";
        mode = 0;
        candidateSize = 0;
        withReplicas = false;
        replicasFrom = 0;
        replicasCount = 0;
        sharedGrants = false;
        clientId = "";
        crcCount = 0;
        while (pos < end)
        {
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (wire == WIRE_LEN && (field == keysField || field == tenantField))
            {
                final int len = readUtf8Length(field);
                if (field == keysField)
                {
                    keys.addRange(pos, len);
                }
                else
                {
                    tenant = new String(payload, pos, len, StandardCharsets.UTF_8);
                }
                pos += len;
            }
            else if (wire == WIRE_LEN && field == clientIdField)
            {
                // Protobuf refuses the message if it is not UTF-8: so must we.
                final int len = readUtf8Length(field);
                clientId = new String(payload, pos, len, StandardCharsets.UTF_8);
                pos += len;
            }
            else if (wire == WIRE_LEN && field == crcField)
            {
                // A packed run; protobuf refuses one whose length is not a multiple of 4: so must we.
                final int len = readLength();
                if (len % 4 != 0)
                {
                    throw new InvalidProtocolBufferException("packed fixed32 field " + field + " of " + len + " bytes");
                }
                for (final int stop = pos + len; pos < stop; pos += 4)
                {
                    addCrc(pos);
                }
            }
            else if (wire == WIRE_FIXED32 && field == crcField)
            {
                // One value not packed (protobuf accepts a repeated scalar either way).
                if (end - pos < 4)
                {
                    throw new InvalidProtocolBufferException("truncated fixed32 field " + field);
                }
                addCrc(pos);
                pos += 4;
            }
            else if (wire == WIRE_LEN && field == ignoredSettledField)
            {
                // Unused here (BatchPutRevoke's settled replicas), but protobuf refuses the message if an entry is
                // malformed: so must we. Only revokes carry it, so parsing it the slow way costs nothing that matters.
                final int len = readLength();
                SettledReplicas.parser().parseFrom(payload, pos, len);
                pos += len;
            }
            else if (wire == WIRE_VARINT && field == modeField)
            {
                mode = (int)readVarint();
            }
            else if (wire == WIRE_VARINT && field == sizeField)
            {
                candidateSize = (int)readVarint();
            }
            else if (wire == WIRE_VARINT && field == flagField)
            {
                withReplicas = readVarint() != 0; // a bool: any non-zero varint is true, as protobuf reads it
            }
            else if (wire == WIRE_VARINT && field == grantsField)
            {
                sharedGrants = readVarint() != 0;
            }
            else if (wire == WIRE_VARINT && flagField > 0 && field == flagField + 1)
            {
                replicasFrom = (int)readVarint();
            }
            else if (wire == WIRE_VARINT && flagField > 0 && field == flagField + 2)
            {
                replicasCount = (int)readVarint();
            }
            else
            {
                skip(field, wire, 0);
            }
        }
    }

    /** Copies the request into {@link #payload} and starts reading it; the key batch wraps it. */
    private void load(final ByteBuf in)
    {
        final int length = in.readableBytes();
        if (payload.length < length)
        {
            payload = new byte[Math.max(length, payload.length * 2)];
        }
        in.readBytes(payload, 0, length);
        pos = 0;
        end = length;
        keys.wrap(payload);
    }

    /** BatchPutStartRequest.value_lengths: the first {@link #lengthCount} entries. */
    long[] lengths = new long[128];
    int lengthCount;
    /** BatchPutStartRequest.options (every occurrence merged, as protobuf merges a repeated singular message). */
    PutOptions options;
    /** BatchPutStartRequest.per_key_options and avoid_node_ids, in order. */
    final List<PutOptions> perKeyOptions = new ArrayList<>();
    final List<String> avoidNodeIds = new ArrayList<>();

    /**
     * BatchPutStartRequest: 1 tenant, 2 client_id, 3 repeated keys, 4 repeated uint64 value_lengths (packed or not),
     * 5 PutOptions options, 6 repeated avoid_node_ids, 7 repeated PutOptions per_key_options, 8 shared_grants. The
     * options messages (one per batch, or one per key when they differ) are parsed by protobuf; the keys are left as
     * ranges of the payload.
     */
    void decodeBatchPutStart(final ByteBuf in) throws InvalidProtocolBufferException
    {
        load(in);
        tenant = "";
        clientId = "";
        sharedGrants = false;
        lengthCount = 0;
        options = null;
        perKeyOptions.clear();
        avoidNodeIds.clear();
        while (pos < end)
        {
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (wire == WIRE_LEN && (field == 1 || field == 2 || field == 3 || field == 6))
            {
                final int len = readUtf8Length(field);
                if (field == 3)
                {
                    keys.addRange(pos, len);
                }
                else
                {
                    final String value = new String(payload, pos, len, StandardCharsets.UTF_8);
                    if (field == 1)
                    {
                        tenant = value;
                    }
                    else if (field == 2)
                    {
                        clientId = value;
                    }
                    else
                    {
                        avoidNodeIds.add(value);
                    }
                }
                pos += len;
            }
            else if (wire == WIRE_LEN && field == 4)
            {
                final int len = readLength();
                for (final int stop = pos + len; pos < stop; )
                {
                    final long value = readVarint();
                    if (pos > stop)
                    {
                        throw new InvalidProtocolBufferException("a packed varint runs past its field");
                    }
                    addLength(value);
                }
            }
            else if (wire == WIRE_VARINT && field == 4)
            {
                addLength(readVarint());
            }
            else if (wire == WIRE_LEN && (field == 5 || field == 7))
            {
                final int len = readLength();
                final PutOptions parsed = PutOptions.parser().parseFrom(payload, pos, len);
                pos += len;
                if (field == 7)
                {
                    perKeyOptions.add(parsed);
                }
                else
                {
                    options = options == null ? parsed : options.toBuilder().mergeFrom(parsed).build();
                }
            }
            else if (wire == WIRE_VARINT && field == 8)
            {
                sharedGrants = readVarint() != 0;
            }
            else
            {
                skip(field, wire, 0);
            }
        }
        if (options == null)
        {
            options = PutOptions.getDefaultInstance();
        }
    }

    private void addLength(final long value)
    {
        if (lengthCount == lengths.length)
        {
            lengths = java.util.Arrays.copyOf(lengths, lengthCount * 2);
        }
        lengths[lengthCount++] = value;
    }

    /** Appends the little-endian fixed32 at {@code at} to {@link #crcs}. */
    private void addCrc(final int at)
    {
        if (crcCount == crcs.length)
        {
            crcs = java.util.Arrays.copyOf(crcs, crcCount * 2);
        }
        crcs[crcCount++] = (payload[at] & 0xFF) | (payload[at + 1] & 0xFF) << 8 | (payload[at + 2] & 0xFF) << 16 |
            (payload[at + 3] & 0xFF) << 24;
    }

    /** Lets go of a buffer that one big request grew; call once the decoded batch is no longer used. */
    void trim()
    {
        if (crcs.length > RETAINED_PAYLOAD_BYTES / 4)
        {
            crcs = new int[128];
        }
        if (lengths.length > RETAINED_PAYLOAD_BYTES / 8)
        {
            lengths = new long[128];
        }
        options = null;
        perKeyOptions.clear();
        avoidNodeIds.clear();
        if (payload.length > RETAINED_PAYLOAD_BYTES)
        {
            payload = new byte[INITIAL_PAYLOAD_BYTES];
            keys.wrap(payload);
        }
    }
}
