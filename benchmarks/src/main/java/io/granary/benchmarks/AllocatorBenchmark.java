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
 * Steady-state throughput of one free plus one allocate on a 1 GiB {@link TlsfExtentAllocator} held at about
 * 80% fill: (a) every extent 64 KiB, (b) KV-like mixed sizes from 16 KiB to 4 MiB. Each slot of a fixed table
 * keeps one extent; an operation frees a random slot's extent and allocates a new one into it.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g"})
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
        FIXED_64K,
        MIXED_KV
    }

    @Param
    public Workload workload;

    private TlsfExtentAllocator allocator;
    private long[] slotOffset;
    // Pre-drawn victims and sizes so the measured operation does no random-number work.
    private int[] victimScript;
    private long[] sizeScript;
    private int cursor;
    private long failures;

    @Setup(Level.Trial)
    public void setUp()
    {
        final Random random = new Random(42);
        sizeScript = new long[SCRIPT_LENGTH];
        long sizeSum = 0;
        for (int i = 0; i < SCRIPT_LENGTH; i++)
        {
            sizeScript[i] = workload == Workload.FIXED_64K ? 64 * KIB : kvSize(random);
            sizeSum += sizeScript[i];
        }
        // Slots times the mean size gives the target fill; the sum then wanders only a few percent around it.
        final int slots = (int)(FILL * CAPACITY_BYTES / ((double)sizeSum / SCRIPT_LENGTH));
        victimScript = new int[SCRIPT_LENGTH];
        for (int i = 0; i < SCRIPT_LENGTH; i++)
        {
            victimScript[i] = random.nextInt(slots);
        }

        allocator = new TlsfExtentAllocator(CAPACITY_BYTES);
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
        final int slot = victimScript[i];
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
