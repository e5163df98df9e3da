package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.netty.util.internal.PlatformDependent;

import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * A mixed put/get/batch/remove load against an in-process cluster for a fixed time, sampling the
 * process's direct memory (Netty's counter and the JDK's direct buffer pool) every interval, to
 * show it does not grow. Values come from a bounded key space, so the pool churns through eviction.
 *
 * <pre>java -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.DirectMemorySoak [minutes] [threads]</pre>
 */
public final class DirectMemorySoak
{
    private static final Map<ErrorCode, LongAdder> ERRORS_BY_CODE = new ConcurrentHashMap<>();

    public static void main(final String[] args) throws Exception
    {
        LookupLatency.quietLogging();
        final double minutes = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        final int threads = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        final long endNs = System.nanoTime() + (long)(minutes * 60e9);
        final int[] sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
        try (LocalCluster cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(256L << 20).start();
             GranaryClient client = cluster.newClient())
        {
            final AtomicBoolean running = new AtomicBoolean(true);
            final AtomicLong ops = new AtomicLong();
            final AtomicLong errors = new AtomicLong();
            final AtomicLong bytes = new AtomicLong();
            final List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final int id = t;
                final Thread w = new Thread(() -> work(client, id, sizes, running, ops, errors, bytes), "soak-" + t);
                w.setDaemon(true);
                workers.add(w);
                w.start();
            }
            System.out.printf(Locale.ROOT, "soak: %.1f min, %d threads, 2 nodes x 256 MiB, sizes 4 KiB..4 MiB%n",
                minutes, threads);
            System.out.printf(Locale.ROOT, "%8s %12s %12s %14s %14s %10s%n",
                "SECONDS", "OPS", "ERRORS", "NETTY_DIRECT", "JDK_DIRECT", "GB_MOVED");
            final long startNs = System.nanoTime();
            final long sampleNs = TimeUnit.SECONDS.toNanos(minutes >= 2 ? 30 : 5);
            long nextNs = startNs;
            while (System.nanoTime() < endNs)
            {
                if (System.nanoTime() >= nextNs)
                {
                    sample(startNs, ops.get(), errors.get(), bytes.get());
                    nextNs += sampleNs;
                }
                TimeUnit.MILLISECONDS.sleep(100); // a reporting cadence, not synchronisation
            }
            running.set(false);
            for (final Thread w : workers)
            {
                w.join(30_000);
            }
            System.gc();
            sample(startNs, ops.get(), errors.get(), bytes.get());
            System.out.println("errors by code (misses of evicted/removed keys and re-puts of present ones are expected): " +
                new TreeMap<>(ERRORS_BY_CODE));
        }
    }

    private static void work(
        final GranaryClient client,
        final int id,
        final int[] sizes,
        final AtomicBoolean running,
        final AtomicLong ops,
        final AtomicLong errors,
        final AtomicLong bytes)
    {
        final SplittableRandom random = new SplittableRandom(id);
        final ByteBuffer direct = ByteBuffer.allocateDirect(4 << 20);
        while (running.get())
        {
            final String key = "soak/" + random.nextInt(2_000);
            final int size = sizes[random.nextInt(sizes.length)];
            final int op = random.nextInt(10);
            try
            {
                if (op < 3)
                {
                    final ByteBuffer value = direct.duplicate();
                    value.limit(size);
                    client.put(key, value, PutOptions.builder().replicas(1 + random.nextInt(2)).build());
                    bytes.addAndGet(size);
                }
                else if (op < 8)
                {
                    final ByteBuffer into = direct.duplicate();
                    bytes.addAndGet(client.getInto(key, into));
                }
                else if (op < 9)
                {
                    final List<String> keys = new ArrayList<>();
                    for (int i = 0; i < 16; i++)
                    {
                        keys.add("soak/" + random.nextInt(2_000));
                    }
                    for (final OpResult<byte[]> r : client.getBatch(keys))
                    {
                        bytes.addAndGet(r.ok() ? r.value().length : 0);
                    }
                }
                else
                {
                    client.remove(key, true);
                }
            }
            catch (final GranaryException ex)
            {
                errors.incrementAndGet(); // misses and removes of absent keys are expected: counted by code
                ERRORS_BY_CODE.computeIfAbsent(ex.code(), c -> new LongAdder()).increment();
            }
            ops.incrementAndGet();
        }
    }

    private static void sample(final long startNs, final long ops, final long errors, final long bytes)
    {
        long jdkDirect = 0;
        for (final BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class))
        {
            if ("direct".equals(pool.getName()))
            {
                jdkDirect = pool.getMemoryUsed();
            }
        }
        System.out.printf(Locale.ROOT, "%8.0f %12d %12d %14d %14d %10.1f%n",
            (System.nanoTime() - startNs) / 1e9, ops, errors, PlatformDependent.usedDirectMemory(), jdkDirect, bytes / 1e9);
    }
}
