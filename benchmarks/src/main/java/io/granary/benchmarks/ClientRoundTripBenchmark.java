package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.client.GranaryClient;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * One caller's round trips through the public client against an in-process cluster (master and one node in the
 * benchmark's JVM, so the same two cores run everything): put and get of 4 KiB and 1 MiB, and getBatch and putBatch
 * of 128 x 4 KiB. Puts go to fresh keys (objects are immutable, a repeated key would skip the transfer); the keys are
 * removed after every iteration. Gets read a pre-filled set round robin into a direct buffer. Time per call and calls
 * per millisecond; values/s of a batch call is 128 x its calls/s.
 */
@State(Scope.Benchmark)
@BenchmarkMode({Mode.AverageTime, Mode.Throughput})
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlogback.configurationFile=logback-bench.xml"})
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
public class ClientRoundTripBenchmark
{
    private static final int SMALL = 4096;
    private static final int LARGE = 1 << 20;
    private static final int BATCH = 128;
    private static final int STORED = 256;

    private LocalCluster cluster;
    private GranaryClient client;
    private ByteBuffer small;
    private ByteBuffer large;
    private ByteBuffer target;
    private List<String> batchKeys;
    private List<ByteBuffer> batchValues;
    private long putCounter;
    private int getCounter;

    @Setup(Level.Trial)
    public void setUp()
    {
        // 1 MiB puts at up to ~1 GB/s for 2 s iterations: 4 GiB keeps them below the eviction watermark.
        cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(4L << 30).start();
        client = cluster.newClient();
        final byte[] random = new byte[LARGE];
        new SplittableRandom(42).nextBytes(random);
        large = ByteBuffer.allocateDirect(LARGE).put(random).flip();
        small = ByteBuffer.allocateDirect(SMALL).put(random, 0, SMALL).flip();
        target = ByteBuffer.allocateDirect(LARGE);
        for (int i = 0; i < STORED; i++)
        {
            client.put("get/small/" + i, small, PutOptions.defaults());
            client.put("get/large/" + i, large, PutOptions.defaults());
        }
        batchKeys = new ArrayList<>(BATCH);
        batchValues = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++)
        {
            batchKeys.add("get/small/" + i);
            batchValues.add(small);
        }
    }

    @TearDown(Level.Iteration)
    public void removePutKeys()
    {
        // Only the put keys: they carry no lease (PutEnd grants none), so a regex removes them all.
        client.removeByRegex("put/.*");
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        cluster.close();
    }

    @Benchmark
    public void put4k()
    {
        client.put("put/small/" + putCounter++, small, PutOptions.defaults());
    }

    @Benchmark
    public void put1m()
    {
        client.put("put/large/" + putCounter++, large, PutOptions.defaults());
    }

    @Benchmark
    public int get4k()
    {
        target.clear();
        return client.getInto("get/small/" + (getCounter++ & (STORED - 1)), target);
    }

    @Benchmark
    public int get1m()
    {
        target.clear();
        return client.getInto("get/large/" + (getCounter++ & (STORED - 1)), target);
    }

    @Benchmark
    public int getBatch128x4k()
    {
        return checked(client.getBatch(batchKeys));
    }

    @Benchmark
    public int putBatch128x4k()
    {
        final List<String> keys = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++)
        {
            keys.add("put/batch/" + putCounter++);
        }
        return checked(client.putBatch(keys, batchValues, PutOptions.defaults()));
    }

    private static int checked(final List<? extends OpResult<?>> results)
    {
        for (final OpResult<?> result : results)
        {
            if (!result.ok())
            {
                throw new IllegalStateException("batch call failed: " + result.error() + " " + result.message());
            }
        }
        return results.size();
    }
}
