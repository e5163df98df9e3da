package io.granary.cli;

import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.Units;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

/**
 * {@code granary demo}: starts a master and one storage node in this JVM, stores a few hundred KV pages of
 * mixed sizes, reads every one back (one by one and in batches), checks every byte, exercises exists, the
 * prefix probe and remove, and prints a summary. Exits 0 when every byte matched and every check held, else 1.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = "Start an in-process master and storage node, put and get a few hundred KV pages (4 KiB..1 MiB), "
        + "verify every byte, and print a summary. Needs no running cluster.")
final class DemoCommand implements Callable<Integer>
{
    private static final int MIN_PAGE_BYTES = 4 << 10;
    private static final int SIZE_CLASSES = 9; // 4 KiB, 8 KiB, ... 1 MiB
    private static final int BATCH_SIZE = 25;

    @Spec
    private CommandSpec spec;

    @Option(names = "--pages", paramLabel = "N", defaultValue = "300", description = "KV pages to store (2..20000).")
    private int pages;

    @Option(names = "--segment-size", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Size of the storage node's segment. Default: 256m, or more when the pages need it.")
    private Long segmentSizeOption;

    @Option(names = "--log-level", paramLabel = "LEVEL", defaultValue = "warn",
        description = "Log level on stderr: " + Logging.LEVELS + ".")
    private String logLevel;

    private int failedChecks;

    @Override
    public Integer call()
    {
        Logging.setLevel(spec, logLevel);
        if (pages < 2 || pages > 20_000)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--pages': must be in 2..20000, was " + pages);
        }
        final PrintWriter out = spec.commandLine().getOut();
        final long startNs = System.nanoTime();
        final long segmentSizeBytes = segmentSizeOption != null ? segmentSizeOption : defaultSegmentSize(pages);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(segmentSizeBytes).start())
        {
            final GranaryClient client = cluster.newClient();
            out.printf(Locale.ROOT, "granary demo: in-process master %s + 1 storage node (%s, 1 segment of %s)%n",
                cluster.masterAddress(), cluster.nodes().get(0).endpoint(), Units.formatBytes(segmentSizeBytes));
            out.flush();
            run(client, cluster, out);
        }
        final double seconds = (System.nanoTime() - startNs) / 1e9;
        if (failedChecks == 0)
        {
            out.printf(Locale.ROOT, "demo OK in %.1f s: every byte verified, every check passed%n", seconds);
        }
        else
        {
            out.printf(Locale.ROOT, "demo FAILED in %.1f s: %d check(s) failed (see above)%n", seconds, failedChecks);
        }
        out.flush();
        return failedChecks == 0 ? 0 : Granary.EXIT_FAILED;
    }

    private void run(final GranaryClient client, final LocalCluster cluster, final PrintWriter out)
    {
        final List<String> keys = new ArrayList<>(pages);
        final List<byte[]> values = new ArrayList<>(pages);
        long totalBytes = 0;
        for (int i = 0; i < pages; i++)
        {
            keys.add(String.format(Locale.ROOT, "demo/page-%05d", i));
            values.add(page(i));
            totalBytes += values.get(i).length;
        }
        out.printf(Locale.ROOT, "pages: %d, %s in total, sizes %s..%s (deterministic content)%n", pages,
            Units.formatBytes(totalBytes), Units.formatBytes(MIN_PAGE_BYTES),
            Units.formatBytes((long)MIN_PAGE_BYTES << (SIZE_CLASSES - 1)));

        warmUp(client, out);

        // Two thirds one by one, the rest in batches.
        final int single = pages * 2 / 3;
        final LatencyRecorder putLatency = new LatencyRecorder();
        long bytes = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < single; i++)
        {
            final long s = System.nanoTime();
            client.put(keys.get(i), values.get(i));
            putLatency.record(System.nanoTime() - s);
            bytes += values.get(i).length;
        }
        report(out, "put", single + " pages one by one", bytes, System.nanoTime() - t0, putLatency);

        bytes = 0;
        int batches = 0;
        t0 = System.nanoTime();
        for (int from = single; from < pages; from += BATCH_SIZE)
        {
            final int to = Math.min(pages, from + BATCH_SIZE);
            final List<ByteBuffer> buffers = new ArrayList<>(to - from);
            for (int i = from; i < to; i++)
            {
                buffers.add(ByteBuffer.wrap(values.get(i)));
                bytes += values.get(i).length;
            }
            final List<OpResult<Void>> results =
                client.putBatch(keys.subList(from, to), buffers, PutOptions.defaults());
            for (int i = 0; i < results.size(); i++)
            {
                check(out, results.get(i).ok(), "putBatch " + keys.get(from + i) + ": " + results.get(i));
            }
            batches++;
        }
        report(out, "put", (pages - single) + " pages in " + batches + " batches", bytes, System.nanoTime() - t0, null);

        // Read everything back one by one, then everything again in batches; compare every byte.
        final LatencyRecorder getLatency = new LatencyRecorder();
        long verifiedBytes = 0;
        int mismatches = 0;
        t0 = System.nanoTime();
        for (int i = 0; i < pages; i++)
        {
            final long s = System.nanoTime();
            final byte[] got = client.get(keys.get(i));
            getLatency.record(System.nanoTime() - s);
            mismatches += matches(got, values.get(i)) ? 0 : 1;
            verifiedBytes += got.length;
        }
        report(out, "get", pages + " pages one by one", totalBytes, System.nanoTime() - t0, getLatency);

        batches = 0;
        t0 = System.nanoTime();
        for (int from = 0; from < pages; from += 2 * BATCH_SIZE)
        {
            final int to = Math.min(pages, from + 2 * BATCH_SIZE);
            final List<OpResult<byte[]>> results = client.getBatch(keys.subList(from, to));
            for (int i = 0; i < results.size(); i++)
            {
                final OpResult<byte[]> r = results.get(i);
                if (!r.ok() || !matches(r.value(), values.get(from + i)))
                {
                    mismatches++;
                    out.println("  mismatch: " + keys.get(from + i) + " " + r);
                }
                else
                {
                    verifiedBytes += r.value().length;
                }
            }
            batches++;
        }
        report(out, "get", pages + " pages in " + batches + " batches", totalBytes, System.nanoTime() - t0, null);
        check(out, mismatches == 0, mismatches + " of " + 2 * pages + " reads did not return the bytes put");
        if (mismatches == 0)
        {
            out.printf(Locale.ROOT, "verify: %d reads, all %,d bytes match what was put%n", 2 * pages, verifiedBytes);
        }

        existsAndProbe(client, keys, out);
        remove(client, keys.get(0), out);

        final ClusterStatus status = client.clusterStatus();
        final ClusterStatus.Segment segment = status.segments().get(0);
        out.printf(Locale.ROOT, "cluster: %d node, %d segment, %d objects, %s of %s used (%s), %d allocations, "
                + "largest free extent %s%n",
            status.nodes().size(), status.segments().size(), status.objects(),
            Units.formatBytes(status.allocatedBytes()), Units.formatBytes(status.capacityBytes()),
            StatCommand.percent(status.allocatedBytes(), status.capacityBytes()),
            segment.allocations(), Units.formatBytes(segment.largestFreeBytes()));
        check(out, status.objects() == pages - 1, "the master counts " + status.objects() + " objects, expected " +
            (pages - 1));
    }

    /** A fresh JVM runs the first calls interpreted; a few puts and gets first make the timings meaningful. */
    private static void warmUp(final GranaryClient client, final PrintWriter out)
    {
        final int pages = 64;
        final long t0 = System.nanoTime();
        for (int i = 0; i < pages; i++)
        {
            final String key = "demo/warmup-" + i;
            client.put(key, page(i % 5));
            client.get(key);
            client.remove(key, true);
        }
        out.printf(Locale.ROOT, "warmup: %d small pages put, read and removed in %.3f s (not counted below)%n", pages,
            (System.nanoTime() - t0) / 1e9);
    }

    private void existsAndProbe(final GranaryClient client, final List<String> keys, final PrintWriter out)
    {
        final boolean hit = client.exists(keys.get(1));
        final boolean miss = client.exists("demo/never-written");
        check(out, hit && !miss, "exists: expected true for a stored page and false for a missing one");

        // An engine looking for its longest cached prefix: candidates 0..9 are stored, 10 and 11 are not;
        // LAST_HIT_ONLY(1) must select candidate 9 and lease only it.
        final List<String> candidates = new ArrayList<>(keys.subList(0, Math.min(10, keys.size())));
        final int expected = candidates.size() - 1;
        candidates.add("demo/never-written-1");
        candidates.add("demo/never-written-2");
        final List<OpResult<Boolean>> mask = client.probeBatch(candidates, LeasePolicy.lastHitOnly(1));
        int selected = -1;
        int marked = 0;
        for (int i = 0; i < mask.size(); i++)
        {
            if (mask.get(i).ok() && mask.get(i).value())
            {
                selected = i;
                marked++;
            }
        }
        out.printf(Locale.ROOT, "exists: stored page %b, missing key %b; probe LAST_HIT_ONLY(1) over %d candidates "
            + "selected #%d (expected #%d)%n", hit, miss, candidates.size(), selected, expected);
        check(out, selected == expected && marked == 1, "probe selected #" + selected + " (" + marked +
            " marked), expected only #" + expected);
    }

    private void remove(final GranaryClient client, final String key, final PrintWriter out)
    {
        // The gets above leased this page: a plain remove must be refused, a forced one must work.
        ErrorCode refused = ErrorCode.OK;
        try
        {
            client.remove(key);
        }
        catch (final GranaryException ex)
        {
            refused = ex.code();
        }
        client.remove(key, true);
        final boolean gone = !client.exists(key);
        out.printf(Locale.ROOT, "remove: %s while leased -> %s; with force -> removed, exists now %b%n",
            key, refused, !gone);
        check(out, refused == ErrorCode.OBJECT_HAS_LEASE && gone,
            "remove: expected OBJECT_HAS_LEASE then a forced removal, got " + refused + " and exists=" + !gone);
    }

    private void check(final PrintWriter out, final boolean condition, final String failure)
    {
        if (!condition)
        {
            failedChecks++;
            out.println("CHECK FAILED: " + failure);
        }
    }

    private static void report(final PrintWriter out, final String op, final String what, final long bytes,
        final long elapsedNs, final LatencyRecorder latency)
    {
        final double seconds = elapsedNs / 1e9;
        out.printf(Locale.ROOT, "%-4s %-28s %10s in %6.3f s  %8.1f MiB/s%s%n", op, what, Units.formatBytes(bytes),
            seconds, bytes / seconds / (1 << 20), latency == null ? "" : "  " + latency.p50p99());
        out.flush();
    }

    private static boolean matches(final byte[] got, final byte[] expected)
    {
        return Arrays.equals(got, expected);
    }

    /** 256 MiB, or enough to keep the pages below the eviction watermark with room to spare. */
    static long defaultSegmentSize(final int pages)
    {
        long total = 0;
        for (int i = 0; i < pages; i++)
        {
            total += MIN_PAGE_BYTES << (i % SIZE_CLASSES);
        }
        final long needed = (long)(total * 1.5) + (16 << 20);
        return Math.max(256L << 20, (needed + (1 << 20) - 1) & -(1L << 20));
    }

    /** Page {@code i}: 4 KiB..1 MiB (cycling powers of two), random bytes seeded by {@code i}. */
    static byte[] page(final int i)
    {
        final byte[] bytes = new byte[MIN_PAGE_BYTES << (i % SIZE_CLASSES)];
        new SplittableRandom(i).nextBytes(bytes);
        return bytes;
    }
}
