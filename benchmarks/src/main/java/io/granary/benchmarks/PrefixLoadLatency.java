package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.client.GranaryClient;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;
import io.granary.transfer.TransportKind;
import org.HdrHistogram.Histogram;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * What an engine waits for before a prefill can start: probe a prompt's blocks, then load the hit run's pages. Two
 * ways, alternating request by request in one run on one in-process cluster (a master with its lookup port, one
 * storage node over loopback):
 * <ul>
 *   <li>{@code probe+get}: {@code probeBatch(longestPrefix)} then {@code getBatchInto} of the pages — two master
 *       round trips (the get looks the keys up again) before the data moves;</li>
 *   <li>{@code probeForRead+read}: {@code probeBatchForRead(longestPrefix)} then {@code readBatchInto} of its
 *       leases — the probe's answer carries the replica lists, one master round trip.</li>
 * </ul>
 * With {@code --ranks R} a block is whole with R tensor-parallel ranks' pages: the probes cover them all (one
 * candidate per block, as {@code PrefixCache} probes) and rank 0 reads its own; {@code --lists all} has the probe
 * bring back every rank's lists instead of rank 0's (what a probe without a member range costs). Prints p50 / p90 /
 * p99 / mean of the whole probe-and-load in µs for each and their ratio, and the master calls
 * each made (BatchProbeKey, BatchGetReplicaList).
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.PrefixLoadLatency \
 *     [--requests 20000] [--warmup 4000] [--blocks 14] [--pages 2] [--page-bytes 4096] [--prompts 64] \
 *     [--ranks 1] [--lists own|all] [--transport auto|java|native]
 * </pre>
 */
public final class PrefixLoadLatency
{
    private PrefixLoadLatency()
    {
    }

    public static void main(final String[] args)
    {
        LookupLatency.quietLogging();
        int requests = 20_000;
        int warmup = 4_000;
        int blocks = 14;
        int pages = 2;
        int pageBytes = 4096;
        int prompts = 64;
        int ranks = 1;
        boolean allLists = false;
        String transport = "auto";
        for (int i = 0; i < args.length; i++)
        {
            final String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i])
            {
                case "--requests" -> requests = positive(args[i], value);
                case "--warmup" -> warmup = positive(args[i], value);
                case "--blocks" -> blocks = positive(args[i], value);
                case "--pages" -> pages = positive(args[i], value);
                case "--page-bytes" -> pageBytes = positive(args[i], value);
                case "--prompts" -> prompts = positive(args[i], value);
                case "--ranks" -> ranks = positive(args[i], value);
                case "--lists" -> allLists = lists(value);
                case "--transport" -> transport = value;
                default -> throw new IllegalArgumentException("unknown option " + args[i] +
                    " (--requests, --warmup, --blocks, --pages, --page-bytes, --prompts, --ranks, --lists, " +
                    "--transport)");
            }
            i++;
        }
        final int perBlock = ranks * pages; // a block is whole with every rank's pages: one probe candidate
        final long working = (long)prompts * blocks * perBlock * pageBytes;
        final long segment = Math.max(64L << 20, working * 2);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(segment).start())
        {
            final GranaryClient client = cluster.newClient(cluster.clientConfig()
                .transport(TransportKind.valueOf(transport.toUpperCase(Locale.ROOT))).build());
            final List<List<String>> keys = new ArrayList<>();
            final List<List<String>> ownKeys = new ArrayList<>();
            final ByteBuffer page = ByteBuffer.allocateDirect(pageBytes);
            for (int p = 0; p < prompts; p++)
            {
                final List<String> promptKeys = new ArrayList<>();
                final List<String> own = new ArrayList<>();
                for (int b = 0; b < blocks; b++)
                {
                    for (int r = 0; r < ranks; r++)
                    {
                        for (int g = 0; g < pages; g++)
                        {
                            promptKeys.add("prefix/" + p + "/block-" + b + "/rank-" + r + "/page-" + g);
                            if (r == 0)
                            {
                                own.add(promptKeys.get(promptKeys.size() - 1));
                            }
                        }
                    }
                }
                final List<ByteBuffer> values = new ArrayList<>();
                for (int k = 0; k < promptKeys.size(); k++)
                {
                    values.add(page.duplicate().clear());
                }
                for (final OpResult<Void> r : client.putBatch(promptKeys, values, PutOptions.defaults()))
                {
                    r.value(); // throws if a put failed
                }
                keys.add(promptKeys);
                ownKeys.add(own);
            }
            final List<ByteBuffer> dsts = new ArrayList<>();
            for (int k = 0; k < blocks * pages; k++)
            {
                dsts.add(ByteBuffer.allocateDirect(pageBytes));
            }
            final LeasePolicy policy = LeasePolicy.longestPrefix(perBlock);
            System.out.printf(Locale.ROOT, "prefix load: %d blocks x %d pages of %d B per request (%s), %d prompts, " +
                "%d requests per way after %d of warm-up, alternating; probes cover %d rank(s), rank 0 reads%n",
                blocks, pages, pageBytes, transport, prompts, requests, warmup, ranks);

            final Histogram twoTrips = new Histogram(60_000_000_000L, 3);
            final Histogram oneTrip = new Histogram(60_000_000_000L, 3);
            final long[] calls = new long[2];
            for (int i = 0; i < warmup + requests; i++)
            {
                final List<String> promptKeys = keys.get(i % prompts);
                final List<String> own = ownKeys.get(i % prompts);
                final boolean measure = i >= warmup;
                // Each way goes first every other request, so that neither always finds the caches warmed by the other.
                for (int turn = 0; turn < 2; turn++)
                {
                    final boolean one = (i + turn) % 2 == 0;
                    final long callsBefore = masterCalls(cluster);
                    final long startNs = System.nanoTime();
                    final int pagesRead = one ? probeForReadAndRead(client, promptKeys, policy, pages, allLists, dsts) :
                        probeAndGet(client, promptKeys, own, policy, pages, dsts);
                    final long tookNs = System.nanoTime() - startNs;
                    if (pagesRead != own.size())
                    {
                        throw new IllegalStateException("read " + pagesRead + " of " + own.size() + " pages");
                    }
                    if (measure)
                    {
                        (one ? oneTrip : twoTrips).recordValue(tookNs);
                        calls[one ? 1 : 0] += masterCalls(cluster) - callsBefore;
                    }
                }
            }
            final long callsTwo = calls[0];
            final long callsOne = calls[1];
            print("probe+get", twoTrips, callsTwo, requests);
            print("probeForRead+read", oneTrip, callsOne, requests);
            System.out.printf(Locale.ROOT, "probeForRead+read / probe+get: p50 %.2f, mean %.2f%n",
                (double)oneTrip.getValueAtPercentile(50) / twoTrips.getValueAtPercentile(50),
                oneTrip.getMean() / twoTrips.getMean());
        }
    }

    /**
     * Two master round trips: the probe of every rank's pages, then getBatchInto's own lookup of rank 0's pages of the
     * hit blocks. Returns the pages read.
     */
    private static int probeAndGet(final GranaryClient client, final List<String> keys, final List<String> own,
        final LeasePolicy policy, final int pages, final List<ByteBuffer> dsts)
    {
        final int hitPages = run(client.probeBatch(keys, policy)) / policy.candidateSize() * pages;
        check(client.getBatchInto(own.subList(0, hitPages), clear(dsts, hitPages)), hitPages);
        return hitPages;
    }

    /**
     * One master round trip: the probe of every rank's pages brings the replica lists of rank 0's (the first
     * {@code pages} members of each candidate; every member's with {@code allLists}), which readBatchInto uses.
     * Returns the pages read.
     */
    private static int probeForReadAndRead(final GranaryClient client, final List<String> keys,
        final LeasePolicy policy, final int pages, final boolean allLists, final List<ByteBuffer> dsts)
    {
        final List<OpResult<ReadLease>> leased = allLists ? client.probeBatchForRead(keys, policy) :
            client.probeBatchForRead(keys, policy, 0, pages);
        final List<ReadLease> leases = new ArrayList<>(leased.size());
        for (int i = 0; i < leased.size() && leased.get(i).ok() && leased.get(i).value() != null; i++)
        {
            if (i % policy.candidateSize() < pages)
            {
                leases.add(leased.get(i).value());
            }
        }
        check(client.readBatchInto(leases, clear(dsts, leases.size())), leases.size());
        return leases.size();
    }

    /** BatchProbeKey and BatchGetReplicaList calls the master served so far. */
    private static long masterCalls(final LocalCluster cluster)
    {
        return cluster.masterCalls("BatchProbeKey") + cluster.masterCalls("BatchGetReplicaList");
    }

    private static int run(final List<OpResult<Boolean>> mask)
    {
        int hit = 0;
        while (hit < mask.size() && mask.get(hit).ok() && Boolean.TRUE.equals(mask.get(hit).value()))
        {
            hit++;
        }
        return hit;
    }

    private static List<ByteBuffer> clear(final List<ByteBuffer> dsts, final int n)
    {
        for (int i = 0; i < n; i++)
        {
            dsts.get(i).clear();
        }
        return dsts.subList(0, n);
    }

    private static void check(final List<OpResult<Integer>> results, final int expected)
    {
        if (results.size() != expected)
        {
            throw new IllegalStateException("read " + results.size() + " pages, expected " + expected);
        }
        for (final OpResult<Integer> r : results)
        {
            r.value(); // throws if a read failed
        }
    }

    private static void print(final String way, final Histogram h, final long masterCalls, final int requests)
    {
        System.out.printf(Locale.ROOT,
            "%-18s p50 %7.1f  p90 %7.1f  p99 %7.1f  mean %7.1f us   master calls per request %.2f%n",
            way, h.getValueAtPercentile(50) / 1e3, h.getValueAtPercentile(90) / 1e3, h.getValueAtPercentile(99) / 1e3,
            h.getMean() / 1e3, (double)masterCalls / requests);
    }

    private static boolean lists(final String value)
    {
        if ("own".equals(value) || "all".equals(value))
        {
            return "all".equals(value);
        }
        throw new IllegalArgumentException("--lists must be own (rank 0's lists only) or all, was " + value);
    }

    private static int positive(final String flag, final String value)
    {
        try
        {
            final int v = Integer.parseInt(value);
            if (v > 0)
            {
                return v;
            }
        }
        catch (final NumberFormatException | NullPointerException ignored)
        {
            // reported below
        }
        throw new IllegalArgumentException(flag + " needs a positive number, got " + value);
    }
}
