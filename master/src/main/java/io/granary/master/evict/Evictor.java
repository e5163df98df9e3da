package io.granary.master.evict;

import io.granary.master.meta.EvictionCandidate;
import io.granary.master.meta.MetadataStore;
import io.granary.master.meta.TenantQuota;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * Decides what to evict and when: above the high watermark (background) and when an allocation
 * fails (on demand). Pass 1 takes unpinned units whose lease expired, exactly oldest age first;
 * pass 2 takes soft-pinned units (oldest first) when allowed. Leased, hard-pinned and incomplete
 * objects are never taken; a group goes as a whole. Rounds are serialised by this object's monitor.
 *
 * <p>A round scans every shard once and keeps only the oldest candidates that cover the target
 * ({@link OldestCovering}), so its memory is proportional to what it evicts; scanning costs O(objects).
 * With the oldest-lease policy a scan keeps {@link #RESERVE_ROUNDS} targets' worth, and the next rounds take the
 * rest of it in order without scanning, for as long as nothing can have made an older candidate appear since.
 *
 * <p>With {@link EvictionPolicy#PREFIX_LEAF_FIRST} each pass takes leaves (units no live object names as its
 * parent) oldest first, adding a parent to the round's queue the moment its last child goes, which is the exact
 * leaf-first order; only if the leaves cannot cover the target does the round go on with the oldest units that
 * still have children (counted as {@link #prefixBreaks()}), so an allocation never waits on parent links.
 */
public final class Evictor
{
    private static final Logger LOG = LoggerFactory.getLogger(Evictor.class);
    private static final Comparator<EvictionCandidate> OLDEST_FIRST =
        (a, b) -> Long.compare(a.ageNs() - b.ageNs(), 0);

    private final MetadataStore store;
    private final SegmentRegistry registry;
    private final double highWatermark;
    private final double ratio;
    private final boolean allowSoftPinned;
    private final EvictionPolicy policy;

    private final LongAdder rounds = new LongAdder();
    private final LongAdder prefixBreaks = new LongAdder();
    private final LongAdder[] evictedObjects = {new LongAdder(), new LongAdder()};
    private final LongAdder[] evictedBytes = {new LongAdder(), new LongAdder()};
    private final LongAdder onDemandRounds = new LongAdder();
    /** Rounds served (at least in part) from the reserve of an earlier scan, without a scan of their own. */
    private final LongAdder reserveRounds = new LongAdder();

    /**
     * After a round that freed nothing, an on-demand round within this time answers "nothing freed" at once, unless a
     * put completed or a soft pin changed since (either can make a candidate): a round scans every object on the RPC
     * thread that asked, and a pool full of leased objects would otherwise be scanned once per put.
     */
    static final long FRUITLESS_HOLDOFF_NS = 100_000_000L;
    /**
     * The same for the background check, which runs every 100 ms: above a watermark with nothing evictable it would
     * scan every object ten times a second; leases lapse with time, so it looks again after this long.
     */
    static final long FRUITLESS_BACKGROUND_HOLDOFF_NS = 1_000_000_000L;

    /** The last round (of the whole pool, or of one tenant) and whether it freed nothing. This object's monitor. */
    private static final class HoldOff
    {
        boolean fruitless;
        long atNs;
        long putEnds;
        long pinEpoch;
    }

    private final HoldOff poolHoldOff = new HoldOff();
    /** Per tenant with a quota that needed a round. This object's monitor. */
    private final Map<String, HoldOff> tenantHoldOffs = new HashMap<>();
    private final LongAdder heldOffRounds = new LongAdder();
    private final LongAdder tenantRounds = new LongAdder();

    /** How many rounds' worth of candidates a scan keeps (oldest-lease policy): the rest wait in the reserve. */
    static final int RESERVE_ROUNDS = 4;
    /** A reserve older than this is dropped rather than used. */
    static final long RESERVE_MAX_AGE_NS = 60_000_000_000L;

    // The reserve of the last scan (oldest-lease policy): candidates in age order, all older than the scan's start,
    // the next one to try, and what must not have changed since the scan for it to be used. This object's monitor.
    private List<EvictionCandidate> reserve = List.of();
    private int reserveNext;
    private long reserveScanNs;
    private long reservePinEpoch;
    private long reservePinHorizonNs;

    // Eviction summary log: what was logged last, touched only by the thread calling logSummaryIfDue.
    private boolean summarized;
    private long lastSummaryNs;
    private long summarizedRounds;
    private long summarizedOnDemand;
    private final long[] summarizedObjects = new long[2];
    private final long[] summarizedBytes = new long[2];

    /** What one round did. */
    public static final class Result
    {
        public final long targetBytes;
        public final long[] objects = new long[2];
        public final long[] bytes = new long[2];

        Result(final long targetBytes)
        {
            this.targetBytes = targetBytes;
        }

        public long totalBytes()
        {
            return bytes[0] + bytes[1];
        }

        public long totalObjects()
        {
            return objects[0] + objects[1];
        }

        /** Whether the round took anything. */
        boolean freedAny()
        {
            return totalObjects() > 0 || totalBytes() > 0;
        }
    }

    public Evictor(
        final MetadataStore store,
        final SegmentRegistry registry,
        final double highWatermark,
        final double ratio,
        final boolean allowSoftPinned)
    {
        this(store, registry, highWatermark, ratio, allowSoftPinned, EvictionPolicy.OLDEST_LEASE);
    }

    public Evictor(
        final MetadataStore store,
        final SegmentRegistry registry,
        final double highWatermark,
        final double ratio,
        final boolean allowSoftPinned,
        final EvictionPolicy policy)
    {
        this.store = store;
        this.registry = registry;
        this.highWatermark = highWatermark;
        this.ratio = ratio;
        this.allowSoftPinned = allowSoftPinned;
        this.policy = policy;
    }

    /**
     * Installs on-demand eviction: a failed allocation evicts at least the eviction ratio of the pool, a put finding
     * the store at its object budget at least the eviction ratio of the budget; either then tries again.
     */
    public Evictor attach()
    {
        store.allocationFailureHandler(this::evictForAllocation);
        store.objectBudgetHandler(this::evictForObjects);
        store.tenantQuotaHandler(this::evictForTenant);
        return this;
    }

    /** Total capacity and allocated bytes of live segments, as {capacity, allocated}. */
    public long[] usage()
    {
        long capacity = 0;
        long allocated = 0;
        for (final MountedSegment s : registry.liveSegments())
        {
            capacity += s.sizeBytes();
            allocated += s.allocatedBytes();
        }
        return new long[]{capacity, allocated};
    }

    /** Rounds served, at least in part, from the reserve of an earlier scan instead of a scan of their own. */
    public long reserveRounds()
    {
        return reserveRounds.sum();
    }

    /**
     * Background check: above the high watermark of the pool's bytes, evict down to (watermark - ratio) of capacity;
     * above the high watermark of the store's object budget, evict down to (watermark - ratio) of the budget.
     */
    public Result maybeEvict()
    {
        final long[] usage = usage();
        final long capacity = usage[0];
        long target = 0;
        if (capacity > 0 && usage[1] > (long)(highWatermark * capacity))
        {
            target = usage[1] - (long)(Math.max(0.0, highWatermark - ratio) * capacity);
        }
        final double maxObjects = store.settings().maxObjects;
        final long objects = store.objectCount();
        if (objects > (long)(highWatermark * maxObjects))
        {
            final long excess = objects - (long)(Math.max(0.0, highWatermark - ratio) * maxObjects);
            target = Math.max(target, bytesForObjects(excess, usage[1]));
        }
        if (target <= 0)
        {
            return null;
        }
        final long background = target;
        return roundUnlessHeldOff(poolHoldOff, FRUITLESS_BACKGROUND_HOLDOFF_NS, () -> background, null);
    }

    /**
     * The bytes that evicting {@code objects} objects frees if they are of the average size of those held: how a
     * deficit counted in objects becomes a round's target (a round takes units in age order, whatever their size).
     */
    private long bytesForObjects(final long objects, final long allocatedBytes)
    {
        final long held = Math.max(1, store.objectCount());
        final long perObject = Math.max(1, allocatedBytes / held);
        return objects > Long.MAX_VALUE / perObject ? Long.MAX_VALUE : objects * perObject;
    }

    /**
     * On demand, when a put found the store at its object budget ({@link MetadataStore.Settings#maxObjects}) and
     * {@code neededObjects} must go for it to fit: evicts at least the eviction ratio of the budget.
     *
     * @return true if anything was freed.
     */
    public boolean evictForObjects(final long neededObjects)
    {
        return onDemand(() -> bytesForObjects(
            Math.max(neededObjects, (long)Math.ceil(ratio * store.settings().maxObjects)), usage()[1]));
    }

    /** On demand, when a put of {@code neededBytes} found no room. @return true if anything was freed. */
    public boolean evictForAllocation(final long neededBytes)
    {
        return onDemand(() -> Math.max(neededBytes, (long)(ratio * usage()[0])));
    }

    /**
     * An on-demand round of the target {@code targetBytes} gives (computed under this object's monitor), unless one
     * finished while this caller waited for the monitor (then true: the caller tries again first) or the last one
     * freed nothing and nothing changed since ({@link #roundUnlessHeldOff}). @return true if anything was freed.
     */
    private boolean onDemand(final LongSupplier targetBytes)
    {
        final long roundsBefore = rounds.sum();
        synchronized (this)
        {
            if (rounds.sum() != roundsBefore)
            {
                return true;
            }
            final Result round = roundUnlessHeldOff(poolHoldOff, FRUITLESS_HOLDOFF_NS, targetBytes, null);
            if (round == null)
            {
                return false;
            }
            onDemandRounds.increment();
            return round.freedAny();
        }
    }

    /**
     * On demand, when a put of a new key would take a tenant beyond its quota and {@code neededBytes} of the tenant's
     * objects must go for it to fit: a round over that tenant's units only, in the policy's order, freeing at least
     * the eviction ratio of the quota. Unless the last such round for the tenant freed nothing and nothing changed
     * since (as {@link #roundUnlessHeldOff}). @return true if anything was freed, or the tenant's use fell meanwhile.
     */
    public boolean evictForTenant(final TenantQuota quota, final long neededBytes)
    {
        final long usedBefore = quota.usedBytes();
        synchronized (this)
        {
            final long stillNeeded = neededBytes - (usedBefore - quota.usedBytes());
            if (stillNeeded <= 0)
            {
                return true; // another put's round made the room while this one waited
            }
            final HoldOff holdOff = tenantHoldOffs.computeIfAbsent(quota.tenant(), t -> new HoldOff());
            final Result round = roundUnlessHeldOff(holdOff, FRUITLESS_HOLDOFF_NS,
                () -> Math.max(stillNeeded, (long)Math.ceil(ratio * quota.limitBytes())), quota.tenant());
            if (round == null)
            {
                return false;
            }
            tenantRounds.increment();
            quota.evicted(round.totalBytes());
            return round.freedAny();
        }
    }

    /** Rounds run over one tenant's objects to bring it under its quota. */
    public long tenantRounds()
    {
        return tenantRounds.sum();
    }

    /**
     * A round of the target {@code targetBytes} gives, unless one that freed nothing ran less than {@code windowNs} ago
     * and no put completed and no soft pin changed since: then null. Remembers whether this round freed anything.
     */
    private synchronized Result roundUnlessHeldOff(
        final HoldOff last, final long windowNs, final LongSupplier targetBytes, final String tenant)
    {
        if (last.fruitless && store.nowNs() - last.atNs < windowNs && store.putEnds() == last.putEnds &&
            store.pinEpoch() == last.pinEpoch)
        {
            heldOffRounds.increment();
            return null;
        }
        final Result round = evict(targetBytes.getAsLong(), tenant);
        last.fruitless = !round.freedAny();
        last.atNs = store.nowNs();
        last.putEnds = store.putEnds();
        last.pinEpoch = store.pinEpoch();
        return round;
    }

    /** Rounds (on demand or background) not run because one that freed nothing had just run, nothing changed since. */
    public long heldOffRounds()
    {
        return heldOffRounds.sum();
    }

    /** One eviction round freeing at least {@code targetBytes} if the rules allow. */
    public Result evict(final long targetBytes)
    {
        return evict(targetBytes, null);
    }

    /** {@link #evict(long)} taking only units of {@code tenant} (null: of any tenant). */
    public synchronized Result evict(final long targetBytes, final String tenant)
    {
        final Result result = new Result(targetBytes);
        if (targetBytes <= 0)
        {
            return result;
        }
        rounds.increment();
        if (policy == EvictionPolicy.PREFIX_LEAF_FIRST)
        {
            evictLeafFirst(result, tenant);
        }
        else
        {
            evictOldestLease(result, tenant);
        }
        for (int pass = 0; pass < 2; pass++)
        {
            evictedObjects[pass].add(result.objects[pass]);
            evictedBytes[pass].add(result.bytes[pass]);
        }
        if (result.totalObjects() > 0 && LOG.isDebugEnabled())
        {
            LOG.debug("evicted {} objects ({} bytes) for a target of {} bytes: pass 1 {} objects, pass 2 {} objects",
                result.totalObjects(), result.totalBytes(), result.targetBytes, result.objects[0], result.objects[1]);
        }
        return result;
    }

    /**
     * Oldest lease first. A scan keeps the oldest unpinned candidates covering {@link #RESERVE_ROUNDS} times the
     * target; what the round does not take, and was older than the scan's start, is kept as a reserve that the next
     * rounds take first, in the same order, without scanning (see {@link #reserveUsable}).
     */
    private void evictOldestLease(final Result result, final String tenant)
    {
        if (tenant != null)
        {
            evictOldestLeaseOf(tenant, result);
            return;
        }
        if (reserveUsable())
        {
            reserveNext = evictInAgeOrder(reserve, reserveNext, 0, result, true);
            reserveRounds.increment();
            if (result.totalBytes() >= result.targetBytes)
            {
                return;
            }
        }
        dropReserve();
        final long remaining = result.targetBytes - result.totalBytes();
        final long scanStartNs = store.nowNs();
        final long pinEpoch = store.pinEpoch();
        final long pinHorizonNs = store.nextPinExpiryNs();
        final OldestCovering[] scanned = scanOldest(null, saturatedTimes(remaining, RESERVE_ROUNDS), remaining);
        final OldestCovering pinned = scanned[1];
        final List<EvictionCandidate> oldest = scanned[0].inAgeOrder();
        final int used = evictInAgeOrder(oldest, 0, 0, result, false);
        // Every unit that becomes a candidate after the scan started is younger than the scan's start (it is read
        // or written then, or its lease ends then), except one whose soft pin ends: hence the epoch and the horizon.
        int keep = used;
        while (keep < oldest.size() && oldest.get(keep).ageNs() - scanStartNs < 0)
        {
            keep++;
        }
        if (keep > used)
        {
            reserve = oldest.subList(0, keep);
            reserveNext = used;
            reserveScanNs = scanStartNs;
            reservePinEpoch = pinEpoch;
            reservePinHorizonNs = pinHorizonNs;
        }
        if (pinned != null)
        {
            evictInAgeOrder(pinned.inAgeOrder(), 0, 1, result, false);
        }
    }

    /**
     * Whether the reserve of the last scan may serve this round: something is left of it, no soft pin was given to or
     * taken off an existing object since (an object whose pin ends keeps its old age), none of the pins pending at the
     * scan has lapsed yet (the same),
     * and it is less than {@link #RESERVE_MAX_AGE_NS} old (it holds references to objects that may be gone).
     * Candidates leased or changed since the scan are skipped as they come ({@link MetadataStore#evictIfUnchanged}).
     */
    private boolean reserveUsable()
    {
        if (reserveNext >= reserve.size())
        {
            return false;
        }
        final long now = store.nowNs();
        return store.pinEpoch() == reservePinEpoch && now - reservePinHorizonNs < 0 &&
            now - reserveScanNs < RESERVE_MAX_AGE_NS;
    }

    private void dropReserve()
    {
        reserve = List.of();
        reserveNext = 0;
    }

    private static long saturatedTimes(final long bytes, final int factor)
    {
        return bytes > Long.MAX_VALUE / factor ? Long.MAX_VALUE : bytes * factor;
    }

    /**
     * Evicts candidates in the given order from index {@code from}, counted in {@code pass}, until the target is met;
     * with {@code unchangedOnly} (candidates of an earlier scan) only those whose age is still the one seen then.
     *
     * @return the index of the first candidate not tried.
     */
    private int evictInAgeOrder(
        final List<EvictionCandidate> candidates, final int from, final int pass, final Result result,
        final boolean unchangedOnly)
    {
        final long[] out = new long[2];
        int i = from;
        for (; i < candidates.size() && result.totalBytes() < result.targetBytes; i++)
        {
            final EvictionCandidate c = candidates.get(i);
            out[0] = 0;
            out[1] = 0;
            final int n = unchangedOnly ? store.evictIfUnchanged(c, out) : store.evict(c, pass == 1, false, out, null);
            result.objects[pass] += n;
            result.bytes[pass] += out[0];
            if (n > 0 && out[1] != 0)
            {
                prefixBreaks.increment();
            }
        }
        return i;
    }

    /**
     * Leaf first. Pass 1 takes unpinned leaves, oldest first, each parent joining the queue as its last child goes;
     * a soft-pinned parent freed that way waits for pass 2. Pass 2 (when allowed) takes soft-pinned leaves the same
     * way, and with them the unpinned parents they held up: an unpinned block whose later blocks are soft pinned is
     * kept as long as they are. Only if the leaves cannot cover the target do the oldest units that still have
     * children go (unpinned first, soft-pinned ones only when allowed), each counted in {@link #prefixBreaks()}.
     */
    /**
     * Oldest lease first among one tenant's units: a scan of its own, kept to the target (the reserve serves rounds of
     * the whole pool only).
     */
    private void evictOldestLeaseOf(final String tenant, final Result result)
    {
        final OldestCovering[] oldest = scanOldest(tenant, result.targetBytes, result.targetBytes);
        evictInAgeOrder(oldest[0].inAgeOrder(), 0, 0, result, false);
        if (allowSoftPinned)
        {
            evictInAgeOrder(oldest[1].inAgeOrder(), 0, 1, result, false);
        }
    }

    /**
     * One scan (of {@code tenant}'s units, or all with null) keeping the oldest unpinned candidates covering
     * {@code unpinnedBytes} and, when soft-pinned ones may go, the oldest soft-pinned covering {@code pinnedBytes}:
     * {unpinned, soft-pinned or null}.
     */
    private OldestCovering[] scanOldest(final String tenant, final long unpinnedBytes, final long pinnedBytes)
    {
        final OldestCovering[] oldest =
            {new OldestCovering(unpinnedBytes), allowSoftPinned ? new OldestCovering(pinnedBytes) : null};
        store.scanEvictionCandidates(allowSoftPinned, tenant, new MetadataStore.EvictionSink()
        {
            @Override
            public boolean wants(final long ageNs, final boolean softPinned)
            {
                return oldest[softPinned ? 1 : 0].wants(ageNs);
            }

            @Override
            public void accept(final EvictionCandidate c)
            {
                oldest[c.softPinned() ? 1 : 0].offer(c);
            }
        });
        return oldest;
    }

    private void evictLeafFirst(final Result result, final String tenant)
    {
        final long targetBytes = result.targetBytes;
        final OldestCovering[] leaves = {new OldestCovering(targetBytes), new OldestCovering(targetBytes)};
        final OldestCovering[] inner = {new OldestCovering(targetBytes), new OldestCovering(targetBytes)};
        store.scanEvictionCandidates(allowSoftPinned, tenant, new MetadataStore.EvictionSink()
        {
            @Override
            public boolean wants(final long ageNs, final boolean softPinned)
            {
                // Leaf or not is known only with the candidate: a unit either heap would refuse is not needed.
                final int pass = softPinned ? 1 : 0;
                return leaves[pass].wants(ageNs) || inner[pass].wants(ageNs);
            }

            @Override
            public void accept(final EvictionCandidate c)
            {
                final int pass = c.softPinned() ? 1 : 0;
                (c.isLeaf() ? leaves[pass] : inner[pass]).offer(c);
            }
        });
        final List<EvictionCandidate> heldBack = new ArrayList<>();
        evictLeaves(leaves[0].inAgeOrder(), false, heldBack, result);
        if (allowSoftPinned)
        {
            heldBack.addAll(leaves[1].inAgeOrder());
            evictLeaves(heldBack, true, null, result);
        }
        evictInAgeOrder(inner[0].inAgeOrder(), 0, 0, result, false);
        if (allowSoftPinned)
        {
            evictInAgeOrder(inner[1].inAgeOrder(), 0, 1, result, false);
        }
    }

    /**
     * Evicts leaves oldest first until the target is met, queueing each parent a victim leaves without children;
     * parents that are soft pinned while {@code softPinnedToo} is false go to {@code heldBack} instead.
     */
    private void evictLeaves(
        final List<EvictionCandidate> initial,
        final boolean softPinnedToo,
        final List<EvictionCandidate> heldBack,
        final Result result)
    {
        final PriorityQueue<EvictionCandidate> queue = new PriorityQueue<>(Math.max(1, initial.size()), OLDEST_FIRST);
        queue.addAll(initial);
        final long[] out = new long[2];
        EvictionCandidate c;
        while (result.totalBytes() < result.targetBytes && (c = queue.poll()) != null)
        {
            out[0] = 0;
            final int pass = c.softPinned() ? 1 : 0;
            result.objects[pass] += store.evict(c, softPinnedToo, true, out, freed ->
            {
                if (softPinnedToo || !freed.softPinned())
                {
                    queue.add(freed);
                }
                else if (heldBack != null)
                {
                    heldBack.add(freed);
                }
            });
            result.bytes[pass] += out[0];
        }
    }

    /**
     * The oldest candidates whose sizes add up to at least a target. Candidates gather in a buffer with their ages
     * beside them; each time it has doubled, a weighted quickselect on the ages moves the oldest ones that cover the
     * target to its front and drops the rest, and from then on a candidate no older than those kept is refused
     * ({@link #wants}) before anything is built for it. A scan meets ages in no particular order, so the cut tightens
     * fast: a round costs O(candidates) plus sorting what it keeps, where a max-heap of every candidate took a third
     * of an eviction round's CPU.
     */
    static final class OldestCovering
    {
        private static final int FIRST_CUT = 1024;

        private final long targetBytes;
        private EvictionCandidate[] items = new EvictionCandidate[FIRST_CUT];
        private long[] ages = new long[FIRST_CUT];
        private int size;
        private int cutAt = FIRST_CUT;
        private long seed = 0x9E3779B97F4A7C15L;
        /** Whether the candidates kept at the last cut covered the target; then {@link #refuseFromAgeNs} applies. */
        private boolean covered;
        private long refuseFromAgeNs;

        OldestCovering(final long targetBytes)
        {
            this.targetBytes = targetBytes;
        }

        /** Whether a candidate of this age could be among the oldest that cover the target. */
        boolean wants(final long ageNs)
        {
            return !covered || ageNs - refuseFromAgeNs < 0;
        }

        void offer(final EvictionCandidate c)
        {
            if (!wants(c.ageNs()))
            {
                return;
            }
            if (size == items.length)
            {
                items = Arrays.copyOf(items, size * 2);
                ages = Arrays.copyOf(ages, size * 2);
            }
            items[size] = c;
            ages[size++] = c.ageNs();
            if (size >= cutAt)
            {
                cut();
            }
        }

        /**
         * Moves the oldest candidates that cover the target to the front (in no particular order) and drops the others;
         * keeps everything when all of them do not cover it.
         */
        private void cut()
        {
            int lo = 0;
            int hi = size;
            long bytesBelowLo = 0; // [0, lo): older than everything in [lo, size), together short of the target
            int keep = size;
            while (lo < hi)
            {
                final long pivot = ages[lo + (int)((nextRandom() >>> 33) % (hi - lo))];
                // Three-way partition of [lo, hi): older than the pivot [lo, lt), as old [lt, gt), younger [gt, hi).
                int lt = lo;
                int gt = hi;
                int i = lo;
                while (i < gt)
                {
                    final long d = ages[i] - pivot;
                    if (d < 0)
                    {
                        swap(i++, lt++);
                    }
                    else if (d > 0)
                    {
                        swap(i, --gt);
                    }
                    else
                    {
                        i++;
                    }
                }
                final long older = bytes(lo, lt);
                if (bytesBelowLo + older >= targetBytes)
                {
                    hi = lt; // the boundary lies among the older ones
                    keep = lt;
                    continue;
                }
                final long same = bytes(lt, gt);
                if (bytesBelowLo + older + same >= targetBytes)
                {
                    long bytes = bytesBelowLo + older;
                    keep = lt;
                    while (bytes < targetBytes)
                    {
                        bytes += items[keep++].bytes();
                    }
                    break;
                }
                bytesBelowLo += older + same;
                lo = gt;
            }
            if (lo >= hi && bytesBelowLo < targetBytes && keep == size)
            {
                cutAt = Math.max(FIRST_CUT, 2 * size); // everything together is short of the target: keep it all
                return;
            }
            long youngest = ages[0];
            for (int j = 1; j < keep; j++)
            {
                if (ages[j] - youngest > 0)
                {
                    youngest = ages[j];
                }
            }
            Arrays.fill(items, keep, size, null);
            size = keep;
            covered = true;
            refuseFromAgeNs = youngest;
            cutAt = Math.max(FIRST_CUT, 2 * size);
        }

        private long bytes(final int from, final int to)
        {
            long sum = 0;
            for (int j = from; j < to; j++)
            {
                sum += items[j].bytes();
            }
            return sum;
        }

        private void swap(final int a, final int b)
        {
            final EvictionCandidate c = items[a];
            items[a] = items[b];
            items[b] = c;
            final long age = ages[a];
            ages[a] = ages[b];
            ages[b] = age;
        }

        private long nextRandom()
        {
            seed ^= seed << 13;
            seed ^= seed >>> 7;
            seed ^= seed << 17;
            return seed;
        }

        /** The oldest candidates covering the target (all of them if they do not), oldest first. */
        List<EvictionCandidate> inAgeOrder()
        {
            if (size > 0)
            {
                cut();
            }
            final List<EvictionCandidate> list = new ArrayList<>(Arrays.asList(items).subList(0, size));
            list.sort(OLDEST_FIRST);
            return list;
        }
    }

    /**
     * Logs one INFO line summing up the evictions since the last summary, when anything was evicted and at least
     * {@code intervalNs} passed since then (the first eviction is summed up at once). Call from one thread.
     *
     * @return true when a line was logged.
     */
    public boolean logSummaryIfDue(final long nowNs, final long intervalNs)
    {
        if (summarized && nowNs - lastSummaryNs < intervalNs)
        {
            return false;
        }
        final long[] objects = {evictedObjects(0) - summarizedObjects[0], evictedObjects(1) - summarizedObjects[1]};
        final long[] bytes = {evictedBytes(0) - summarizedBytes[0], evictedBytes(1) - summarizedBytes[1]};
        if (objects[0] + objects[1] == 0)
        {
            return false;
        }
        final long roundsNow = rounds();
        final long onDemandNow = onDemandRounds();
        LOG.info("eviction: {} objects ({} bytes) in {} round(s) ({} on demand){}: pass 1 {} objects ({} bytes), " +
            "pass 2 {} objects ({} bytes)", objects[0] + objects[1], bytes[0] + bytes[1], roundsNow - summarizedRounds,
            onDemandNow - summarizedOnDemand,
            summarized ? " in the last " + (nowNs - lastSummaryNs) / 1_000_000_000L + "s" : "",
            objects[0], bytes[0], objects[1], bytes[1]);
        summarized = true;
        lastSummaryNs = nowNs;
        summarizedRounds = roundsNow;
        summarizedOnDemand = onDemandNow;
        for (int pass = 0; pass < 2; pass++)
        {
            summarizedObjects[pass] += objects[pass];
            summarizedBytes[pass] += bytes[pass];
        }
        return true;
    }

    public long rounds()
    {
        return rounds.sum();
    }

    public long onDemandRounds()
    {
        return onDemandRounds.sum();
    }

    /** Objects evicted by pass 1 (index 0) or pass 2 (index 1). */
    public long evictedObjects(final int pass)
    {
        return evictedObjects[pass].sum();
    }

    public long evictedBytes(final int pass)
    {
        return evictedBytes[pass].sum();
    }

    public boolean allowSoftPinned()
    {
        return allowSoftPinned;
    }

    public EvictionPolicy policy()
    {
        return policy;
    }

    /**
     * Units evicted while a live object still named them as their parent, each leaving a hole in a prefix chain:
     * under {@link EvictionPolicy#PREFIX_LEAF_FIRST} only when the leaves could not free enough, under
     * {@link EvictionPolicy#OLDEST_LEASE} whenever age order says so.
     */
    public long prefixBreaks()
    {
        return prefixBreaks.sum();
    }
}
