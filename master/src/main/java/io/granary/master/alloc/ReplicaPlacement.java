package io.granary.master.alloc;

import io.granary.master.meta.ReplicaRecord;
import io.granary.master.segment.MountedSegment;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Chooses segments for an object's replicas and carves the extents: distinct segments always,
 * distinct nodes when possible, the preferred segment first, otherwise the emptier of two random
 * candidates ("power of two choices") so load spreads without a global scan per put; nodes the
 * caller asks to avoid (a retry after their writes failed) only when nothing else has room. Thread safe.
 */
public final class ReplicaPlacement
{
    /** Null: each thread's ThreadLocalRandom; else one seeded generator (reproducible choices, for tests). */
    private final Random seeded;

    /** Random choices from each thread's own generator. */
    public ReplicaPlacement()
    {
        this.seeded = null;
    }

    /** Choices from one generator seeded with {@code seed}: the same calls place the same way (for tests). */
    public ReplicaPlacement(final long seed)
    {
        this.seeded = new Random(seed);
    }

    /**
     * Allocates up to {@code replicas} extents of {@code lengthBytes}.
     *
     * @return the extents allocated, possibly fewer than asked (possibly none).
     */
    public List<ReplicaRecord> place(
        final MountedSegment[] live, final int replicas, final long lengthBytes, final String preferredSegment)
    {
        return place(live, replicas, lengthBytes, preferredSegment, Set.of());
    }

    /** {@link #place(MountedSegment[], int, long, String)} leaving the nodes in {@code avoidNodes} for last. */
    public List<ReplicaRecord> place(
        final MountedSegment[] live,
        final int replicas,
        final long lengthBytes,
        final String preferredSegment,
        final Set<String> avoidNodes)
    {
        if (live.length == 0 || replicas <= 0)
        {
            return new ArrayList<>(0);
        }
        if (replicas == 1 && (preferredSegment == null || preferredSegment.isEmpty()) && avoidNodes.isEmpty())
        {
            final ReplicaRecord one = placeOne(live, lengthBytes);
            if (one != null)
            {
                return List.of(one);
            }
        }
        final List<ReplicaRecord> placed = new ArrayList<>(replicas);
        final List<MountedSegment> candidates = new ArrayList<>(live.length);
        MountedSegment preferred = null;
        for (final MountedSegment s : live)
        {
            if (s.isPlaceable() && s.freeBytes() >= lengthBytes)
            {
                if (preferred == null && preferredSegment != null && !preferredSegment.isEmpty() &&
                    s.name().equals(preferredSegment))
                {
                    preferred = s;
                }
                else
                {
                    candidates.add(s);
                }
            }
        }

        // A few replicas at most: a list scanned with equals costs less than hashing node ids into a set per put.
        final List<String> usedNodes = new ArrayList<>(replicas);
        if (preferred != null)
        {
            tryAllocate(preferred, lengthBytes, placed, usedNodes);
        }

        // First pass: one replica per node; second pass: any remaining segment; third: nodes to avoid.
        for (int pass = 0; pass < 3 && placed.size() < replicas; pass++)
        {
            final List<MountedSegment> pool = new ArrayList<>(candidates.size());
            for (final MountedSegment s : candidates)
            {
                final boolean avoided = avoidNodes.contains(s.nodeId());
                if (pass == 2 ? avoided : !avoided && (pass == 1 || !usedNodes.contains(s.nodeId())))
                {
                    pool.add(s);
                }
            }
            while (placed.size() < replicas && !pool.isEmpty())
            {
                final MountedSegment chosen = pickEmptierOfTwo(pool);
                pool.remove(chosen);
                if (pass == 0 && usedNodes.contains(chosen.nodeId()))
                {
                    continue;
                }
                if (tryAllocate(chosen, lengthBytes, placed, usedNodes))
                {
                    candidates.remove(chosen);
                }
            }
        }
        return placed;
    }

    /**
     * The common case (one replica, no preference, nothing to avoid) without building candidate lists: two segments
     * drawn from all live ones, the emptier taken when both are placeable with room. Null when either is not, or the
     * allocation fails; the caller then places the general way. Drawing two from all and keeping the draw only when
     * both are eligible picks each pair of eligible segments as often as drawing from the eligible ones does.
     */
    private ReplicaRecord placeOne(final MountedSegment[] live, final long lengthBytes)
    {
        final Random random = seeded != null ? seeded : ThreadLocalRandom.current();
        final MountedSegment a = live[random.nextInt(live.length)];
        final MountedSegment b = live.length == 1 ? a : live[random.nextInt(live.length)];
        if (!a.isPlaceable() || a.freeBytes() < lengthBytes || !b.isPlaceable() || b.freeBytes() < lengthBytes)
        {
            return null;
        }
        final MountedSegment chosen = b.freeBytes() > a.freeBytes() ? b : a;
        final long offset = chosen.allocate(lengthBytes);
        return offset == ExtentAllocator.NO_SPACE ? null : new ReplicaRecord(chosen, offset, lengthBytes);
    }

    private static boolean tryAllocate(
        final MountedSegment segment,
        final long lengthBytes,
        final List<ReplicaRecord> placed,
        final List<String> usedNodes)
    {
        final long offset = segment.allocate(lengthBytes);
        if (offset == ExtentAllocator.NO_SPACE)
        {
            return false;
        }
        placed.add(new ReplicaRecord(segment, offset, lengthBytes));
        usedNodes.add(segment.nodeId());
        return true;
    }

    private MountedSegment pickEmptierOfTwo(final List<MountedSegment> pool)
    {
        final Random random = seeded != null ? seeded : ThreadLocalRandom.current();
        final MountedSegment a = pool.get(random.nextInt(pool.size()));
        if (pool.size() == 1)
        {
            return a;
        }
        final MountedSegment b = pool.get(random.nextInt(pool.size()));
        return b.freeBytes() > a.freeBytes() ? b : a;
    }
}
