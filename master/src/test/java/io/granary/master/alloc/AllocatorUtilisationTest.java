package io.granary.master.alloc;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.function.LongSupplier;

import static io.granary.master.alloc.ExtentAllocator.NO_SPACE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Deterministic quality check of fragmentation under churn: the utilisation (allocatedBytes / capacity) at the
 * moment the first allocation fails, on a fresh fill and after rounds of freeing about half the live extents
 * and refilling. Prints the figures; no timing involved.
 */
class AllocatorUtilisationTest
{
    private static final long KIB = 1024;
    private static final long MIB = 1024 * KIB;
    private static final long GIB = 1024 * MIB;
    private static final int CHURN_ROUNDS = 20;
    private static final long[] PAGE_SIZES = {16 * KIB, 64 * KIB, 256 * KIB, 512 * KIB, MIB, 2 * MIB, 4 * MIB};

    @Test
    void shouldFillEqualPagesCompletelyUnderChurn()
    {
        final Result result = churn(new TlsfExtentAllocator(GIB), new Random(1), () -> 256 * KIB);

        result.print("(a) 256 KiB pages, 1 GiB");
        assertThat(result.firstFill).isGreaterThanOrEqualTo(0.99);
        assertThat(result.minChurn).isGreaterThanOrEqualTo(0.99);
    }

    @Test
    void shouldKeepHighUtilisationWithMixedKvSizesUnderChurn()
    {
        final Random random = new Random(2);
        final Result result = churn(new TlsfExtentAllocator(GIB), random, () -> kvSize(random));

        result.print("(b) mixed 4 KiB..4 MiB, 1 GiB");
        assertThat(result.firstFill).isGreaterThanOrEqualTo(0.90);
        assertThat(result.minChurn).isGreaterThanOrEqualTo(0.90);
    }

    /**
     * Three quarters whole KV pages of a few popular sizes (models differ in layers, heads and block tokens), one
     * quarter partial pages (the last block of a sequence) of any 4 KiB multiple up to 4 MiB.
     */
    private static long kvSize(final Random random)
    {
        if (random.nextInt(4) != 0)
        {
            return PAGE_SIZES[random.nextInt(PAGE_SIZES.length)];
        }
        return (1 + random.nextInt((int)(4 * MIB / (4 * KIB)))) * 4 * KIB;
    }

    private static Result churn(final TlsfExtentAllocator allocator, final Random random, final LongSupplier sizes)
    {
        final List<Long> live = new ArrayList<>();
        final double firstFill = fillUntilFailure(allocator, live, sizes);
        double min = 1.0;
        double sum = 0;
        int maxFreeBlocks = 0;
        for (int round = 0; round < CHURN_ROUNDS; round++)
        {
            final List<Long> kept = new ArrayList<>(live.size());
            for (final long offset : live)
            {
                if (random.nextBoolean())
                {
                    allocator.free(offset);
                }
                else
                {
                    kept.add(offset);
                }
            }
            live.clear();
            live.addAll(kept);
            final double utilisation = fillUntilFailure(allocator, live, sizes);
            min = Math.min(min, utilisation);
            sum += utilisation;
            maxFreeBlocks = Math.max(maxFreeBlocks, allocator.freeBlockCount());
        }
        allocator.verifyIntegrity();

        live.forEach(allocator::free);
        assertThat(allocator.largestFreeBlock()).isEqualTo(allocator.capacity());
        return new Result(firstFill, min, sum / CHURN_ROUNDS, maxFreeBlocks);
    }

    /** Allocates until the first failure; returns the utilisation at that moment. */
    private static double fillUntilFailure(
        final TlsfExtentAllocator allocator, final List<Long> live, final LongSupplier sizes)
    {
        while (true)
        {
            final long size = sizes.getAsLong();
            final long offset = allocator.allocate(size);
            if (offset == NO_SPACE)
            {
                assertThat(allocator.largestFreeBlock()).isLessThan(size);
                return (double)allocator.allocatedBytes() / allocator.capacity();
            }
            live.add(offset);
        }
    }

    private record Result(double firstFill, double minChurn, double meanChurn, int maxFreeBlocksAtFailure)
    {
        void print(final String workload)
        {
            System.out.printf(Locale.ROOT,
                "utilisation at first failure, %s: first fill %.4f, churn rounds min %.4f mean %.4f " +
                "(%d rounds, at most %d free blocks at failure)%n",
                workload, firstFill, minChurn, meanChurn, CHURN_ROUNDS, maxFreeBlocksAtFailure);
        }
    }
}
