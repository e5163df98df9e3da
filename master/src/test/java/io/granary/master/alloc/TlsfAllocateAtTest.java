package io.granary.master.alloc;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static io.granary.master.alloc.ExtentAllocator.NO_SPACE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Taking given extents (what a master rebuilding from ledgers does) and allocating around them. */
class TlsfAllocateAtTest
{
    private static final long MIB = 1 << 20;

    @Test
    void shouldTakeAnExtentInsideAFreeBlockKeepingItsFreePrefixAndSuffix()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);

        assertThat(allocator.allocateAt(4096, 1000)).isTrue();

        assertThat(allocator.allocationCount()).isEqualTo(1);
        assertThat(allocator.allocatedBytes()).isEqualTo(1024);
        assertThat(allocator.allocationSize(4096)).isEqualTo(1024);
        assertThat(allocator.freeBlockCount()).isEqualTo(2);
        allocator.verifyIntegrity();
        allocator.free(4096);
        assertThat(allocator.freeBlockCount()).isEqualTo(1);
        assertThat(allocator.largestFreeBlock()).isEqualTo(MIB);
        allocator.verifyIntegrity();
    }

    @Test
    void shouldRefuseOverlappingMisalignedAndOutOfRangeExtentsWithoutChangingAnything()
    {
        final TlsfExtentAllocator allocator = new TlsfExtentAllocator(MIB);
        assertThat(allocator.allocateAt(0, 128)).isTrue();
        assertThat(allocator.allocateAt(256, 128)).isTrue();

        assertThat(allocator.allocateAt(64, 128)).as("overlaps the first").isFalse();
        assertThat(allocator.allocateAt(128, 192)).as("runs into the second").isFalse();
        assertThat(allocator.allocateAt(100, 10)).as("misaligned").isFalse();
        assertThat(allocator.allocateAt(MIB - 64, 128)).as("past the end").isFalse();
        assertThat(allocator.allocateAt(MIB, 64)).as("at the end").isFalse();
        assertThat(allocator.allocateAt(-64, 64)).as("negative").isFalse();
        assertThatThrownBy(() -> allocator.allocateAt(512, 0)).isInstanceOf(IllegalArgumentException.class);

        assertThat(allocator.allocationCount()).isEqualTo(2);
        assertThat(allocator.allocatedBytes()).isEqualTo(256);
        assertThat(allocator.allocateAt(128, 128)).as("exactly the gap").isTrue();
        allocator.verifyIntegrity();
    }

    @Test
    void shouldNeverAllocateOverTakenExtentsInAnyOrder()
    {
        final Random random = new Random(42);
        for (int round = 0; round < 20; round++)
        {
            final TlsfExtentAllocator allocator = new TlsfExtentAllocator(4 * MIB);
            // Non-overlapping extents of 1..16 KiB at random gaps, taken in offset order or shuffled.
            final List<long[]> extents = new ArrayList<>();
            long at = 0;
            while (true)
            {
                at += 64L * random.nextInt(64);
                final long size = 1 + random.nextInt(16 << 10);
                if (at + size > 4 * MIB)
                {
                    break;
                }
                extents.add(new long[] {at, size});
                at += (size + 63) & -64;
            }
            if (round % 3 == 1)
            {
                Collections.shuffle(extents, random);
            }
            else if (round % 3 == 2)
            {
                Collections.reverse(extents); // descending offsets
            }
            final TreeMap<Long, Long> taken = new TreeMap<>();
            for (final long[] e : extents)
            {
                assertThat(allocator.allocateAt(e[0], e[1])).as("extent %d+%d", e[0], e[1]).isTrue();
                taken.put(e[0], (e[1] + 63) & -64);
            }
            allocator.verifyIntegrity();

            long offset;
            while ((offset = allocator.allocate(1 + random.nextInt(8 << 10))) != NO_SPACE)
            {
                final long end = offset + allocator.allocationSize(offset);
                final Long before = taken.floorKey(offset);
                assertThat(before == null || before + taken.get(before) <= offset).as("overlap at %d", offset).isTrue();
                final Long after = taken.ceilingKey(offset);
                assertThat(after == null || after >= end).as("overlap at %d", offset).isTrue();
                taken.put(offset, end - offset);
            }
            allocator.verifyIntegrity();
        }
    }

    /**
     * Extents asked for anywhere, among allocations and frees that leave live allocations in some of the allocator's
     * index regions (256 KiB each here) and none in others: one is taken exactly when no live allocation overlaps it.
     */
    @Test
    void shouldTakeAnExtentExactlyWhenItIsFreeAmongAllocationsAndFreesAcrossRegions()
    {
        final Random random = new Random(7);
        final long capacity = 8 * MIB;
        for (int round = 0; round < 10; round++)
        {
            final TlsfExtentAllocator allocator = new TlsfExtentAllocator(capacity);
            final TreeMap<Long, Long> taken = new TreeMap<>();
            for (int step = 0; step < 3_000; step++)
            {
                final int op = random.nextInt(10);
                if (op < 6)
                {
                    // Mostly in the first and last quarter, so the regions between stay empty for long stretches.
                    final long quarter = capacity / 4;
                    final long base = random.nextBoolean() ? 0 : 3 * quarter;
                    final long offset = random.nextInt(8) == 0 ? 64L * random.nextInt((int)(capacity / 64)) :
                        base + 64L * random.nextInt((int)(quarter / 64));
                    final long size = 1 + random.nextInt(64 << 10);
                    final long rounded = (size + 63) & -64;
                    final Map.Entry<Long, Long> before = taken.floorEntry(offset);
                    final Long after = taken.ceilingKey(offset);
                    final boolean free = offset + rounded <= capacity &&
                        (before == null || before.getKey() + before.getValue() <= offset) &&
                        (after == null || after >= offset + rounded);
                    assertThat(allocator.allocateAt(offset, size)).as("round %d step %d: %d+%d", round, step, offset,
                        size).isEqualTo(free);
                    if (free)
                    {
                        taken.put(offset, rounded);
                    }
                }
                else if (op < 9 && !taken.isEmpty())
                {
                    final Long victim = taken.ceilingKey(64L * random.nextInt((int)(capacity / 64)));
                    final long offset = victim != null ? victim : taken.firstKey();
                    allocator.free(offset);
                    taken.remove(offset);
                }
                else
                {
                    final long offset = allocator.allocate(1 + random.nextInt(16 << 10));
                    if (offset != NO_SPACE)
                    {
                        taken.put(offset, allocator.allocationSize(offset));
                    }
                }
                if (step % 500 == 0)
                {
                    allocator.verifyIntegrity();
                }
            }
            allocator.verifyIntegrity();
        }
    }
}
