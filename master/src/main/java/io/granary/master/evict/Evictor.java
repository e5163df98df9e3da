package io.granary.master.evict;

import io.granary.master.meta.EvictionCandidate;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.atomic.LongAdder;

/**
 * Decides what to evict and when: above the high watermark (background) and when an allocation
 * fails (on demand). Pass 1 takes unpinned units whose lease expired, exactly oldest age first;
 * pass 2 takes soft-pinned units (oldest first) when allowed. Leased, hard-pinned and incomplete
 * objects are never taken; a group goes as a whole. Rounds are serialised by this object's monitor.
 *
 * <p>A round scans every shard once and keeps only the oldest candidates that cover the target
 * (a bounded max-heap), so its memory is proportional to what it evicts; scanning costs O(objects)
 * per round, amortised over the eviction ratio's worth of victims.
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

    private final LongAdder rounds = new LongAdder();
    private final LongAdder[] evictedObjects = {new LongAdder(), new LongAdder()};
    private final LongAdder[] evictedBytes = {new LongAdder(), new LongAdder()};
    private final LongAdder onDemandRounds = new LongAdder();

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
    }

    public Evictor(
        final MetadataStore store,
        final SegmentRegistry registry,
        final double highWatermark,
        final double ratio,
        final boolean allowSoftPinned)
    {
        this.store = store;
        this.registry = registry;
        this.highWatermark = highWatermark;
        this.ratio = ratio;
        this.allowSoftPinned = allowSoftPinned;
    }

    /** Installs on-demand eviction: a failed allocation evicts at least the eviction ratio, then retries. */
    public Evictor attach()
    {
        store.allocationFailureHandler(this::evictForAllocation);
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

    /** Background check: above the high watermark, evict down to (watermark - ratio) of capacity. */
    public Result maybeEvict()
    {
        final long[] usage = usage();
        final long capacity = usage[0];
        if (capacity == 0 || usage[1] <= (long)(highWatermark * capacity))
        {
            return null;
        }
        final long floor = (long)(Math.max(0.0, highWatermark - ratio) * capacity);
        return evict(usage[1] - floor);
    }

    /** On demand, when a put of {@code neededBytes} found no room. @return true if anything was freed. */
    public boolean evictForAllocation(final long neededBytes)
    {
        final long roundsBefore = rounds.sum();
        synchronized (this)
        {
            if (rounds.sum() != roundsBefore)
            {
                return true; // a round finished while we waited: try the allocation again first
            }
            onDemandRounds.increment();
            final long capacity = usage()[0];
            final long target = Math.max(neededBytes, (long)(ratio * capacity));
            return evict(target).totalBytes() > 0;
        }
    }

    /** One eviction round freeing at least {@code targetBytes} if the rules allow. */
    public synchronized Result evict(final long targetBytes)
    {
        final Result result = new Result(targetBytes);
        if (targetBytes <= 0)
        {
            return result;
        }
        rounds.increment();
        final OldestCovering unpinned = new OldestCovering(targetBytes);
        final OldestCovering pinned = allowSoftPinned ? new OldestCovering(targetBytes) : null;
        store.scanEvictionCandidates(allowSoftPinned, c ->
        {
            if (c.softPinned())
            {
                pinned.offer(c);
            }
            else
            {
                unpinned.offer(c);
            }
        });
        final long[] bytes = new long[1];
        for (final EvictionCandidate c : unpinned.inAgeOrder())
        {
            if (result.totalBytes() >= targetBytes)
            {
                break;
            }
            bytes[0] = 0;
            result.objects[0] += store.evict(c, false, bytes);
            result.bytes[0] += bytes[0];
        }
        if (pinned != null && result.totalBytes() < targetBytes)
        {
            for (final EvictionCandidate c : pinned.inAgeOrder())
            {
                if (result.totalBytes() >= targetBytes)
                {
                    break;
                }
                bytes[0] = 0;
                result.objects[1] += store.evict(c, true, bytes);
                result.bytes[1] += bytes[0];
            }
        }
        for (int pass = 0; pass < 2; pass++)
        {
            evictedObjects[pass].add(result.objects[pass]);
            evictedBytes[pass].add(result.bytes[pass]);
        }
        if (result.totalObjects() > 0 && LOG.isDebugEnabled())
        {
            LOG.debug("evicted {} objects ({} bytes) for a target of {} bytes: pass 1 {} objects, pass 2 {} objects",
                result.totalObjects(), result.totalBytes(), targetBytes, result.objects[0], result.objects[1]);
        }
        return result;
    }

    /** The oldest candidates whose sizes add up to at least a target: a max-heap by age, trimmed as it goes. */
    private static final class OldestCovering
    {
        private final long targetBytes;
        private final PriorityQueue<EvictionCandidate> heap = new PriorityQueue<>(OLDEST_FIRST.reversed());
        private long bytes;

        OldestCovering(final long targetBytes)
        {
            this.targetBytes = targetBytes;
        }

        void offer(final EvictionCandidate c)
        {
            if (bytes >= targetBytes && OLDEST_FIRST.compare(c, heap.peek()) >= 0)
            {
                return; // younger than everything we already need
            }
            heap.add(c);
            bytes += c.bytes();
            while (!heap.isEmpty() && bytes - heap.peek().bytes() >= targetBytes)
            {
                bytes -= heap.poll().bytes();
            }
        }

        List<EvictionCandidate> inAgeOrder()
        {
            final List<EvictionCandidate> list = new ArrayList<>(heap);
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
}
