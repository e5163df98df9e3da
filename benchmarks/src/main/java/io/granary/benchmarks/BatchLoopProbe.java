package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.client.GranaryClient;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.transfer.TransportKind;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A steady batched loop for profiling: one in-process node (pre-touched, native transport) and {@code callers}
 * threads of one client moving batches of 128 x 4 KiB values for {@code seconds}, printing values/s every 2,000
 * batches. Unlike {@code granary bench}, whose phases touch each key once and end, the loop runs in a steady state
 * that a profiler can be attached to (JIT done, heap and master state settled):
 * <ul>
 * <li>{@code get}: {@code batches} batches are stored first, then read with {@code getBatchInto} round after round
 *     (every key again and again, as an engine reloads a hot prefix), the batches split among the callers;</li>
 * <li>{@code put}: every caller puts batches of fresh keys with {@code putBatch} for as long as the loop runs; the
 *     segment holds {@code batches} batches, so once it is full the master evicts the oldest values on demand, as
 *     a KV cache in steady state does.</li>
 * </ul>
 *
 * <pre>
 * java -Xms4g -Xmx4g -XX:+AlwaysPreTouch $OPENS -cp benchmarks/target/benchmarks.jar \
 *     io.granary.benchmarks.BatchLoopProbe [batches=1500] [seconds=30] [dataTokens=true] [callers=1] [get|put]
 * </pre>
 * Every value read is checked to have its full length (a value's bytes are compared once, after the first round);
 * every put must succeed.
 */
public final class BatchLoopProbe
{
    private static final int BATCH = 128;
    private static final int SIZE = 4096;
    private static final int REPORT_EVERY = 2_000;

    private BatchLoopProbe()
    {
    }

    public static void main(final String[] args) throws InterruptedException
    {
        LookupLatency.quietLogging();
        final int batches = args.length > 0 ? Integer.parseInt(args[0]) : 1500;
        final int seconds = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        final boolean dataTokens = args.length <= 2 || Boolean.parseBoolean(args[2]);
        final int callers = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        final boolean puts = args.length > 4 && args[4].equals("put");
        require(callers >= 1 && callers <= batches, "callers must be 1.." + batches);
        final long segmentBytes = (long)batches * BATCH * SIZE * (puts ? 1 : 2) + (256L << 20);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(segmentBytes)
            .masterContext(LocalCluster.defaultMasterContext().dataTokens(dataTokens))
            .nodeContext(c -> c.preTouch(true).transport(TransportKind.NATIVE)).start())
        {
            final GranaryClient client =
                cluster.newClient(cluster.clientConfig().transport(TransportKind.NATIVE).build());
            final List<ByteBuffer> values = new ArrayList<>();
            for (int i = 0; i < BATCH; i++)
            {
                final ByteBuffer value = ByteBuffer.allocateDirect(SIZE);
                for (int j = 0; j < SIZE; j++)
                {
                    value.put(j, (byte)(i * 31 + j));
                }
                values.add(value);
            }
            final List<List<String>> keys = new ArrayList<>();
            if (!puts)
            {
                for (int b = 0; b < batches; b++)
                {
                    keys.add(keys("loop/" + b + "/"));
                    for (final OpResult<Void> r : client.putBatch(keys.get(b), values, PutOptions.defaults()))
                    {
                        require(r.ok(), r);
                    }
                }
            }
            System.out.printf(Locale.ROOT, "%s: %d batches of %d x %d bytes (data tokens %s), %d caller(s), %d s%n",
                puts ? "put" : "get", batches, BATCH, SIZE, dataTokens ? "on" : "off", callers, seconds);
            final long endNs = System.nanoTime() + seconds * 1_000_000_000L;
            final AtomicLong done = new AtomicLong();
            final AtomicLong windowStart = new AtomicLong(System.nanoTime());
            final AtomicReference<Throwable> failure = new AtomicReference<>();
            final List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < callers; t++)
            {
                final int caller = t;
                final Thread thread = new Thread(() ->
                {
                    try
                    {
                        if (puts)
                        {
                            putLoop(client, values, caller, endNs, done, windowStart);
                        }
                        else
                        {
                            getLoop(client, values, keys, caller, callers, endNs, done, windowStart);
                        }
                    }
                    catch (final Throwable ex)
                    {
                        failure.compareAndSet(null, ex);
                    }
                }, "probe-" + t);
                threads.add(thread);
                thread.start();
            }
            for (final Thread thread : threads)
            {
                thread.join();
            }
            if (failure.get() != null)
            {
                throw new IllegalStateException("a caller failed", failure.get());
            }
        }
    }

    private static List<String> keys(final String prefix)
    {
        final List<String> batch = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++)
        {
            batch.add(prefix + i);
        }
        return batch;
    }

    private static void getLoop(
        final GranaryClient client,
        final List<ByteBuffer> values,
        final List<List<String>> keys,
        final int caller,
        final int callers,
        final long endNs,
        final AtomicLong done,
        final AtomicLong windowStart)
    {
        final List<ByteBuffer> into = new ArrayList<>();
        for (int i = 0; i < BATCH; i++)
        {
            into.add(ByteBuffer.allocateDirect(SIZE));
        }
        boolean compared = false;
        while (System.nanoTime() < endNs)
        {
            for (int b = caller; b < keys.size() && System.nanoTime() < endNs; b += callers)
            {
                into.forEach(ByteBuffer::clear);
                for (final OpResult<Integer> r : client.getBatchInto(keys.get(b), into))
                {
                    require(r.ok() && r.value() == SIZE, r);
                }
                if (!compared)
                {
                    for (int i = 0; i < BATCH; i++)
                    {
                        require(into.get(i).clear().equals(values.get(i).clear()), "value " + i + " differs");
                    }
                    compared = true;
                }
                report("get", done, windowStart);
            }
        }
    }

    private static void putLoop(
        final GranaryClient client,
        final List<ByteBuffer> values,
        final int caller,
        final long endNs,
        final AtomicLong done,
        final AtomicLong windowStart)
    {
        for (long b = 0; System.nanoTime() < endNs; b++)
        {
            for (final OpResult<Void> r : client.putBatch(keys("loop/" + caller + "/" + b + "/"), values,
                PutOptions.defaults()))
            {
                require(r.ok(), r);
            }
            report("put", done, windowStart);
        }
    }

    private static void report(final String op, final AtomicLong done, final AtomicLong windowStart)
    {
        if (done.incrementAndGet() % REPORT_EVERY == 0)
        {
            final long now = System.nanoTime();
            System.out.printf(Locale.ROOT, "%s %.0f values/s%n",
                op, (double)REPORT_EVERY * BATCH * 1e9 / (now - windowStart.getAndSet(now)));
        }
    }

    private static void require(final boolean ok, final Object what)
    {
        if (!ok)
        {
            throw new IllegalStateException("unexpected result: " + what);
        }
    }
}
