package io.granary.benchmarks;

import io.granary.master.alloc.ExtentAllocator;
import io.granary.master.alloc.TlsfExtentAllocator;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.Locale;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * Steady-state throughput of one free plus one allocate on a {@link TlsfExtentAllocator} held at about 80% fill:
 * (a) 1 GiB, every extent 64 KiB, (b) 1 GiB, KV-like mixed sizes from 16 KiB to 4 MiB, both freeing a random slot's
 * extent and allocating a new one into it; (c) 16 GiB of 4 KiB extents freed oldest first, as eviction frees them.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class AllocatorBenchmark
{
    private static final long KIB = 1024;
    private static final long MIB = 1024 * KIB;
    private static final long CAPACITY_BYTES = 1024 * MIB;
    private static final double FILL = 0.80;
    private static final int SCRIPT_LENGTH = 1 << 16;
    private static final long[] PAGE_SIZES = {16 * KIB, 64 * KIB, 256 * KIB, 512 * KIB, MIB, 2 * MIB, 4 * MIB};

    public enum Workload
    {
        /** 1 GiB, every extent 64 KiB, random victims. */
        FIXED_64K,
        /** 1 GiB, KV-like mixed sizes, random victims. */
        MIXED_KV,
        /**
         * 16 GiB of 4 KiB extents (3.4 million live), the oldest freed first, as the master's eviction does: the
         * allocator's structures far outgrow the caches.
         */
        FIFO_4K_16G
    }

    @Param
    public Workload workload;

    private TlsfExtentAllocator allocator;
    private long[] slotOffset;
    // Pre-drawn victims and sizes so the measured operation does no random-number work.
    private int[] victimScript;
    private long[] sizeScript;
    private int cursor;
    private int fifoCursor;
    private long failures;

    @Setup(Level.Trial)
    public void setUp()
    {
        final Random random = new Random(42);
        sizeScript = new long[SCRIPT_LENGTH];
        long sizeSum = 0;
        for (int i = 0; i < SCRIPT_LENGTH; i++)
        {
            sizeScript[i] = workload == Workload.FIXED_64K ? 64 * KIB :
                workload == Workload.FIFO_4K_16G ? 4 * KIB : kvSize(random);
            sizeSum += sizeScript[i];
        }
        // Slots times the mean size gives the target fill; the sum then wanders only a few percent around it.
        final long capacity = workload == Workload.FIFO_4K_16G ? 16 * 1024 * MIB : CAPACITY_BYTES;
        final int slots = (int)(FILL * capacity / ((double)sizeSum / SCRIPT_LENGTH));
        victimScript = new int[SCRIPT_LENGTH];
        for (int i = 0; i < SCRIPT_LENGTH; i++)
        {
            victimScript[i] = workload == Workload.FIFO_4K_16G ? -1 : random.nextInt(slots);
        }

        allocator = new TlsfExtentAllocator(capacity);
        slotOffset = new long[slots];
        for (int i = 0; i < slots; i++)
        {
            slotOffset[i] = allocator.allocate(sizeScript[i & (SCRIPT_LENGTH - 1)]);
        }
        // Churn once through the script so measurement starts from a fragmented steady state.
        for (int i = 0; i < SCRIPT_LENGTH; i++)
        {
            freeAndAllocate();
        }
        failures = 0;
    }

    @Benchmark
    public long freeAndAllocate()
    {
        final int i = cursor;
        cursor = (i + 1) & (SCRIPT_LENGTH - 1);
        final int scripted = victimScript[i];
        final int slot = scripted >= 0 ? scripted : oldest();
        final long old = slotOffset[slot];
        if (old != ExtentAllocator.NO_SPACE)
        {
            allocator.free(old);
        }
        final long offset = allocator.allocate(sizeScript[(i * 7919) & (SCRIPT_LENGTH - 1)]);
        if (offset == ExtentAllocator.NO_SPACE)
        {
            failures++;
        }
        slotOffset[slot] = offset;
        return offset;
    }

    /** The slot allocated longest ago (slots are refilled in order, so they age in order). */
    private int oldest()
    {
        final int slot = fifoCursor;
        fifoCursor = slot + 1 == slotOffset.length ? 0 : slot + 1;
        return slot;
    }

    @TearDown(Level.Iteration)
    public void reportState()
    {
        // Shows that the run stayed near the intended fill and how often the allocator said NO_SPACE.
        System.out.printf(Locale.ROOT, "%n[%s] fill %.3f, %d free blocks, %d allocation failures so far%n", workload,
            (double)allocator.allocatedBytes() / allocator.capacity(), allocator.freeBlockCount(), failures);
    }

    private static long kvSize(final Random random)
    {
        if (random.nextInt(4) != 0)
        {
            return PAGE_SIZES[random.nextInt(PAGE_SIZES.length)];
        }
        return (1 + random.nextInt((int)(4 * MIB / (4 * KIB)))) * 4 * KIB;
    }
}
