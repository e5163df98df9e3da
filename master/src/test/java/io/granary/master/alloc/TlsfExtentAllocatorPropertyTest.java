package io.granary.master.alloc;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static io.granary.master.alloc.ExtentAllocator.NO_SPACE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Random allocate/free sequences checked step by step against a reference model (a TreeMap of live extents).
 * Seeds are fixed; a failure names its seed and step.
 */
class TlsfExtentAllocatorPropertyTest
{
    private static final long KIB = 1024;
    private static final long MIB = 1024 * KIB;
    private static final long GIB = 1024 * MIB;
    private static final long[] PAGE_SIZES = {4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 512 * KIB, MIB, 2 * MIB};
    private static final int STEPS = 4000;

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 42, 0x5EED, 20240601})
    void shouldMatchReferenceModelWithDefaultGranularity(final long seed)
    {
        run(seed, new TlsfExtentAllocator(64 * MIB), 4 * MIB);
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {7, 99})
    void shouldMatchReferenceModelWithPageGranularityAndRaggedCapacity(final long seed)
    {
        run(seed, new TlsfExtentAllocator(48 * MIB + 12_345, 4096), 4 * MIB);
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {11, 12})
    void shouldMatchReferenceModelWithSmallGranularity(final long seed)
    {
        run(seed, new TlsfExtentAllocator(8 * MIB, 8), 256 * KIB);
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {13})
    void shouldMatchReferenceModelBeyondFourGib(final long seed)
    {
        // Everything scaled up 256 times, so offsets run far past 2^32.
        run(seed, new TlsfExtentAllocator(16 * GIB), 1024 * MIB);
    }

    private static void run(final long seed, final TlsfExtentAllocator allocator, final long maxSize)
    {
        final Model model = new Model(allocator.capacity(), allocator.granularity());
        final Random random = new Random(seed);
        final List<Long> live = new ArrayList<>();
        final long scale = Math.max(1, maxSize / (4 * MIB));
        int step = 0;
        try
        {
            for (; step < STEPS; step++)
            {
                // Alternate filling and draining phases so the allocator runs both near-empty and near-full.
                final double allocateProbability = (step / 500) % 2 == 0 ? 0.75 : 0.35;
                if (live.isEmpty() || random.nextDouble() < allocateProbability)
                {
                    final long size = Math.min(maxSize, nextSize(random) * scale);
                    final long offset = allocator.allocate(size);
                    final long expectedSize = model.roundUp(size);
                    if (offset == NO_SPACE)
                    {
                        assertThat(expectedSize).as("refused %d bytes", size).isGreaterThan(model.largestGap());
                    }
                    else
                    {
                        model.add(offset, expectedSize);
                        live.add(offset);
                        assertThat(allocator.allocationSize(offset)).isEqualTo(expectedSize);
                    }
                }
                else
                {
                    final int victim = random.nextInt(live.size());
                    final long offset = live.get(victim);
                    live.set(victim, live.get(live.size() - 1));
                    live.remove(live.size() - 1);
                    if (random.nextInt(10) == 0 && model.extents.get(offset) > allocator.granularity())
                    {
                        // Inside the live extent, so certainly not the start of any allocation.
                        assertThatThrownBy(() -> allocator.free(offset + allocator.granularity()))
                            .isInstanceOf(IllegalArgumentException.class);
                    }
                    allocator.free(offset);
                    model.remove(offset);
                    assertThat(allocator.allocationSize(offset)).isEqualTo(-1);
                    assertThatThrownBy(() -> allocator.free(offset)).isInstanceOf(IllegalArgumentException.class);
                }
                assertMatches(allocator, model);
            }

            while (!live.isEmpty())
            {
                final long offset = live.remove(random.nextInt(live.size()));
                allocator.free(offset);
                model.remove(offset);
            }
            assertMatches(allocator, model);
            assertThat(allocator.largestFreeBlock()).isEqualTo(allocator.capacity());
            assertThat(allocator.freeBlockCount()).isEqualTo(1);
        }
        catch (final AssertionError | RuntimeException ex)
        {
            throw new AssertionError("seed=" + seed + " step=" + step + ": " + ex.getMessage(), ex);
        }
    }

    /** Half repeated KV page sizes, half log-uniform in [1 B, 4 MiB]. */
    private static long nextSize(final Random random)
    {
        if (random.nextBoolean())
        {
            return PAGE_SIZES[random.nextInt(PAGE_SIZES.length)];
        }
        return Math.max(1, (long)Math.pow(2, random.nextDouble() * 22));
    }

    private static void assertMatches(final TlsfExtentAllocator allocator, final Model model)
    {
        allocator.verifyIntegrity();
        assertThat(allocator.allocatedBytes()).isEqualTo(model.allocatedBytes);
        assertThat(allocator.allocationCount()).isEqualTo(model.extents.size());
        assertThat(allocator.largestFreeBlock()).isEqualTo(model.largestGap());
    }

    /** Live extents by offset; checks alignment, bounds and overlap as they are added. */
    private static final class Model
    {
        final TreeMap<Long, Long> extents = new TreeMap<>();
        final long capacity;
        final long granularity;
        long allocatedBytes;

        Model(final long capacity, final long granularity)
        {
            this.capacity = capacity;
            this.granularity = granularity;
        }

        long roundUp(final long size)
        {
            return (size + granularity - 1) / granularity * granularity;
        }

        void add(final long offset, final long size)
        {
            assertThat(offset % granularity).as("alignment of %d", offset).isZero();
            assertThat(offset).isNotNegative();
            assertThat(offset + size).as("end of extent at %d", offset).isLessThanOrEqualTo(capacity);
            final Map.Entry<Long, Long> before = extents.floorEntry(offset);
            if (before != null)
            {
                assertThat(before.getKey() + before.getValue()).as("extent at %d overlaps %s", offset, before)
                    .isLessThanOrEqualTo(offset);
            }
            final Map.Entry<Long, Long> after = extents.ceilingEntry(offset);
            if (after != null)
            {
                assertThat(offset + size).as("extent at %d overlaps %s", offset, after)
                    .isLessThanOrEqualTo(after.getKey());
            }
            extents.put(offset, size);
            allocatedBytes += size;
        }

        void remove(final long offset)
        {
            final Long size = extents.remove(offset);
            assertThat(size).as("model extent at %d", offset).isNotNull();
            allocatedBytes -= size;
        }

        long largestGap()
        {
            long largest = 0;
            long cursor = 0;
            for (final Map.Entry<Long, Long> extent : extents.entrySet())
            {
                largest = Math.max(largest, extent.getKey() - cursor);
                cursor = extent.getKey() + extent.getValue();
            }
            return Math.max(largest, capacity - cursor);
        }
    }
}
