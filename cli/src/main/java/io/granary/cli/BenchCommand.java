package io.granary.cli;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.PutOptions;
import io.granary.common.Units;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;

/**
 * {@code granary bench}: puts and gets {@code --count} values of {@code --size} bytes with {@code --concurrency}
 * callers sharing one client, against a running cluster or an in-process one ({@code --local}), and prints
 * ops/s, GB/s and latency percentiles per phase. Values are slices of one random pattern (deterministic,
 * distinct per key), sent from direct memory and read into per-caller direct buffers, so the benchmark itself
 * allocates nothing per operation.
 */
@Command(
    name = "bench",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Put and get COUNT values of SIZE bytes with C concurrent callers and print, per phase, ops/s, GB/s "
            + "(1e9 bytes/s) and GiB/s, latency p50/p99/p99.9/max, and errors.",
        "Runs against the master at --master, or an in-process cluster with --local. Keys are unique per run "
            + "and removed at the end unless --keep. Exits 1 if any operation failed or any verified value differed."})
final class BenchCommand implements Callable<Integer>
{
    private static final int PATTERN_SPAN = 1 << 16;
    private static final int OFFSET_STRIDE = 4099; // odd: 65536 distinct offsets before repeating

    /** What the measured phases do. */
    enum Op
    {
        put, get, both
    }

    @Spec
    private CommandSpec spec;

    @Mixin
    private ClientOptions clientOptions;

    @Option(names = "--local", description = "Start an in-process master and --nodes storage nodes instead of using "
        + "--master.")
    private boolean local;

    @Option(names = "--nodes", paramLabel = "N", defaultValue = "1", description = "Storage nodes of --local.")
    private int nodes;

    @Option(names = "--segment-size", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Segment size of --local nodes. Default: sized to hold the run at under 80%% use.")
    private Long segmentSizeOption;

    @Option(names = "--pre-touch", description = "Commit the --local segments' memory before the run, as "
        + "'granary node --pre-touch' does (otherwise the put phase pays the first touch of every page).")
    private boolean preTouch;

    @Option(names = "--count", paramLabel = "N", defaultValue = "1000", description = "Values per phase.")
    private int count;

    @Option(names = "--size", paramLabel = "SIZE", defaultValue = "1m", converter = Converters.SizeConverter.class,
        description = "Bytes per value.")
    private long sizeBytes;

    @Option(names = "--concurrency", paramLabel = "C", defaultValue = "1", description = "Concurrent callers.")
    private int concurrency;

    @Option(names = "--op", paramLabel = "OP", defaultValue = "both",
        description = "put, get (values are put first, unmeasured) or both (a put phase, then a get phase).")
    private Op op;

    @Option(names = "--replicas", paramLabel = "R", defaultValue = "1", description = "Replicas per value.")
    private int replicas;

    @Option(names = "--warmup", paramLabel = "N",
        description = "Unmeasured puts and gets of separate keys before the phases. Default: min(200, COUNT).")
    private Integer warmupOption;

    @Option(names = "--verify", description = "Compare every value read (default: every 10th).")
    private boolean verifyAll;

    @Option(names = "--keep", description = "Leave the keys in the cluster.")
    private boolean keep;

    private ByteBuffer pattern;

    @Override
    public Integer call()
    {
        Logging.setLevel(spec, clientOptions.logLevel);
        validate();
        final PrintWriter out = spec.commandLine().getOut();
        final int warmup = warmupOption != null ? warmupOption : Math.min(200, count);
        pattern = pattern(sizeBytes);

        if (local)
        {
            final int segmentsPerNode = Math.max(1, (replicas + nodes - 1) / nodes);
            final long segmentSize = segmentSizeOption != null ? segmentSizeOption :
                localSegmentSize((long)(count + warmup) * sizeBytes * replicas, nodes * segmentsPerNode);
            out.printf(Locale.ROOT, "cluster: in-process, %d node(s) x %d segment(s) of %s%s%n", nodes,
                segmentsPerNode, Units.formatBytes(segmentSize), preTouch ? ", pre-touched" : "");
            out.flush();
            try (LocalCluster cluster = LocalCluster.builder()
                .nodes(nodes)
                .segmentsPerNode(segmentsPerNode)
                .segmentSizeBytes(segmentSize)
                .nodeContext(ctx -> ctx.preTouch(preTouch))
                .start())
            {
                final GranaryClient client = cluster.newClient(clientOptions.config(spec.commandLine(),
                    cluster.masterAddress()));
                return run(client, warmup, false, out);
            }
        }
        out.println("cluster: master " + clientOptions.master);
        out.flush();
        try (GranaryClient client = clientOptions.connect(spec.commandLine(), clientOptions.master))
        {
            return run(client, warmup, !keep, out);
        }
        catch (final GranaryException ex)
        {
            throw ClientOptions.withHint(ex, clientOptions.master);
        }
    }

    private void validate()
    {
        final CommandLine cmd = spec.commandLine();
        if (local && cmd.getParseResult().hasMatchedOption("--master"))
        {
            throw new CommandLine.ParameterException(cmd, "give either --master or --local, not both");
        }
        require(count >= 1, "--count must be positive, was " + count);
        require(sizeBytes >= 1 && sizeBytes <= Integer.MAX_VALUE - PATTERN_SPAN,
            "--size must be in 1.." + (Integer.MAX_VALUE - PATTERN_SPAN) + ", was " + sizeBytes);
        require(concurrency >= 1 && concurrency <= 1024, "--concurrency must be in 1..1024, was " + concurrency);
        require(nodes >= 1 && nodes <= 64, "--nodes must be in 1..64, was " + nodes);
        require(warmupOption == null || warmupOption >= 0, "--warmup must not be negative, was " + warmupOption);
        require(replicas >= 1, "--replicas must be positive, was " + replicas);
    }

    private void require(final boolean condition, final String message)
    {
        if (!condition)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), message);
        }
    }

    private int run(final GranaryClient client, final int warmup, final boolean cleanUp, final PrintWriter out)
    {
        final String prefix = "bench/" + Long.toString(System.currentTimeMillis(), 36) + "-" +
            Integer.toString(new SplittableRandom().nextInt(1 << 20), 36) + "/";
        final PutOptions options = PutOptions.builder().replicas(replicas).build();
        out.printf(Locale.ROOT, "bench: %d x %s values, concurrency %d, replicas %d, op %s, warmup %d, keys %s*%n",
            count, Units.formatBytes(sizeBytes), concurrency, replicas, op, warmup, prefix);

        if (warmup > 0)
        {
            final Phase warm = new Phase("warmup", warmup, i -> put(client, prefix + "w" + i, i, options));
            warm.run(concurrency);
            final Phase warmGets = new Phase("warmup", warmup, i -> get(client, prefix + "w" + i, i, true));
            warmGets.run(concurrency);
            if (warm.errors.get() + warmGets.errors.get() > 0)
            {
                out.println("warmup: " + (warm.errors.get() + warmGets.errors.get()) + " errors, first: " +
                    (warm.firstError.get() != null ? warm.firstError.get() : warmGets.firstError.get()));
            }
        }

        final List<Phase> phases = new ArrayList<>();
        final Phase puts = new Phase("put", count, i -> put(client, prefix + i, i, options));
        if (op == Op.get)
        {
            puts.run(concurrency); // unmeasured: the values the get phase reads
        }
        else
        {
            phases.add(puts.run(concurrency));
        }
        if (op != Op.put)
        {
            phases.add(new Phase("get", count, i -> get(client, prefix + i, i, verifyAll || i % 10 == 0))
                .run(concurrency));
        }

        final Table table = new Table("PHASE", ">OPS", ">ERRORS", ">SECONDS", ">OPS/S", ">GB/S", ">GIB/S",
            ">P50(MS)", ">P99(MS)", ">P99.9(MS)", ">MAX(MS)");
        boolean failed = puts.errors.get() > 0;
        for (final Phase p : phases)
        {
            final double seconds = p.elapsedNs / 1e9;
            final long ok = p.latency.count();
            final double bytesPerSecond = ok * sizeBytes / seconds;
            table.row(p.name, ok, p.errors.get(), fixed(seconds, 3), fixed(ok / seconds, 1),
                fixed(bytesPerSecond / 1e9, 3), fixed(bytesPerSecond / (1L << 30), 3),
                fixed(p.latency.percentileMs(50), 3), fixed(p.latency.percentileMs(99), 3),
                fixed(p.latency.percentileMs(99.9), 3), fixed(p.latency.maxMs(), 3));
            failed |= p.errors.get() > 0;
        }
        table.print(out, "");
        for (final Phase p : phases)
        {
            if (p.firstError.get() != null)
            {
                out.println(p.name + ": " + p.errors.get() + " errors, first: " + p.firstError.get());
            }
        }
        if (op != Op.put)
        {
            final Phase gets = phases.get(phases.size() - 1);
            out.printf(Locale.ROOT, "verify: %d of %d values read compared byte for byte, %d differed%s%n",
                gets.verified.get(), count, gets.mismatches.get(), verifyAll ? "" : " (--verify compares all)");
            failed |= gets.mismatches.get() > 0;
        }
        if (cleanUp)
        {
            out.println("cleanup: removed " + removeRun(client, prefix) + " keys");
        }
        out.flush();
        return failed ? Granary.EXIT_FAILED : 0;
    }

    private Object put(final GranaryClient client, final String key, final int index, final PutOptions options)
    {
        client.put(key, value(index), options);
        return null;
    }

    /** @return whether the value matched when compared, null when not compared. */
    private Boolean get(final GranaryClient client, final String key, final int index, final boolean compare)
    {
        final ByteBuffer buffer = Phase.buffer(sizeBytes);
        buffer.clear();
        final int length = client.getInto(key, buffer);
        if (!compare)
        {
            return null;
        }
        buffer.flip();
        return length == sizeBytes && buffer.mismatch(value(index)) < 0;
    }

    /** The value of key {@code index}: a slice of the shared pattern at a per-index offset (read-only view). */
    private ByteBuffer value(final int index)
    {
        final int offset = (int)(((long)index * OFFSET_STRIDE) % PATTERN_SPAN);
        return pattern.duplicate().position(offset).limit(offset + (int)sizeBytes).slice();
    }

    /** Removes this run's keys: unleased ones by regex, then (the get phase leased them) the rest by force. */
    private static long removeRun(final GranaryClient client, final String prefix)
    {
        final String regex = Pattern.quote(prefix) + ".*";
        long removed = client.removeByRegex(regex);
        while (true)
        {
            final List<KeyInfo> left = client.listKeys(regex, 0);
            if (left.isEmpty())
            {
                return removed;
            }
            long removedNow = 0;
            for (final KeyInfo info : left)
            {
                try
                {
                    client.remove(info.key(), true);
                    removedNow++;
                }
                catch (final GranaryException ex)
                {
                    if (ex.code() != ErrorCode.OBJECT_NOT_FOUND)
                    {
                        throw ex;
                    }
                }
            }
            if (removedNow == 0)
            {
                return removed;
            }
            removed += removedNow;
        }
    }

    private static ByteBuffer pattern(final long sizeBytes)
    {
        final int length = (int)sizeBytes + PATTERN_SPAN;
        final byte[] random = new byte[length];
        new SplittableRandom(42).nextBytes(random);
        final ByteBuffer direct = ByteBuffer.allocateDirect(length);
        direct.put(random).flip();
        return direct.asReadOnlyBuffer();
    }

    /** Enough for {@code bytes} at under 80% use (below the eviction watermark), at least 64 MiB, in MiB. */
    static long localSegmentSize(final long bytes, final int segments)
    {
        final long perSegment = (long)(bytes / 0.8 / segments) + (16L << 20);
        return Math.max(64L << 20, (perSegment + (1 << 20) - 1) & -(1L << 20));
    }

    private static String fixed(final double value, final int decimals)
    {
        return String.format(Locale.ROOT, "%." + decimals + "f", value);
    }

    /** One operation of a phase, by value index. */
    @FunctionalInterface
    interface Operation
    {
        /** @return a Boolean when the operation compared a value (false: it differed), else null. */
        Object apply(int index);
    }

    /** One measured (or warmup) phase: {@code count} operations shared by C caller threads. */
    static final class Phase
    {
        private static final ThreadLocal<ByteBuffer> BUFFERS = new ThreadLocal<>();

        final String name;
        final int count;
        final Operation operation;
        final LatencyRecorder latency = new LatencyRecorder();
        final AtomicInteger errors = new AtomicInteger();
        final AtomicInteger verified = new AtomicInteger();
        final AtomicInteger mismatches = new AtomicInteger();
        final AtomicReference<String> firstError = new AtomicReference<>();
        long elapsedNs;

        Phase(final String name, final int count, final Operation operation)
        {
            this.name = name;
            this.count = count;
            this.operation = operation;
        }

        /** A direct buffer of at least {@code size} bytes owned by the calling thread. */
        static ByteBuffer buffer(final long size)
        {
            ByteBuffer buffer = BUFFERS.get();
            if (buffer == null || buffer.capacity() < size)
            {
                buffer = ByteBuffer.allocateDirect((int)size);
                BUFFERS.set(buffer);
            }
            return buffer;
        }

        Phase run(final int concurrency)
        {
            final AtomicInteger next = new AtomicInteger();
            final CountDownLatch start = new CountDownLatch(1);
            final LatencyRecorder[] recorders = new LatencyRecorder[concurrency];
            final Thread[] threads = new Thread[concurrency];
            for (int t = 0; t < concurrency; t++)
            {
                final LatencyRecorder recorder = new LatencyRecorder();
                recorders[t] = recorder;
                threads[t] = new Thread(() ->
                {
                    awaitUninterruptibly(start);
                    for (int i = next.getAndIncrement(); i < count; i = next.getAndIncrement())
                    {
                        final long t0 = System.nanoTime();
                        final Object result;
                        try
                        {
                            result = operation.apply(i);
                        }
                        catch (final GranaryException ex)
                        {
                            errors.incrementAndGet();
                            firstError.compareAndSet(null, Granary.errorLine(ex).substring("error: ".length()));
                            continue;
                        }
                        recorder.record(System.nanoTime() - t0);
                        if (result instanceof Boolean)
                        {
                            verified.incrementAndGet();
                            mismatches.addAndGet((Boolean)result ? 0 : 1);
                        }
                    }
                    BUFFERS.remove();
                }, "granary-bench-" + name + "-" + t);
                threads[t].setDaemon(true);
                threads[t].start();
            }
            final long t0 = System.nanoTime();
            start.countDown();
            for (final Thread thread : threads)
            {
                joinUninterruptibly(thread);
            }
            elapsedNs = System.nanoTime() - t0;
            for (final LatencyRecorder recorder : recorders)
            {
                latency.add(recorder);
            }
            return this;
        }

        private static void awaitUninterruptibly(final CountDownLatch latch)
        {
            boolean interrupted = false;
            while (true)
            {
                try
                {
                    latch.await();
                    break;
                }
                catch (final InterruptedException ex)
                {
                    interrupted = true;
                }
            }
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
        }

        private static void joinUninterruptibly(final Thread thread)
        {
            boolean interrupted = false;
            while (true)
            {
                try
                {
                    thread.join();
                    break;
                }
                catch (final InterruptedException ex)
                {
                    interrupted = true;
                }
            }
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
        }
    }
}
