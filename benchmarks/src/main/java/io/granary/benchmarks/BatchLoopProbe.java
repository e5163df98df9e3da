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

/**
 * A steady batched get loop for profiling: one in-process node (pre-touched, native transport) holds {@code batches}
 * batches of 128 x 4 KiB values, and the client reads them with {@code getBatchInto} round after round for
 * {@code seconds}, printing values/s every 2,000 batches. Unlike {@code granary bench}, whose get phase reads each
 * key once, every key is read again and again, as an engine reloads a hot prefix, so the master's per-read state
 * (leases, READ tokens) and the GC's view of it are in steady state; attach {@code perf record -a} or JFR to it.
 *
 * <pre>
 * java -Xms4g -Xmx4g -XX:+AlwaysPreTouch $OPENS -cp benchmarks/target/benchmarks.jar \
 *     io.granary.benchmarks.BatchLoopProbe [batches=1500] [seconds=30] [dataTokens=true]
 * </pre>
 * Every value read is checked to have its full length (a value's bytes are compared once, after the first round).
 */
public final class BatchLoopProbe
{
    private static final int BATCH = 128;
    private static final int SIZE = 4096;
    private static final int REPORT_EVERY = 2_000;

    private BatchLoopProbe()
    {
    }

    public static void main(final String[] args)
    {
        LookupLatency.quietLogging();
        final int batches = args.length > 0 ? Integer.parseInt(args[0]) : 1500;
        final int seconds = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        final boolean dataTokens = args.length <= 2 || Boolean.parseBoolean(args[2]);
        final long segmentBytes = (long)batches * BATCH * SIZE * 2 + (256L << 20);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(segmentBytes)
            .masterContext(LocalCluster.defaultMasterContext().dataTokens(dataTokens))
            .nodeContext(c -> c.preTouch(true).transport(TransportKind.NATIVE)).start())
        {
            final GranaryClient client =
                cluster.newClient(cluster.clientConfig().transport(TransportKind.NATIVE).build());
            final List<ByteBuffer> values = new ArrayList<>();
            final List<ByteBuffer> into = new ArrayList<>();
            for (int i = 0; i < BATCH; i++)
            {
                final ByteBuffer value = ByteBuffer.allocateDirect(SIZE);
                for (int j = 0; j < SIZE; j++)
                {
                    value.put(j, (byte)(i * 31 + j));
                }
                values.add(value);
                into.add(ByteBuffer.allocateDirect(SIZE));
            }
            final List<List<String>> keys = new ArrayList<>();
            for (int b = 0; b < batches; b++)
            {
                final List<String> batch = new ArrayList<>(BATCH);
                for (int i = 0; i < BATCH; i++)
                {
                    batch.add("loop/" + b + "/" + i);
                }
                keys.add(batch);
                for (final OpResult<Void> r : client.putBatch(batch, values, PutOptions.defaults()))
                {
                    require(r.ok(), r);
                }
            }
            System.out.printf(Locale.ROOT, "%d batches of %d x %d bytes stored (data tokens %s); reading for %d s%n",
                batches, BATCH, SIZE, dataTokens ? "on" : "off", seconds);
            final long endNs = System.nanoTime() + seconds * 1_000_000_000L;
            long windowStart = System.nanoTime();
            long done = 0;
            boolean compared = false;
            while (System.nanoTime() < endNs)
            {
                for (int b = 0; b < batches && System.nanoTime() < endNs; b++)
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
                    if (++done % REPORT_EVERY == 0)
                    {
                        final long now = System.nanoTime();
                        System.out.printf(Locale.ROOT, "get %.0f values/s%n",
                            (double)REPORT_EVERY * BATCH * 1e9 / (now - windowStart));
                        windowStart = now;
                    }
                }
            }
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
