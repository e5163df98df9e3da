package io.granary.master.alloc;

import io.granary.master.meta.ReplicaRecord;
import io.granary.master.segment.MountedSegment;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/** Where {@link ReplicaPlacement} puts replicas: eligible segments only, spread by the emptier of two. */
class ReplicaPlacementTest
{
    private static MountedSegment segment(final String node, final int id, final long bytes, final boolean placeable)
    {
        return new MountedSegment(node, node, "127.0.0.1:" + (7000 + id), id, node + "/seg", bytes,
            new SegmentAllocation(id, node + "/seg", new TlsfExtentAllocator(bytes, 64)), null, placeable);
    }

    private static Map<Integer, Integer> countBySegment(final List<List<ReplicaRecord>> placements)
    {
        final Map<Integer, Integer> counts = new HashMap<>();
        for (final List<ReplicaRecord> placed : placements)
        {
            for (final ReplicaRecord r : placed)
            {
                counts.merge(r.segment().segmentId(), 1, Integer::sum);
            }
        }
        return counts;
    }

    @Test
    void shouldPlaceSingleReplicasOnlyOnPlaceableSegmentsWithRoomAndSpreadThem()
    {
        final MountedSegment reporting = segment("a", 1, 64L << 20, false); // its ledger report is still to come
        final MountedSegment small = segment("b", 2, 8L << 10, true);        // too small for the values below
        final MountedSegment c = segment("c", 3, 64L << 20, true);
        final MountedSegment d = segment("d", 4, 64L << 20, true);
        final MountedSegment[] live = {reporting, small, c, d};
        final ReplicaPlacement placement = new ReplicaPlacement(7);
        final List<List<ReplicaRecord>> placements = new java.util.ArrayList<>();
        for (int i = 0; i < 2000; i++)
        {
            final List<ReplicaRecord> placed = placement.place(live, 1, 16 << 10, "");
            assertThat(placed).hasSize(1);
            placements.add(placed);
        }
        final Map<Integer, Integer> counts = countBySegment(placements);
        assertThat(counts.keySet()).containsExactlyInAnyOrder(3, 4);
        // The emptier of two keeps the two eligible segments within a few values of each other.
        assertThat(Math.abs(counts.get(3) - counts.get(4))).isLessThan(40);
        assertThat(c.allocatedBytes() + d.allocatedBytes()).isEqualTo(2000L * (16 << 10));
    }

    @Test
    void shouldFallBackWhenTheDrawnSegmentsCannotTakeTheValue()
    {
        // Only one segment has room: however the two draws fall, the value lands there.
        final MountedSegment full = segment("a", 1, 32L << 10, true);
        final MountedSegment roomy = segment("b", 2, 64L << 20, true);
        final ReplicaPlacement placement = new ReplicaPlacement(11);
        for (int i = 0; i < 200; i++)
        {
            final List<ReplicaRecord> placed = placement.place(new MountedSegment[] {full, roomy}, 1, 64 << 10, null);
            assertThat(placed).hasSize(1);
            assertThat(placed.get(0).segment()).isSameAs(roomy);
        }
        // Room enough in total but not in one piece on the only segment: nothing is placed.
        final MountedSegment fragmented = segment("c", 3, 256L << 10, true);
        final long[] offsets = new long[4];
        for (int i = 0; i < 4; i++)
        {
            offsets[i] = fragmented.allocate(64 << 10);
        }
        fragmented.free(offsets[0]);
        fragmented.free(offsets[2]);
        assertThat(fragmented.freeBytes()).isEqualTo(128L << 10);
        assertThat(placement.place(new MountedSegment[] {fragmented}, 1, 128 << 10, "")).isEmpty();
        // Nothing live: nothing placed.
        assertThat(placement.place(new MountedSegment[0], 1, 4096, "")).isEmpty();
    }

    @Test
    void shouldHonourPreferredSegmentsAvoidedNodesAndDistinctNodesForSeveralReplicas()
    {
        final MountedSegment a = segment("a", 1, 64L << 20, true);
        final MountedSegment b = segment("b", 2, 64L << 20, true);
        final MountedSegment c = segment("c", 3, 64L << 20, true);
        final MountedSegment[] live = {a, b, c};
        final ReplicaPlacement placement = new ReplicaPlacement(3);
        for (int i = 0; i < 50; i++)
        {
            assertThat(placement.place(live, 1, 4096, "b/seg").get(0).segment()).isSameAs(b);
            assertThat(placement.place(live, 1, 4096, "", Set.of("a", "c")).get(0).segment()).isSameAs(b);
            final List<ReplicaRecord> three = placement.place(live, 3, 4096, "");
            assertThat(three).extracting(r -> r.segment().nodeId()).containsExactlyInAnyOrder("a", "b", "c");
        }
    }
}
