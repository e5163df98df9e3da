package io.granary.client.internal;

import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.client.GranaryException;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.PutStartResponse;
import io.granary.proto.Replica;
import io.granary.proto.SettledReplica;
import io.granary.protocol.ProtoWireReader;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A BatchPutStart answer as the put path uses it: the request's code, and per key its code, the version and the replica
 * extents, in parallel arrays. Decoded straight from the lookup port's reply ({@link #decode}: no message objects, the
 * node id and endpoint Strings and the shared grants' token arrays made once per run of equal bytes instead of once per
 * replica) or taken from a gRPC answer ({@link #of}); both give the same fields. A replica's fields are checked when
 * the put uses them ({@link #extents}), so that one unusable replica fails its key only. Replica fields the put path
 * does not read (status, segment name) are checked as protobuf checks them and dropped.
 */
final class StartedPuts extends ProtoWireReader
{
    private static final int INITIAL_KEYS = 16;

    /** BatchPutStartResponse.code. */
    int code;
    /** Number of results (keys answered). */
    int count;
    private int[] codes = new int[INITIAL_KEYS];
    private long[] versions = new long[INITIAL_KEYS];
    /** Result j's replicas are [firstReplica[j], firstReplica[j + 1]). */
    private int[] firstReplica = new int[INITIAL_KEYS + 1];

    private int replicaCount;
    private String[] nodeIds = new String[INITIAL_KEYS];
    private String[] endpoints = new String[INITIAL_KEYS];
    private int[] segmentIds = new int[INITIAL_KEYS];
    private long[] offsets = new long[INITIAL_KEYS];
    private long[] lengths = new long[INITIAL_KEYS];
    private byte[][] tokens = new byte[INITIAL_KEYS][];
    private long[] grantOffsets = new long[INITIAL_KEYS];
    private long[] grantLengths = new long[INITIAL_KEYS];

    // The last node id, endpoint and token decoded: the next one with equal bytes is the same object.
    private final Repeated nodeId = new Repeated(1);
    private final Repeated endpoint = new Repeated(2);
    private byte[] lastToken;

    private StartedPuts()
    {
    }

    /** The answer from a BatchPutStartResponse's protobuf bytes; refuses exactly what protobuf-java's parser refuses. */
    static StartedPuts decode(final byte[] bytes, final int offset, final int length)
        throws InvalidProtocolBufferException
    {
        final StartedPuts answer = new StartedPuts();
        answer.read(bytes, offset, length);
        return answer;
    }

    /** The same answer from a message (the gRPC path). */
    static StartedPuts of(final BatchPutStartResponse response)
    {
        final StartedPuts answer = new StartedPuts();
        answer.code = response.getCode();
        for (final PutStartResponse result : response.getResultsList())
        {
            final int j = answer.addResult();
            answer.codes[j] = result.getCode();
            answer.versions[j] = result.getVersion();
            for (final Replica r : result.getReplicasList())
            {
                final int k = answer.addReplica();
                answer.nodeIds[k] = r.getNodeId();
                answer.endpoints[k] = r.getEndpoint();
                answer.segmentIds[k] = r.getSegmentId();
                answer.offsets[k] = r.getOffset();
                answer.lengths[k] = r.getLength();
                answer.tokens[k] = r.getAccessToken().isEmpty() ? null : r.getAccessToken().toByteArray();
                answer.grantOffsets[k] = r.getGrantOffset();
                answer.grantLengths[k] = r.getGrantLength();
            }
            answer.firstReplica[j + 1] = answer.replicaCount;
        }
        return answer;
    }

    /** Result {@code j}'s code (an ErrorCode number). */
    int code(final int j)
    {
        return codes[j];
    }

    /** Result {@code j}'s version (0: the master issued none). */
    long version(final int j)
    {
        return versions[j];
    }

    /** Number of replicas of result {@code j}. */
    int replicas(final int j)
    {
        return firstReplica[j + 1] - firstReplica[j];
    }

    /**
     * Result {@code j}'s replicas as extents the writes use, each checked ({@link ReplicaExtent#checked}).
     *
     * @throws GranaryException INTERNAL_ERROR naming {@code key} when one is unusable.
     */
    List<ReplicaExtent> extents(final int j, final String key)
    {
        final int from = firstReplica[j];
        final int to = firstReplica[j + 1];
        final List<ReplicaExtent> extents = new ArrayList<>(to - from);
        for (int k = from; k < to; k++)
        {
            extents.add(ReplicaExtent.checked(nodeIds[k], endpoints[k], segmentIds[k], offsets[k], lengths[k], tokens[k],
                grantOffsets[k], grantLengths[k], key));
        }
        return extents;
    }

    /** Every replica of result {@code j}, for a revoke of a put that sent no bytes at all. */
    List<SettledReplica> unwritten(final int j)
    {
        final List<SettledReplica> all = new ArrayList<>(replicas(j));
        for (int k = firstReplica[j]; k < firstReplica[j + 1]; k++)
        {
            all.add(WriteOperation.settled(nodeIds[k], segmentIds[k], offsets[k]));
        }
        return all;
    }

    /** Every field, one result per line (tokens in hex, shared arrays not told apart): for logs and tests. */
    @Override
    public String toString()
    {
        final StringBuilder out = new StringBuilder("code=").append(code).append(" results=").append(count);
        for (int j = 0; j < count; j++)
        {
            out.append("\n[").append(j).append("] code=").append(codes[j]).append(" version=")
                .append(Long.toUnsignedString(versions[j]));
            for (int k = firstReplica[j]; k < firstReplica[j + 1]; k++)
            {
                out.append(" {").append(nodeIds[k]).append('|').append(endpoints[k]).append('|')
                    .append(Integer.toUnsignedString(segmentIds[k])).append('|')
                    .append(Long.toUnsignedString(offsets[k])).append('+').append(Long.toUnsignedString(lengths[k]))
                    .append('|').append(tokens[k] == null ? "-" : java.util.HexFormat.of().formatHex(tokens[k]))
                    .append('|').append(Long.toUnsignedString(grantOffsets[k])).append('+')
                    .append(Long.toUnsignedString(grantLengths[k])).append('}');
            }
        }
        return out.toString();
    }

    // ------------------------------------------------------------------------------------------- decoding

    /** BatchPutStartResponse: 1 int32 code, 2 repeated PutStartResponse results. */
    private void read(final byte[] bytes, final int offset, final int length) throws InvalidProtocolBufferException
    {
        payload = bytes;
        pos = offset;
        end = offset + length;
        while (pos < end)
        {
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (field == 1 && wire == WIRE_VARINT)
            {
                code = (int)readVarint();
            }
            else if (field == 2 && wire == WIRE_LEN)
            {
                final int len = readLength(); // first: it moves pos
                final int stop = pos + len;
                final int outer = end;
                end = stop;
                readResult(addResult());
                end = outer;
            }
            else
            {
                skip(field, wire, 0);
            }
        }
        payload = null; // the reply buffer is the connection's: keep no hold on it
    }

    /** PutStartResponse (between pos and end): 1 int32 code, 2 repeated Replica replicas, 3 uint64 version. */
    private void readResult(final int j) throws InvalidProtocolBufferException
    {
        while (pos < end)
        {
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (field == 1 && wire == WIRE_VARINT)
            {
                codes[j] = (int)readVarint();
            }
            else if (field == 2 && wire == WIRE_LEN)
            {
                final int len = readLength(); // first: it moves pos
                final int stop = pos + len;
                final int outer = end;
                end = stop;
                readReplica(addReplica());
                end = outer;
            }
            else if (field == 3 && wire == WIRE_VARINT)
            {
                versions[j] = readVarint();
            }
            else
            {
                skip(field, wire, 0); // an end-group tag here is refused there, as protobuf refuses it
            }
        }
        firstReplica[j + 1] = replicaCount;
    }

    /**
     * Replica (between pos and end): 1 node_id, 2 endpoint, 3 uint32 segment_id, 4 uint64 offset, 5 uint64 length,
     * 6 enum status, 7 segment_name, 8 bytes access_token, 9 uint64 grant_offset, 10 uint64 grant_length.
     */
    private void readReplica(final int k) throws InvalidProtocolBufferException
    {
        nodeIds[k] = "";
        endpoints[k] = "";
        while (pos < end)
        {
            final int tag = readTag();
            final int field = tag >>> 3;
            final int wire = tag & 7;
            if (wire == WIRE_LEN && field == 1)
            {
                final int len = readLength();
                nodeIds[k] = nodeId.read(pos, len);
                pos += len;
            }
            else if (wire == WIRE_LEN && field == 2)
            {
                final int len = readLength();
                endpoints[k] = endpoint.read(pos, len);
                pos += len;
            }
            else if (wire == WIRE_LEN && field == 7)
            {
                // The segment name: unused, but protobuf refuses it when not UTF-8. (Length first: it moves pos.)
                final int len = readUtf8Length(field);
                pos += len;
            }
            else if (wire == WIRE_LEN && field == 8)
            {
                final int len = readLength();
                tokens[k] = token(pos, len);
                pos += len;
            }
            else if (wire == WIRE_VARINT && field >= 3 && field <= 10 && field != 7 && field != 8)
            {
                final long value = readVarint();
                switch (field)
                {
                    case 3 -> segmentIds[k] = (int)value;
                    case 4 -> offsets[k] = value;
                    case 5 -> lengths[k] = value;
                    case 9 -> grantOffsets[k] = value;
                    case 10 -> grantLengths[k] = value;
                    default ->
                    {
                        // 6: the status, which the put path does not read
                    }
                }
            }
            else
            {
                skip(field, wire, 0); // an end-group tag here is refused there, as protobuf refuses it
            }
        }
    }

    /** A string field whose value often repeats the previous replica's: decoded and UTF-8-checked once per run. */
    private final class Repeated
    {
        private final int field;
        private String last = "";
        private int lastAt;
        private int lastLength;

        Repeated(final int field)
        {
            this.field = field;
        }

        String read(final int at, final int len) throws InvalidProtocolBufferException
        {
            if (len != lastLength || !Arrays.equals(payload, at, at + len, payload, lastAt, lastAt + len))
            {
                if (!validUtf8(payload, at, len))
                {
                    throw new InvalidProtocolBufferException("string field " + field + " is not valid UTF-8");
                }
                last = len == 0 ? "" : new String(payload, at, len, StandardCharsets.UTF_8);
            }
            lastAt = at;
            lastLength = len;
            return last;
        }
    }

    /** The token's bytes (null when empty, as the message path gives); a shared grant's token is one array. */
    private byte[] token(final int at, final int len)
    {
        if (len == 0)
        {
            return null;
        }
        if (lastToken == null || !Arrays.equals(payload, at, at + len, lastToken, 0, lastToken.length))
        {
            lastToken = Arrays.copyOfRange(payload, at, at + len);
        }
        return lastToken;
    }

    private int addResult()
    {
        if (count == codes.length)
        {
            final int capacity = count * 2;
            codes = Arrays.copyOf(codes, capacity);
            versions = Arrays.copyOf(versions, capacity);
            firstReplica = Arrays.copyOf(firstReplica, capacity + 1);
        }
        final int j = count++;
        codes[j] = 0;
        versions[j] = 0;
        firstReplica[j] = replicaCount;
        firstReplica[j + 1] = replicaCount;
        return j;
    }

    private int addReplica()
    {
        if (replicaCount == nodeIds.length)
        {
            final int capacity = replicaCount * 2;
            nodeIds = Arrays.copyOf(nodeIds, capacity);
            endpoints = Arrays.copyOf(endpoints, capacity);
            segmentIds = Arrays.copyOf(segmentIds, capacity);
            offsets = Arrays.copyOf(offsets, capacity);
            lengths = Arrays.copyOf(lengths, capacity);
            tokens = Arrays.copyOf(tokens, capacity);
            grantOffsets = Arrays.copyOf(grantOffsets, capacity);
            grantLengths = Arrays.copyOf(grantLengths, capacity);
        }
        return replicaCount++;
    }
}
