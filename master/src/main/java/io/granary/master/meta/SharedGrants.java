package io.granary.master.meta;

import com.google.protobuf.UnsafeByteOperations;
import io.granary.master.segment.MountedSegment;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;

import java.util.Arrays;
import java.util.List;

/**
 * The replicas of one batch request whose client accepts shared grants (docs/protocol.md, "Shared grants"): the WRITE
 * replicas of a BatchPutStart, or the READ replicas of a BatchGetReplicaList. The store records each extent here
 * instead of signing it, then {@link #sign} gives every run of extents that lie end to end on one segment a single
 * token over the run, expiring with the earliest token of the run. A batch of small values written together lies in
 * one run or a few: one HMAC instead of one per value at the master, and one verification instead of one per value
 * at the node, which remembers the tokens it verified. The run's token grants nothing the members' own tokens would
 * not: every byte of the run lies in the extent of an object of the batch (one tenant; for WRITE a put of this
 * batch's client, for READ an object this lookup leased), whose own token would grant it until the same second or
 * later.
 *
 * <p>One instance per request (or {@link #reset} between requests), used by one thread: {@link #key} before each key's
 * put or lookup, {@link #sign} once after the last, then {@link #replicasOf} for each key in order.
 */
public final class SharedGrants
{
    /** Runs kept open at once (one per segment the batch writes to); a further segment closes the oldest. */
    private static final int OPEN_RUNS = 8;
    /** Entries {@link #reset} keeps arrays for (a few batches' worth); bigger ones are let go. */
    private static final int RETAINED_CAPACITY = 4096;

    private ReplicaRecord[] records = new ReplicaRecord[16];
    private long[] expiries = new long[16];
    private int[] keys = new int[16];
    private int[] runOf = new int[16];
    private int size;
    private int key;
    private int cursor;

    private long[] runOffsets = new long[16];
    private long[] runLengths = new long[16];
    private long[] runExpiries = new long[16];
    private byte[][] runTokens = new byte[16][];
    private MountedSegment[] runSegments = new MountedSegment[16];
    private int runs;

    private final int opcode;
    private final ReplicaStatus status;

    /** @param opcode {@link Opcode#WRITE} (replicas of PROCESSING puts) or {@link Opcode#READ} (of complete objects). */
    public SharedGrants(final int opcode)
    {
        if (opcode != Opcode.WRITE && opcode != Opcode.READ)
        {
            throw new IllegalArgumentException("shared grants are for READ or WRITE, not opcode " + opcode);
        }
        this.opcode = opcode;
        this.status = opcode == Opcode.WRITE ?
            ReplicaStatus.REPLICA_STATUS_PROCESSING : ReplicaStatus.REPLICA_STATUS_COMPLETE;
    }

    /** Empties this instance for the next request (its arrays are kept: one instance can serve a connection). */
    public SharedGrants reset()
    {
        if (records.length > RETAINED_CAPACITY || runOffsets.length > RETAINED_CAPACITY)
        {
            // A huge batch's arrays are not kept for the connection's life (a batch may have 65,536 keys).
            records = new ReplicaRecord[16];
            expiries = new long[16];
            keys = new int[16];
            runOf = new int[16];
            runOffsets = new long[16];
            runLengths = new long[16];
            runExpiries = new long[16];
            runTokens = new byte[16][];
            runSegments = new MountedSegment[16];
        }
        else
        {
            Arrays.fill(records, 0, size, null);
            Arrays.fill(runTokens, 0, runs, null);
            Arrays.fill(runSegments, 0, runs, null);
        }
        size = 0;
        key = 0;
        cursor = 0;
        runs = 0;
        return this;
    }

    /** Every replica recorded from now on belongs to the key at {@code index} of the request. */
    public void key(final int index)
    {
        key = index;
    }

    /** Records a replica of the current key whose own token would expire at {@code expirySec}. */
    void add(final ReplicaRecord record, final long expirySec)
    {
        if (size == records.length)
        {
            final int capacity = size * 2;
            records = Arrays.copyOf(records, capacity);
            expiries = Arrays.copyOf(expiries, capacity);
            keys = Arrays.copyOf(keys, capacity);
            runOf = Arrays.copyOf(runOf, capacity);
        }
        records[size] = record;
        expiries[size] = expirySec;
        keys[size] = key;
        size++;
    }

    /** The number of tokens {@link #sign} made (one per run). */
    public int runs()
    {
        return runs;
    }

    /** Forms the runs and signs one token for each; without {@code tokens} (tokens off) forms no runs. */
    void sign(final MetadataStore.ReplicaTokens tokens)
    {
        if (tokens == null)
        {
            return;
        }
        // At most one open run per segment: the one a following extent of that segment may extend.
        final int[] open = new int[OPEN_RUNS];
        int openCount = 0;
        int oldest = 0;
        for (int i = 0; i < size; i++)
        {
            final ReplicaRecord r = records[i];
            final long length = r.length();
            if (length == 0)
            {
                runOf[i] = newRun(r, 1, expiries[i]); // an empty value's one-byte grant: alone, the open run stays
                continue;
            }
            int slot = -1;
            for (int o = 0; o < openCount; o++)
            {
                if (runSegments[open[o]] == r.segment())
                {
                    slot = o;
                    break;
                }
            }
            final int run = slot < 0 ? -1 : open[slot];
            if (run >= 0 && runOffsets[run] + runLengths[run] == r.offset() &&
                runLengths[run] + length <= FrameDescriptor.MAX_GRANT_LENGTH)
            {
                runLengths[run] += length;
                runExpiries[run] = Math.min(runExpiries[run], expiries[i]);
                runOf[i] = run;
                continue;
            }
            if (slot < 0 && openCount < OPEN_RUNS)
            {
                slot = openCount++;
            }
            else if (slot < 0)
            {
                slot = oldest; // a further segment closes the run opened longest ago
                oldest = (oldest + 1) % OPEN_RUNS;
            }
            open[slot] = newRun(r, length, expiries[i]);
            runOf[i] = open[slot];
        }
        for (int run = 0; run < runs; run++)
        {
            runTokens[run] = tokens.sign(runSegments[run], runOffsets[run], runLengths[run], opcode, runExpiries[run]);
        }
    }

    private int newRun(final ReplicaRecord r, final long length, final long expirySec)
    {
        if (runs == runOffsets.length)
        {
            final int capacity = runs * 2;
            runOffsets = Arrays.copyOf(runOffsets, capacity);
            runLengths = Arrays.copyOf(runLengths, capacity);
            runExpiries = Arrays.copyOf(runExpiries, capacity);
            runTokens = Arrays.copyOf(runTokens, capacity);
            runSegments = Arrays.copyOf(runSegments, capacity);
        }
        runOffsets[runs] = r.offset();
        runLengths[runs] = length;
        runExpiries[runs] = expirySec;
        runSegments[runs] = r.segment();
        return runs++;
    }

    /** The replicas recorded so far (all keys); after {@link #sign}, walked with the accessors below in key order. */
    public int size()
    {
        return size;
    }

    /** The request index of the key replica {@code k} belongs to (ascending with {@code k}). */
    public int keyOf(final int k)
    {
        return keys[k];
    }

    /** Replica {@code k}. */
    public ReplicaRecord record(final int k)
    {
        return records[k];
    }

    /** The status every replica of this batch is reported with (PROCESSING for WRITE, COMPLETE for READ). */
    public ReplicaStatus status()
    {
        return status;
    }

    /** The token of replica {@code k}'s run after {@link #sign}, or null when no runs were signed (tokens off). */
    public byte[] token(final int k)
    {
        return runs > 0 ? runTokens[runOf[k]] : null;
    }

    /** Whether replica {@code k}'s run is wider than its extent: its grant is then {@link #grantOffset}/{@link #grantLength}. */
    public boolean widerGrant(final int k)
    {
        if (runs == 0)
        {
            return false;
        }
        final int run = runOf[k];
        final ReplicaRecord r = records[k];
        return runOffsets[run] != r.offset() || runLengths[run] != Math.max(1, r.length());
    }

    public long grantOffset(final int k)
    {
        return runOffsets[runOf[k]];
    }

    public long grantLength(final int k)
    {
        return runLengths[runOf[k]];
    }

    /**
     * Adds the replicas of the key at {@code index} to {@code out}, each with its run's token and, when the run is
     * wider than the extent, the run as its grant. Keys are asked for in ascending order, after {@link #sign}.
     */
    public void replicasOf(final int index, final List<Replica> out)
    {
        while (cursor < size && keys[cursor] < index)
        {
            cursor++;
        }
        for (; cursor < size && keys[cursor] == index; cursor++)
        {
            final ReplicaRecord r = records[cursor];
            final Replica.Builder b = MetadataStore.protoBuilder(r, status);
            if (runs > 0)
            {
                final int run = runOf[cursor];
                b.setAccessToken(UnsafeByteOperations.unsafeWrap(runTokens[run]));
                if (widerGrant(cursor))
                {
                    b.setGrantOffset(runOffsets[run]).setGrantLength(runLengths[run]);
                }
            }
            out.add(b.build());
        }
    }
}
