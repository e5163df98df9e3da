package io.granary.master.alloc;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static io.granary.master.alloc.ExtentAllocator.NO_SPACE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TlsfExtentAllocatorTest
{
    private static final long KIB = 1024;
    private static final long MIB = 1024 * KIB;
    private static final long GIB = 1024 * MIB;
    private static final long TIB = 1024 * GIB;

    @Test
    void shouldStartWithOneFreeBlockOfFullCapacity()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(64 * MIB);

        assertThat(allocator.capacity()).isEqualTo(64 * MIB);
        assertThat(allocator.granularity()).isEqualTo(TlsfExtentAllocator.DEFAULT_GRANULARITY);
        assertThat(allocator.largestFreeBlock()).isEqualTo(64 * MIB);
        assertThat(allocator.allocatedBytes()).isZero();
        assertThat(allocator.allocationCount()).isZero();
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldAllocateExactlyCapacity()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(64 * MIB);

        assertThat(allocator.allocate(64 * MIB)).isZero();
        assertThat(allocator.allocatedBytes()).isEqualTo(64 * MIB);
        assertThat(allocator.largestFreeBlock()).isZero();
        assertThat(allocator.freeBlockCount()).isZero();
        assertThat(allocator.allocate(1)).isEqualTo(NO_SPACE);
        allocator.verifyIntegrity();

        allocator.free(0);
        assertThat(allocator.largestFreeBlock()).isEqualTo(64 * MIB);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldReturnNoSpaceWhenRequestExceedsCapacity()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(64 * MIB);

        assertThat(allocator.allocate(64 * MIB + 1)).isEqualTo(NO_SPACE);
        assertThat(allocator.allocate(Long.MAX_VALUE)).isEqualTo(NO_SPACE);
        assertThat(allocator.allocationCount()).isZero();
        assertThat(allocator.largestFreeBlock()).isEqualTo(64 * MIB);
    }

    @Test
    void shouldRefuseNonPositiveSizes()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);

        assertThatThrownBy(() -> allocator.allocate(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> allocator.allocate(-1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> allocator.allocate(Long.MIN_VALUE)).isInstanceOf(IllegalArgumentException.class);
        assertThat(allocator.allocationCount()).isZero();
    }

    @Test
    void shouldRefuseDoubleFreeAndLeaveStateUnchanged()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);
        final long a = allocator.allocate(100);
        final long b = allocator.allocate(200);
        final long c = allocator.allocate(300);
        allocator.free(b);
        final Snapshot before = Snapshot.of(allocator);

        assertThatThrownBy(() -> allocator.free(b))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining(Long.toString(b));

        assertThat(Snapshot.of(allocator)).isEqualTo(before);
        allocator.verifyIntegrity();
        assertThat(allocator.allocationSize(a)).isEqualTo(128);
        assertThat(allocator.allocationSize(c)).isEqualTo(320);
    }

    @Test
    void shouldRefuseUnknownOffsetsAndLeaveStateUnchanged()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);
        final long a = allocator.allocate(4096);
        allocator.allocate(4096);
        final Snapshot before = Snapshot.of(allocator);

        // Inside a live extent, misaligned, in free space, negative, beyond capacity.
        for (final long bad : new long[] {a + 64, a + 1, 512 * KIB, -64, MIB, 2 * MIB, Long.MAX_VALUE})
        {
            assertThatThrownBy(() -> allocator.free(bad)).as("offset %d", bad)
                .isInstanceOf(IllegalArgumentException.class);
            assertThat(allocator.allocationSize(bad)).as("offset %d", bad).isEqualTo(-1);
        }

        assertThat(Snapshot.of(allocator)).isEqualTo(before);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldRoundSizesUpToGranularity()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB, 4096);

        final long a = allocator.allocate(1);
        final long b = allocator.allocate(4097);
        final long c = allocator.allocate(4096);

        assertThat(allocator.allocationSize(a)).isEqualTo(4096);
        assertThat(allocator.allocationSize(b)).isEqualTo(8192);
        assertThat(allocator.allocationSize(c)).isEqualTo(4096);
        assertThat(List.of(a, b, c)).allSatisfy(offset -> assertThat(offset % 4096).isZero());
        assertThat(allocator.allocatedBytes()).isEqualTo(16 * KIB);
        assertThat(allocator.allocationCount()).isEqualTo(3);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldRoundCapacityDownToGranularity()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(10_000, 4096);

        assertThat(allocator.capacity()).isEqualTo(8192);
        assertThat(allocator.largestFreeBlock()).isEqualTo(8192);
        assertThat(allocator.allocate(8193)).isEqualTo(NO_SPACE);
        assertThat(allocator.allocate(8192)).isZero();
    }

    @Test
    void shouldRefuseBadConstructorArguments()
    {
        for (final int granularity : new int[] {0, -64, 3, 4, 48, 100, Integer.MIN_VALUE})
        {
            assertThatThrownBy(() -> new TlsfExtentAllocator(MIB, granularity)).as("granularity %d", granularity)
                .isInstanceOf(IllegalArgumentException.class);
        }
        assertThatThrownBy(() -> new TlsfExtentAllocator(32, 64)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TlsfExtentAllocator(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TlsfExtentAllocator(-MIB)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TlsfExtentAllocator(TlsfExtentAllocator.MAX_CAPACITY + 64))
            .isInstanceOf(IllegalArgumentException.class);
        assertThat(new TlsfExtentAllocator(TlsfExtentAllocator.MAX_CAPACITY).largestFreeBlock())
            .isEqualTo(TlsfExtentAllocator.MAX_CAPACITY);
    }

    @Test
    void shouldServeOffsetsBeyondFourGibInTerabyteSegment()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(TIB, 8);
        final List<Long> offsets = new ArrayList<>();
        for (int i = 0; i < 1000; i++)
        {
            final long offset = allocator.allocate(GIB);
            assertThat(offset).isEqualTo(i * GIB);
            offsets.add(offset);
        }
        assertThat(offsets.get(999)).isGreaterThan(1L << 32);
        assertThat(allocator.allocationSize(999 * GIB)).isEqualTo(GIB);
        assertThat(allocator.allocatedBytes()).isEqualTo(1000 * GIB);
        assertThat(allocator.largestFreeBlock()).isEqualTo(24 * GIB);
        assertThat(allocator.allocate(24 * GIB + 8)).isEqualTo(NO_SPACE);
        allocator.verifyIntegrity();

        // Free every other GiB: holes of 1 GiB cannot serve 1 GiB + 8.
        for (int i = 0; i < 1000; i += 2)
        {
            allocator.free(offsets.get(i));
        }
        assertThat(allocator.allocate(GIB + 8)).isEqualTo(1000 * GIB);
        allocator.free(1000 * GIB);
        final long reused = allocator.allocate(GIB);
        assertThat(reused % (2 * GIB)).as("a freed even hole").isZero();
        allocator.free(reused);
        for (int i = 1; i < 1000; i += 2)
        {
            allocator.free(offsets.get(i));
        }

        assertThat(allocator.largestFreeBlock()).isEqualTo(TIB);
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
        assertThat(allocator.allocate(TIB)).isZero();
        allocator.verifyIntegrity();
    }

    @Test
    void shouldCoalesceWithBothNeighbours()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);
        final long a = allocator.allocate(64 * KIB);
        final long b = allocator.allocate(64 * KIB);
        final long c = allocator.allocate(64 * KIB);
        allocator.allocate(MIB - 192 * KIB);
        assertThat(allocator.largestFreeBlock()).isZero();

        allocator.free(a);
        allocator.free(c);
        assertThat(allocator.freeBlockCount()).isEqualTo(2);
        assertThat(allocator.largestFreeBlock()).isEqualTo(64 * KIB);

        allocator.free(b);
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
        assertThat(allocator.largestFreeBlock()).isEqualTo(192 * KIB);
        assertThat(allocator.allocate(192 * KIB)).isEqualTo(a);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldReuseFreedHoleOfSameSizeBeforeSplittingLargerBlock()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);
        final long a = allocator.allocate(64 * KIB);
        allocator.allocate(64 * KIB);
        allocator.free(a);

        assertThat(allocator.allocate(64 * KIB)).isEqualTo(a);
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
    }

    @Test
    void shouldFindFittingBlockDeepInOwnClassWhenNothingLargerIsFree()
    {
        // 1000 and 1010 granules share a size class (32 granules wide at this size). The only hole that can serve
        // 1005 granules sits behind nine 1000-granule holes in that class's list, and largestFreeBlock promises
        // that the request succeeds.
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB, 64);
        final long large = allocator.allocate(1010 * 64);
        allocator.allocate(64);
        final List<Long> smalls = new ArrayList<>();
        for (int i = 0; i < 9; i++)
        {
            smalls.add(allocator.allocate(1000 * 64));
            allocator.allocate(64);
        }
        allocator.allocate(allocator.largestFreeBlock());
        allocator.free(large);
        smalls.forEach(allocator::free);
        assertThat(allocator.largestFreeBlock()).isEqualTo(1010 * 64);

        assertThat(allocator.allocate(1005 * 64)).isEqualTo(large);
        assertThat(allocator.allocate(1001 * 64)).isEqualTo(NO_SPACE);
        assertThat(allocator.allocate(1000 * 64)).isIn(smalls);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldKeepTheOffsetIndexExactUnderRandomSmallAllocationsAndFrees()
    {
        // Regions of 4096 granules (256 KiB here) hold from one to hundreds of these allocations, so entries go in
        // out of offset order, region arrays grow and shrink, and regions empty and fill again.
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(4 * MIB, 64);
        final Random random = new Random(20261202);
        final TreeMap<Long, Long> live = new TreeMap<>();
        for (int step = 0; step < 200_000; step++)
        {
            if (live.isEmpty() || random.nextInt(100) < 55)
            {
                final long size = random.nextBoolean() ? 64 : 64L * (1 + random.nextInt(128));
                final long offset = allocator.allocate(size);
                if (offset != NO_SPACE)
                {
                    assertThat(live.put(offset, size)).as("offset %d handed out twice", offset).isNull();
                }
            }
            else
            {
                final Long key = live.ceilingKey((long)random.nextInt(4 * (int)MIB));
                final long offset = key != null ? key : live.firstKey();
                allocator.free(offset);
                live.remove(offset);
                assertThat(allocator.allocationSize(offset)).isEqualTo(-1);
            }
            if (step % 25_000 == 0)
            {
                allocator.verifyIntegrity();
            }
        }
        allocator.verifyIntegrity();
        assertThat(allocator.allocationCount()).isEqualTo(live.size());
        for (final Map.Entry<Long, Long> e : live.entrySet())
        {
            assertThat(allocator.allocationSize(e.getKey())).isEqualTo(e.getValue());
            assertThat(allocator.allocationSize(e.getKey() + 64)).isIn(-1L, live.get(e.getKey() + 64));
        }
    }

    @Test
    void shouldIndexAllocationsAcrossTheWholeOfAHugeCapacity()
    {
        // 2^37 granules of 8 bytes: the offset index uses its largest regions (2^15 granules, 2^22 of them).
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(TIB, 8);
        final long[] offsets = {0, 8, 256 * KIB - 8, 256 * KIB, 4 * GIB, 4 * GIB + 8, TIB - 16, TIB - 8};
        for (final long offset : offsets)
        {
            assertThat(allocator.allocateAt(offset, 8)).as("allocateAt(%d)", offset).isTrue();
        }
        allocator.verifyIntegrity();
        for (final long offset : offsets)
        {
            assertThat(allocator.allocationSize(offset)).isEqualTo(8);
        }
        assertThat(allocator.allocationSize(16)).isEqualTo(-1);
        assertThat(allocator.allocationSize(TIB - 24)).isEqualTo(-1);
        for (final long offset : offsets)
        {
            allocator.free(offset);
        }
        assertThat(allocator.allocationCount()).isZero();
        assertThat(allocator.largestFreeBlock()).isEqualTo(TIB);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldGrowRecordsAndIndexUnderManySmallAllocations()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB, 8);
        final int count = 100_000;
        for (int i = 0; i < count; i++)
        {
            assertThat(allocator.allocate(8)).isEqualTo(8L * i);
        }
        assertThat(allocator.allocationCount()).isEqualTo(count);
        allocator.verifyIntegrity();
        for (int i = 0; i < count; i += 2)
        {
            allocator.free(8L * i);
        }
        assertThat(allocator.freeBlockCount()).isEqualTo(count / 2 + 1);
        for (int i = 1; i < count; i += 2)
        {
            allocator.free(8L * i);
        }
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
        assertThat(allocator.largestFreeBlock()).isEqualTo(MIB);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldMapSizesToClassesWithBoundedWidth()
    {
        for (long units = 1; units < 1L << 20; units += 1 + units / 97)
        {
            final int fl = TlsfExtentAllocator.firstLevel(units);
            final int sl = TlsfExtentAllocator.secondLevel(units, fl);
            final long lower = TlsfExtentAllocator.classLowerBound(fl, sl);
            final long nextLower = sl == 15
                ? TlsfExtentAllocator.classLowerBound(fl + 1, 0) : TlsfExtentAllocator.classLowerBound(fl, sl + 1);
            assertThat(units).as("units %d", units).isBetween(lower, nextLower - 1);
            // Blocks in one class differ by less than 1/16 of the class's smallest size.
            assertThat((double)(nextLower - 1 - lower) / lower).as("class spread at %d", units)
                .isLessThan(1.0 / 16);
        }
    }

    private record Snapshot(long allocatedBytes, int allocationCount, long largestFreeBlock, int freeBlockCount)
    {
        static Snapshot of(final TlsfExtentAllocator allocator)
        {
            return new Snapshot(allocator.allocatedBytes(), allocator.allocationCount(), allocator.largestFreeBlock(),
                allocator.freeBlockCount());
        }
    }
}
