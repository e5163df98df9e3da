package io.granary.master.rpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import io.granary.master.meta.ReplicaRecord;
import io.granary.master.meta.SharedGrants;
import io.granary.master.segment.MountedSegment;
import io.granary.protocol.Opcode;

import java.io.IOException;
import java.util.Arrays;

/**
 * A BatchPutStartResponse or BatchGetReplicaListResponse written straight to the wire in protobuf's encoding, from
 * each key's scalars and the batch's {@link SharedGrants}, without building a message object per key and per
 * replica (the lookup port's batches with shared grants, which every current client asks for). The bytes are those
 * protobuf-java writes for the message {@link MasterRequestHandler} builds for the same answer (fields in number
 * order, proto3 defaults left out); {@code BatchReplicaAnswerTest} holds the two to each other.
 *
 * <p>One instance per lookup connection, reused: {@link #startPuts} or {@link #startLookups}, one {@code put} or
 * {@code lookup} per key in request order, {@link #finish} with the signed grants, then {@link #serializedSize} and
 * {@link #writeTo}.
 */
public final class BatchReplicaAnswer implements LookupServer.WireAnswer
{
    // BatchPutStartResponse / BatchGetReplicaListResponse: 1 code, 2 results.
    private static final int BATCH_RESULTS = 2;
    // PutStartResponse: 1 code, 2 replicas, 3 version.
    private static final int PUT_REPLICAS = 2;
    private static final int PUT_VERSION = 3;
    // GetReplicaListResponse: 1 code, 2 value_length, 3 replicas, 4 lease_ttl_ms, 5 crc32c.
    private static final int GET_VALUE_LENGTH = 2;
    private static final int GET_REPLICAS = 3;
    private static final int GET_LEASE_TTL_MS = 4;
    private static final int GET_CRC32C = 5;
    // Replica.
    private static final int R_NODE_ID = 1;
    private static final int R_ENDPOINT = 2;
    private static final int R_SEGMENT_ID = 3;
    private static final int R_OFFSET = 4;
    private static final int R_LENGTH = 5;
    private static final int R_STATUS = 6;
    private static final int R_SEGMENT_NAME = 7;
    private static final int R_ACCESS_TOKEN = 8;
    private static final int R_GRANT_OFFSET = 9;
    private static final int R_GRANT_LENGTH = 10;
    private static final int CODE = 1;

    private boolean puts;
    private int n;
    private int[] codes = new int[128];
    /** PutStart: the version; lookup: the value length. */
    private long[] values = new long[128];
    private int[] crcs = new int[128];
    private boolean[] hasCrc = new boolean[128];
    private long leaseTtlMs;
    private SharedGrants grants;
    /** Reused by the requests of this answer's connection (see {@link #grants}). */
    private final SharedGrants writeGrants = new SharedGrants(Opcode.WRITE);
    private final SharedGrants readGrants = new SharedGrants(Opcode.READ);
    private int[] resultSizes = new int[128];
    private int[] replicaSizes = new int[128];
    private int size;

    /**
     * Emptied shared grants of {@code opcode} (READ or WRITE) for the next request written into this answer; valid
     * until the one after it.
     */
    SharedGrants grants(final int opcode)
    {
        return (opcode == Opcode.WRITE ? writeGrants : readGrants).reset();
    }

    /** Begins a BatchPutStartResponse. */
    void startPuts()
    {
        start(true, 0);
    }

    /** Begins a BatchGetReplicaListResponse whose OK answers carry {@code leaseTtlMs}. */
    void startLookups(final long leaseTtlMs)
    {
        start(false, leaseTtlMs);
    }

    private void start(final boolean puts, final long leaseTtlMs)
    {
        this.puts = puts;
        this.leaseTtlMs = leaseTtlMs;
        n = 0;
        grants = null;
        size = -1;
    }

    /** The next key's PutStart answer. */
    void put(final int code, final long version)
    {
        add(code, version, false, 0);
    }

    /** The next key's lookup answer (length and checksum only count when {@code code} is OK). */
    void lookup(final int code, final long valueLength, final boolean withCrc, final int crc32c)
    {
        add(code, valueLength, withCrc, crc32c);
    }

    private void add(final int code, final long value, final boolean withCrc, final int crc32c)
    {
        if (n == codes.length)
        {
            final int capacity = n * 2;
            codes = Arrays.copyOf(codes, capacity);
            values = Arrays.copyOf(values, capacity);
            crcs = Arrays.copyOf(crcs, capacity);
            hasCrc = Arrays.copyOf(hasCrc, capacity);
            resultSizes = Arrays.copyOf(resultSizes, capacity);
        }
        codes[n] = code;
        values[n] = value;
        hasCrc[n] = withCrc;
        crcs[n] = crc32c;
        n++;
    }

    /** Ends the batch: {@code grants} holds every key's replicas, signed. Computes the encoded sizes. */
    void finish(final SharedGrants grants)
    {
        this.grants = grants;
        final int records = grants.size();
        if (replicaSizes.length < records)
        {
            replicaSizes = new int[Math.max(records, replicaSizes.length * 2)];
        }
        int total = 0;
        int k = 0;
        for (int i = 0; i < n; i++)
        {
            int result = scalarsSize(i);
            final int replicaField = puts ? PUT_REPLICAS : GET_REPLICAS;
            for (; k < records && grants.keyOf(k) == i; k++)
            {
                final int r = replicaSize(k);
                replicaSizes[k] = r;
                result += CodedOutputStream.computeTagSize(replicaField) + CodedOutputStream.computeUInt32SizeNoTag(r) + r;
            }
            resultSizes[i] = result;
            total += CodedOutputStream.computeTagSize(BATCH_RESULTS) + CodedOutputStream.computeUInt32SizeNoTag(result) +
                result;
        }
        if (k != records)
        {
            throw new IllegalStateException("replicas recorded for no key of the batch: " + (records - k));
        }
        size = total; // the batch code is OK (0): not written
    }

    private int scalarsSize(final int i)
    {
        int s = codes[i] == 0 ? 0 : CodedOutputStream.computeInt32Size(CODE, codes[i]);
        if (puts)
        {
            return s + (values[i] == 0 ? 0 : CodedOutputStream.computeUInt64Size(PUT_VERSION, values[i]));
        }
        if (codes[i] != 0)
        {
            return s; // an answer that is not OK carries its code only
        }
        s += values[i] == 0 ? 0 : CodedOutputStream.computeUInt64Size(GET_VALUE_LENGTH, values[i]);
        s += leaseTtlMs == 0 ? 0 : CodedOutputStream.computeUInt64Size(GET_LEASE_TTL_MS, leaseTtlMs);
        return s + (hasCrc[i] ? CodedOutputStream.computeFixed32Size(GET_CRC32C, crcs[i]) : 0);
    }

    private int replicaSize(final int k)
    {
        final ReplicaRecord r = grants.record(k);
        final MountedSegment s = r.segment();
        int size = bytesSize(R_NODE_ID, s.nodeIdUtf8()) + bytesSize(R_ENDPOINT, s.endpointUtf8());
        size += s.segmentId() == 0 ? 0 : CodedOutputStream.computeUInt32Size(R_SEGMENT_ID, s.segmentId());
        size += r.offset() == 0 ? 0 : CodedOutputStream.computeUInt64Size(R_OFFSET, r.offset());
        size += r.length() == 0 ? 0 : CodedOutputStream.computeUInt64Size(R_LENGTH, r.length());
        size += grants.status().getNumber() == 0 ? 0 : CodedOutputStream.computeEnumSize(R_STATUS, grants.status().getNumber());
        size += bytesSize(R_SEGMENT_NAME, s.nameUtf8());
        final byte[] token = grants.token(k);
        size += token == null || token.length == 0 ? 0 : CodedOutputStream.computeByteArraySize(R_ACCESS_TOKEN, token);
        if (grants.widerGrant(k))
        {
            final long offset = grants.grantOffset(k);
            final long length = grants.grantLength(k);
            size += offset == 0 ? 0 : CodedOutputStream.computeUInt64Size(R_GRANT_OFFSET, offset);
            size += length == 0 ? 0 : CodedOutputStream.computeUInt64Size(R_GRANT_LENGTH, length);
        }
        return size;
    }

    private static int bytesSize(final int field, final ByteString b)
    {
        return b.isEmpty() ? 0 : CodedOutputStream.computeBytesSize(field, b);
    }

    @Override
    public int code()
    {
        return 0;
    }

    @Override
    public int serializedSize()
    {
        if (size < 0)
        {
            throw new IllegalStateException("finish() was not called");
        }
        return size;
    }

    @Override
    public void writeTo(final CodedOutputStream out) throws IOException
    {
        serializedSize();
        final int records = grants.size();
        final int replicaField = puts ? PUT_REPLICAS : GET_REPLICAS;
        int k = 0;
        for (int i = 0; i < n; i++)
        {
            out.writeTag(BATCH_RESULTS, 2);
            out.writeUInt32NoTag(resultSizes[i]);
            if (codes[i] != 0)
            {
                out.writeInt32(CODE, codes[i]);
            }
            if (!puts && codes[i] == 0 && values[i] != 0)
            {
                out.writeUInt64(GET_VALUE_LENGTH, values[i]);
            }
            for (; k < records && grants.keyOf(k) == i; k++)
            {
                out.writeTag(replicaField, 2);
                out.writeUInt32NoTag(replicaSizes[k]);
                writeReplica(out, k);
            }
            if (puts)
            {
                if (values[i] != 0)
                {
                    out.writeUInt64(PUT_VERSION, values[i]);
                }
            }
            else if (codes[i] == 0)
            {
                if (leaseTtlMs != 0)
                {
                    out.writeUInt64(GET_LEASE_TTL_MS, leaseTtlMs);
                }
                if (hasCrc[i])
                {
                    out.writeFixed32(GET_CRC32C, crcs[i]);
                }
            }
        }
    }

    private void writeReplica(final CodedOutputStream out, final int k) throws IOException
    {
        final ReplicaRecord r = grants.record(k);
        final MountedSegment s = r.segment();
        writeBytes(out, R_NODE_ID, s.nodeIdUtf8());
        writeBytes(out, R_ENDPOINT, s.endpointUtf8());
        if (s.segmentId() != 0)
        {
            out.writeUInt32(R_SEGMENT_ID, s.segmentId());
        }
        if (r.offset() != 0)
        {
            out.writeUInt64(R_OFFSET, r.offset());
        }
        if (r.length() != 0)
        {
            out.writeUInt64(R_LENGTH, r.length());
        }
        if (grants.status().getNumber() != 0)
        {
            out.writeEnum(R_STATUS, grants.status().getNumber());
        }
        writeBytes(out, R_SEGMENT_NAME, s.nameUtf8());
        final byte[] token = grants.token(k);
        if (token != null && token.length != 0)
        {
            out.writeByteArray(R_ACCESS_TOKEN, token);
        }
        if (grants.widerGrant(k))
        {
            if (grants.grantOffset(k) != 0)
            {
                out.writeUInt64(R_GRANT_OFFSET, grants.grantOffset(k));
            }
            if (grants.grantLength(k) != 0)
            {
                out.writeUInt64(R_GRANT_LENGTH, grants.grantLength(k));
            }
        }
    }

    private static void writeBytes(final CodedOutputStream out, final int field, final ByteString b) throws IOException
    {
        if (!b.isEmpty())
        {
            out.writeBytes(field, b);
        }
    }
}
