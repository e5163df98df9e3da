package io.granary.master.meta;

import io.granary.proto.LeaseMode;

import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import static io.granary.proto.ErrorCode.*;

/**
 * BatchProbeKey: an existence probe with explicit lease selection (the LastHitOnly RFC, plus the
 * LONGEST_PREFIX policies). Scans without leases, then locks the shards of the candidates it
 * selects in ascending order, rechecks every member under those locks and leases all of them or
 * none. Stateless and thread safe; all state lives in the {@link MetadataStore}.
 */
public final class BatchProbe
{
    private final MetadataStore store;
    // Indexed by LeaseMode number; counted once per probe, read by the metrics.
    private final LongAdder[] probes = adders();
    private final LongAdder[] selections = adders();
    private final LongAdder[] selectedKeys = adders();

    public BatchProbe(final MetadataStore store)
    {
        this.store = store;
    }

    /**
     * Probes {@code keys}; fills {@code maskOut} and {@code codesOut} (both keys.size() long).
     *
     * @return OK, or INVALID_PARAMS for a bad policy (then nothing was leased and the outputs are all false/OK).
     */
    public int probe(
        final String tenant,
        final LeaseMode mode,
        final int candidateSize,
        final List<String> keys,
        final boolean[] maskOut,
        final int[] codesOut)
    {
        return probe(tenant, mode, candidateSize, KeyBatch.of(keys), maskOut, codesOut);
    }

    /** {@link #probe(String, LeaseMode, int, List, boolean[], int[])} over keys given as bytes. */
    public int probe(
        final String tenant,
        final LeaseMode mode,
        final int candidateSize,
        final KeyBatch keys,
        final boolean[] maskOut,
        final int[] codesOut)
    {
        return probe(tenant, mode, candidateSize, keys, maskOut, codesOut, null, null);
    }

    /**
     * {@link #probe(String, LeaseMode, int, KeyBatch, boolean[], int[])} that also fills, when {@code locatedOut} is
     * not null (keys.size() long), the replica list of every key it selects whose entry the caller set (to a fresh
     * {@link MetadataStore.Lookup}), taken under the same shard locks as its lease; other entries are left as
     * they are. Which entries were filled: those set whose mask is true. When {@code grants} is not null, the
     * located replicas are recorded there instead of in the lookups (in ascending key order; the caller signs them
     * with {@link MetadataStore#signGrants}).
     */
    public int probe(
        final String tenant,
        final LeaseMode mode,
        final int candidateSize,
        final KeyBatch keys,
        final boolean[] maskOut,
        final int[] codesOut,
        final MetadataStore.Lookup[] locatedOut,
        final SharedGrants grants)
    {
        final int code = probeUncounted(tenant, mode, candidateSize, keys, maskOut, codesOut, locatedOut, grants);
        if (code == OK_VALUE && mode != null && mode != LeaseMode.UNRECOGNIZED)
        {
            final int m = mode.getNumber();
            probes[m].increment();
            if (mode != LeaseMode.LEASE_MODE_NONE)
            {
                int selected = 0;
                for (int i = 0, n = keys.size(); i < n; i++)
                {
                    selected += maskOut[i] ? 1 : 0;
                }
                if (selected > 0)
                {
                    selections[m].increment();
                    selectedKeys[m].add(selected);
                }
            }
        }
        return code;
    }

    /** Probes answered OK with {@code mode} (a LeaseMode number). */
    public long probes(final int mode)
    {
        return probes[mode].sum();
    }

    /** Probes with {@code mode} that selected (and leased) a candidate; never counted for LEASE_MODE_NONE. */
    public long selections(final int mode)
    {
        return selections[mode].sum();
    }

    /** Keys selected (marked true and leased) by probes with {@code mode}. */
    public long selectedKeys(final int mode)
    {
        return selectedKeys[mode].sum();
    }

    private static LongAdder[] adders()
    {
        final LongAdder[] adders = new LongAdder[LeaseMode.values().length];
        for (int i = 0; i < adders.length; i++)
        {
            adders[i] = new LongAdder();
        }
        return adders;
    }

    private int probeUncounted(
        final String tenant,
        final LeaseMode mode,
        final int candidateSize,
        final KeyBatch keys,
        final boolean[] maskOut,
        final int[] codesOut,
        final MetadataStore.Lookup[] locatedOut,
        final SharedGrants grants)
    {
        final int count = keys.size();
        if (mode == null || mode == LeaseMode.UNRECOGNIZED)
        {
            return INVALID_PARAMS_VALUE;
        }
        if (count == 0)
        {
            return OK_VALUE;
        }
        if (mode != LeaseMode.LEASE_MODE_NONE && (candidateSize <= 0 || count % candidateSize != 0))
        {
            return INVALID_PARAMS_VALUE;
        }

        // Scan without leases, remembering which shard owns each key.
        final boolean[] readable = new boolean[count];
        final int[] owner = new int[count];
        final long[] hash = new long[count];
        final long tenantMix = MetadataStore.tenantMix(tenant);
        boolean anyError = false;
        for (int i = 0; i < count; i++)
        {
            owner[i] = -1;
            final int code = KeyBytes.check(keys.bytes, keys.offsets[i], keys.lengths[i]);
            if (code != OK_VALUE)
            {
                codesOut[i] = code;
                anyError = true;
                continue;
            }
            hash[i] = MetadataStore.combine(keys.hashes[i], tenantMix);
            final ObjectMeta m = store.lockForKey(tenant, keys.bytes, keys.offsets[i], keys.lengths[i], hash[i]);
            if (m != null)
            {
                readable[i] = m.isReadable();
                owner[i] = m.ownerShard;
                store.unlockOwner(m);
            }
        }
        if (mode == LeaseMode.LEASE_MODE_NONE)
        {
            System.arraycopy(readable, 0, maskOut, 0, count);
            return OK_VALUE;
        }
        if (anyError)
        {
            return OK_VALUE; // lookup errors are returned per key, with no lease
        }

        final int candidates = count / candidateSize;
        final boolean[] complete = new boolean[candidates];
        for (int c = 0; c < candidates; c++)
        {
            boolean all = true;
            for (int i = c * candidateSize; i < (c + 1) * candidateSize && all; i++)
            {
                all = readable[i];
            }
            complete[c] = all;
        }

        switch (mode)
        {
            case LEASE_MODE_LAST_HIT_ONLY:
                // From the last complete candidate backwards; fall back when one vanished before the locks.
                for (int c = candidates - 1; c >= 0; c--)
                {
                    if (complete[c] &&
                        lockRecheckLease(tenant, keys, hash, owner, c * candidateSize, candidateSize, 1, Lease.ALL,
                            locatedOut, grants) == 1)
                    {
                        Arrays.fill(maskOut, c * candidateSize, (c + 1) * candidateSize, true);
                        return OK_VALUE;
                    }
                }
                return OK_VALUE;

            case LEASE_MODE_LONGEST_PREFIX:
            case LEASE_MODE_LONGEST_PREFIX_LAST_ONLY:
            {
                int run = 0;
                while (run < candidates && complete[run])
                {
                    run++;
                }
                if (run == 0)
                {
                    return OK_VALUE;
                }
                final boolean lastOnly = mode == LeaseMode.LEASE_MODE_LONGEST_PREFIX_LAST_ONLY;
                final int leased = lockRecheckLease(
                    tenant, keys, hash, owner, 0, candidateSize, run, lastOnly ? Lease.LAST_CANDIDATE : Lease.PREFIX,
                    locatedOut, grants);
                if (leased > 0)
                {
                    final int end = leased * candidateSize;
                    Arrays.fill(maskOut, lastOnly ? end - candidateSize : 0, end, true);
                }
                return OK_VALUE;
            }
            default:
                return INVALID_PARAMS_VALUE;
        }
    }

    /** What {@link #lockRecheckLease} leases once the members are rechecked. */
    private enum Lease
    {
        /** Every candidate must still be readable, else nothing is leased. */
        ALL,
        /** The candidates before the first one with a vanished member. */
        PREFIX,
        /** Only the last candidate of that prefix. */
        LAST_CANDIDATE
    }

    /**
     * Locks the home and owner shards of {@code candidates} consecutive candidates starting at key
     * {@code from} (ascending shard order), rechecks every member under the locks, and leases as
     * {@code lease} says; fills {@code located} (may be null) for the keys it leases, under the same locks.
     *
     * @return the number of leading candidates that passed the recheck (for ALL: the count if all
     *         passed, else 0 and nothing leased).
     */
    private int lockRecheckLease(
        final String tenant,
        final KeyBatch keys,
        final long[] hash,
        final int[] scannedOwner,
        final int from,
        final int candidateSize,
        final int candidates,
        final Lease lease,
        final MetadataStore.Lookup[] located,
        final SharedGrants grants)
    {
        final int n = candidateSize * candidates;
        final int[] home = new int[n];
        final int[] lockSet = new int[2 * n];
        for (int i = 0; i < n; i++)
        {
            home[i] = store.homeShard(hash[from + i]);
            lockSet[2 * i] = home[i];
            lockSet[2 * i + 1] = scannedOwner[from + i] < 0 ? home[i] : scannedOwner[from + i];
        }
        final int[] locks = sortedDistinct(lockSet);
        for (final int s : locks)
        {
            store.shard(s).lock();
        }
        try
        {
            final ObjectMeta[] members = new ObjectMeta[n];
            int okKeys = n;
            for (int i = 0; i < n; i++)
            {
                final int k = from + i;
                final ObjectMeta m = store.shard(home[i]).get(tenant, keys.bytes, keys.offsets[k], keys.lengths[k], hash[k]);
                // An object now owned by a shard we did not lock was replaced since the scan: not ours.
                if (m == null || m.removed || m.ownerShard != scannedOwner[from + i] || !m.isReadable())
                {
                    okKeys = i;
                    break;
                }
                members[i] = m;
            }
            final int passed = okKeys / candidateSize;
            final long now = store.clock().nanoTime();
            switch (lease)
            {
                case ALL:
                    if (passed < candidates)
                    {
                        return 0;
                    }
                    grantDistinct(members, 0, n, now);
                    locate(members, from, 0, n, located, grants);
                    return candidates;
                case PREFIX:
                    grantDistinct(members, 0, passed * candidateSize, now);
                    locate(members, from, 0, passed * candidateSize, located, grants);
                    return passed;
                case LAST_CANDIDATE:
                default:
                    if (passed > 0)
                    {
                        grantDistinct(members, (passed - 1) * candidateSize, passed * candidateSize, now);
                        locate(members, from, (passed - 1) * candidateSize, passed * candidateSize, located, grants);
                    }
                    return passed;
            }
        }
        finally
        {
            for (int i = locks.length - 1; i >= 0; i--)
            {
                store.shard(locks[i]).unlock();
            }
        }
    }

    /**
     * Replica lists of {@code members[a, b)} (keys {@code from + a ..}) into the entries of {@code located} set, their
     * replicas recorded in {@code grants} when it is not null.
     */
    private void locate(
        final ObjectMeta[] members, final int from, final int a, final int b, final MetadataStore.Lookup[] located,
        final SharedGrants grants)
    {
        if (located == null)
        {
            return;
        }
        for (int i = a; i < b; i++)
        {
            final MetadataStore.Lookup out = located[from + i];
            if (out != null)
            {
                if (grants != null)
                {
                    grants.key(from + i);
                }
                store.replicaListLocked(members[i], out, grants);
            }
        }
    }

    private void grantDistinct(final ObjectMeta[] found, final int from, final int to, final long now)
    {
        final IdentityHashMap<ObjectMeta, Boolean> seen = new IdentityHashMap<>();
        for (int i = from; i < to; i++)
        {
            if (seen.put(found[i], Boolean.TRUE) == null)
            {
                store.grantLeaseLocked(found[i], now);
            }
        }
    }

    private static int[] sortedDistinct(final int[] values)
    {
        final int[] sorted = values.clone();
        Arrays.sort(sorted);
        int w = 0;
        for (int i = 0; i < sorted.length; i++)
        {
            if (i == 0 || sorted[i] != sorted[i - 1])
            {
                sorted[w++] = sorted[i];
            }
        }
        return Arrays.copyOf(sorted, w);
    }
}
