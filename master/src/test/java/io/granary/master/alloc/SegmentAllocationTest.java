package io.granary.master.alloc;

import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.granary.master.alloc.ExtentAllocator.NO_SPACE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class SegmentAllocationTest
{
    private static final long MIB = 1024 * 1024;

    @Test
    void shouldReportIdentityAndStats()
    {
        final SegmentAllocation segment = SegmentAllocation.tlsf(3, "node-1/seg0", 16 * MIB);
        final long a = segment.allocate(MIB);
        segment.allocate(100);

        final SegmentAllocation.Stats stats = segment.stats();

        assertThat(segment.segmentId()).isEqualTo(3);
        assertThat(segment.segmentName()).isEqualTo("node-1/seg0");
        assertThat(segment.capacity()).isEqualTo(16 * MIB);
        assertThat(segment.allocationSize(a)).isEqualTo(MIB);
        assertThat(stats).isEqualTo(new SegmentAllocation.Stats(3, "node-1/seg0", 16 * MIB, MIB + 128, 2,
            15 * MIB - 128));
        assertThat(stats.freeBytes()).isEqualTo(15 * MIB - 128);
        assertThat(segment.freeBytes()).isEqualTo(15 * MIB - 128);
        segment.free(a);
        assertThat(segment.freeBytes()).isEqualTo(16 * MIB - 128);
        assertThat(stats.utilisation()).isCloseTo((MIB + 128) / (16.0 * MIB), Offset.offset(1e-12));
    }

    @Test
    void shouldPassAllocatorErrorsThrough()
    {
        final SegmentAllocation segment = SegmentAllocation.tlsf(0, "seg", MIB);

        assertThat(segment.allocate(2 * MIB)).isEqualTo(NO_SPACE);
        assertThatThrownBy(() -> segment.allocate(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> segment.free(64)).isInstanceOf(IllegalArgumentException.class);
        assertThat(segment.stats().allocationCount()).isZero();
    }

    @Test
    void shouldRefuseBlankNameOrMissingAllocator()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);

        assertThatThrownBy(() -> new SegmentAllocation(1, " ", allocator)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SegmentAllocation(1, null, allocator))
            .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SegmentAllocation(1, "seg", null)).isInstanceOf(NullPointerException.class);
    }

    @Test
    void shouldHandOutDisjointExtentsToConcurrentCallers() throws Exception
    {
        final SegmentAllocation segment = SegmentAllocation.tlsf(1, "seg", 256 * MIB);
        final int threads = 4;
        final CyclicBarrier start = new CyclicBarrier(threads);
        final ExecutorService executor = Executors.newFixedThreadPool(threads);
        try
        {
            final List<Future<Map<Long, Long>>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final long seed = t;
                results.add(executor.submit(() -> churn(segment, new Random(seed), start)));
            }
            final TreeMap<Long, Long> all = new TreeMap<>();
            for (final Future<Map<Long, Long>> result : results)
            {
                all.putAll(result.get(60, TimeUnit.SECONDS));
            }

            long end = 0;
            long total = 0;
            for (final Map.Entry<Long, Long> extent : all.entrySet())
            {
                assertThat(extent.getKey()).as("extent overlaps its predecessor").isGreaterThanOrEqualTo(end);
                end = extent.getKey() + extent.getValue();
                total += extent.getValue();
            }
            final SegmentAllocation.Stats stats = segment.stats();
            assertThat(stats.allocationCount()).isEqualTo(all.size());
            assertThat(stats.allocatedBytes()).isEqualTo(total);

            all.keySet().forEach(segment::free);
            assertThat(segment.stats().largestFreeBytes()).isEqualTo(256 * MIB);
        }
        finally
        {
            executor.shutdownNow();
            assertThat(executor.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
        }
    }

    /** Allocates and frees at random; returns the extents still held (offset to reserved size). */
    private static Map<Long, Long> churn(
        final SegmentAllocation segment, final Random random, final CyclicBarrier start) throws Exception
    {
        start.await(10, TimeUnit.SECONDS);
        final List<Long> held = new ArrayList<>();
        for (int i = 0; i < 5000; i++)
        {
            if (held.isEmpty() || random.nextInt(3) != 0)
            {
                final long offset = segment.allocate(1 + random.nextInt((int)MIB));
                if (offset != NO_SPACE)
                {
                    held.add(offset);
                }
            }
            else
            {
                segment.free(held.remove(random.nextInt(held.size())));
            }
        }
        final Map<Long, Long> extents = new TreeMap<>();
        for (final long offset : held)
        {
            extents.put(offset, segment.allocationSize(offset));
        }
        return extents;
    }
}
