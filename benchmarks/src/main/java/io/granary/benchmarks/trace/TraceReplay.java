package io.granary.benchmarks.trace;

import io.granary.cli.LocalCluster;
import io.granary.client.GranaryClient;
import io.granary.client.prefix.PrefixCache;
import io.granary.client.prefix.PrefixLayout;
import io.granary.client.prefix.PrefixLookup;
import io.granary.client.prefix.PrefixStats;
import io.granary.common.Units;
import io.granary.master.MasterServer;
import io.granary.master.evict.EvictionPolicy;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.MountedSegment;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Replays a prefix trace ({@link Trace}) against a real in-process cluster (a master with gRPC and its lookup port,
 * one storage node over loopback TCP) through the client's prefix-cache helper, for each pool size and eviction
 * policy asked, next to the in-Java {@link PoolModel} of the same run and the offline {@link BeladyBound}.
 *
 * <p>Per request: {@code lookup} of the prompt's full blocks (timed), a hole check behind the first missing block
 * (not timed), {@code load} of the hit run into direct buffers (timed), {@code save} of the missing blocks. Each
 * hash id is one block of {@code objectsPerBlock} pages of {@code pageBytes} (one eviction group, every page naming
 * its predecessor as parent); the pool is one segment holding {@code fraction} of the trace's unique blocks. The
 * master runs with the given policy, on-demand eviction only (high watermark 1.0) at the given eviction ratio, and a
 * 1 µs lease TTL, so that its age order is the order of the replay's touches (the order the model and the
 * simulator assume); nothing else runs, so no lease is needed to keep a lookup's blocks until they are loaded.
 *
 * <pre>
 * java --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
 *      -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.trace.TraceReplay \
 *      --trace /work/shared/traces/conversation_trace.jsonl [--requests N] [--fractions 0.1,0.25,0.5] \
 *      [--policies oldest-lease,prefix-leaf-first] [--objects-per-block 2] [--page-bytes 4096] \
 *      [--eviction-ratio 0.01] [--restart-after N] [--commit-parents true|false] [--json]
 * </pre>
 *
 * <p>{@code --restart-after N} stops the master after the N-th request of each run and starts a new one on the same
 * ports, which rebuilds its metadata (and the pages' parent links) from the node's ledger, as after a master crash;
 * the replay then goes on. Reads before the restart are not in a ledger: the rebuilt pages age from when they were
 * stored, so the model (which does not restart) and the cluster may disagree on some requests after it.
 * {@code --commit-parents false} keeps the parent keys out of the COMMIT records (the client's {@code commitParents}),
 * as before they were carried: a restarted master then rebuilds the pages without their parent links.
 */
public final class TraceReplay
{
    /** What to replay and how. Mutable; not thread safe. */
    public static final class Settings
    {
        public Path trace;
        public int requests = Integer.MAX_VALUE;
        public double[] fractions = {0.10, 0.25, 0.50};
        public List<EvictionPolicy> policies = List.of(EvictionPolicy.OLDEST_LEASE, EvictionPolicy.PREFIX_LEAF_FIRST);
        public int objectsPerBlock = 2;
        public int pageBytes = 4096;
        public double evictionRatio = 0.01;
        /** Restart the master after this many requests of each run; 0 = never. */
        public int restartAfter;
        /** The client's {@code commitParents}: whether ledgers keep the pages' parent keys. */
        public boolean commitParents = true;
        public boolean json;
    }

    /** One replay: a pool size and a policy, measured on the cluster and in the model. */
    public record Row(
        double fraction,
        EvictionPolicy policy,
        long capacityBlocks,
        long segmentBytes,
        double hitRate,
        double modelHitRate,
        double bound,
        long strandedBlocks,
        long holes,
        long modelStrandedBlocks,
        long prefixBreaks,
        long evictedObjects,
        long requestsDisagreeing,
        long bytesLoaded,
        long bytesSaved,
        Histogram lookupNs,
        Histogram loadNs,
        double seconds)
    {
        /** The hit rate as a fraction of the bound. */
        public double ofBound()
        {
            return bound == 0 ? 0 : hitRate / bound;
        }
    }

    private TraceReplay()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Settings s = parse(args);
        final Trace trace = Trace.load(s.trace, s.requests);
        final PrintStream out = System.out;
        describe(trace, s, out);
        final List<Row> rows = run(trace, s, System.err);
        if (s.json)
        {
            rows.forEach(r -> out.println(json(r)));
        }
        else
        {
            print(rows, out);
        }
    }

    static Settings parse(final String[] args)
    {
        final Settings s = new Settings();
        for (int i = 0; i < args.length; i++)
        {
            final String flag = args[i];
            if (flag.equals("--json"))
            {
                s.json = true;
                continue;
            }
            if (i + 1 >= args.length)
            {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            final String v = args[++i];
            switch (flag)
            {
                case "--trace" -> s.trace = Path.of(v);
                case "--requests" -> s.requests = Integer.parseInt(v);
                case "--fractions" ->
                {
                    final String[] parts = v.split(",");
                    s.fractions = new double[parts.length];
                    for (int f = 0; f < parts.length; f++)
                    {
                        s.fractions[f] = Double.parseDouble(parts[f]);
                    }
                }
                case "--policies" ->
                {
                    final List<EvictionPolicy> policies = new ArrayList<>();
                    for (final String p : v.split(","))
                    {
                        policies.add(EvictionPolicy.fromFlag(p));
                    }
                    s.policies = policies;
                }
                case "--objects-per-block" -> s.objectsPerBlock = Integer.parseInt(v);
                case "--page-bytes" -> s.pageBytes = Integer.parseInt(v);
                case "--eviction-ratio" -> s.evictionRatio = Double.parseDouble(v);
                case "--restart-after" -> s.restartAfter = Integer.parseInt(v);
                case "--commit-parents" -> s.commitParents = Boolean.parseBoolean(v);
                default -> throw new IllegalArgumentException("unknown flag " + flag);
            }
        }
        if (s.trace == null)
        {
            throw new IllegalArgumentException("--trace FILE is required");
        }
        return s;
    }

    static void describe(final Trace trace, final Settings s, final PrintStream out)
    {
        final long blockBytes = (long)s.objectsPerBlock * s.pageBytes;
        out.printf(Locale.ROOT, "%s: %d requests, %d unique blocks, %d block references, most reuse possible %.4f%n",
            trace.name(), trace.requestCount(), trace.uniqueBlocks(), trace.blockReferences(), trace.maxReuse());
        out.printf(Locale.ROOT, "scale: 1 block (512 tokens) = %d objects x %s = %s; working set %s; eviction ratio %s, " +
            "on demand only, lease TTL 1us%n", s.objectsPerBlock, Units.formatBytes(s.pageBytes),
            Units.formatBytes(blockBytes), Units.formatBytes(blockBytes * trace.uniqueBlocks()), s.evictionRatio);
    }

    /** Every fraction x policy replay, in order. */
    public static List<Row> run(final Trace trace, final Settings s, final PrintStream progress)
    {
        final List<Row> rows = new ArrayList<>();
        for (final double fraction : s.fractions)
        {
            final long capacityBlocks = (long)(fraction * trace.uniqueBlocks());
            final double bound = BeladyBound.hitRate(trace, capacityBlocks);
            for (final EvictionPolicy policy : s.policies)
            {
                rows.add(replay(trace, s, fraction, capacityBlocks, bound, policy, progress));
            }
        }
        return rows;
    }

    static long allocationBytes(final int pageBytes)
    {
        return (Math.max(1, pageBytes) + 63L) / 64 * 64; // the master's default 64-byte granularity
    }

    private static Row replay(
        final Trace trace,
        final Settings s,
        final double fraction,
        final long capacityBlocks,
        final double bound,
        final EvictionPolicy policy,
        final PrintStream progress)
    {
        final int k = s.objectsPerBlock;
        final long pageAlloc = allocationBytes(s.pageBytes);
        final long wanted = Math.max(1, capacityBlocks) * k * pageAlloc;
        final MasterServer.Context master = LocalCluster.defaultMasterContext()
            .evictionPolicy(policy)
            .evictionHighWatermark(1.0)
            .evictionRatio(s.evictionRatio)
            .leaseTtl(Duration.ofNanos(1_000));
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(wanted).masterContext(master)
            .namePrefix("replay-").start())
        {
            final MountedSegment[] segments = cluster.master().registry().liveSegments();
            final long segmentBytes = segments[0].sizeBytes();
            final PoolModel model = new PoolModel(policy, segmentBytes / pageAlloc, k, s.pageBytes, s.evictionRatio,
                segmentBytes);
            final GranaryClient client =
                cluster.newClient(cluster.clientConfig().commitParents(s.commitParents).build());
            final PrefixCache cache = new PrefixCache(client, PrefixLayout.builder().model("trace-replay")
                .layerGroups(k).tokensPerBlock(Trace.TOKENS_PER_BLOCK).build());
            MetadataStore store = cluster.master().store();
            long prefixBreaks = 0;
            long evictedObjects = 0;
            long putEndsDone = 0;

            int maxBlocks = 0;
            for (int i = 0; i < trace.requestCount(); i++)
            {
                maxBlocks = Math.max(maxBlocks, trace.request(i).length);
            }
            final ByteBuffer loadArea = ByteBuffer.allocateDirect(Math.max(1, maxBlocks * k * s.pageBytes));
            final ByteBuffer saveArea = ByteBuffer.allocateDirect(Math.max(1, maxBlocks * k * s.pageBytes));
            for (int i = 0; i < saveArea.capacity(); i++)
            {
                saveArea.put(i, (byte)(i * 31 + 7));
            }
            final Histogram lookupNs = new Histogram(3_600_000_000_000L, 3);
            final Histogram loadNs = new Histogram(3_600_000_000_000L, 3);
            long putEndsBefore = store.putEnds();
            long bytesLoaded = 0;
            long disagreeing = 0;
            final long startNs = System.nanoTime();
            for (int r = 0; r < trace.requestCount(); r++)
            {
                final int[] blocks = trace.request(r);
                final int[] tokens = Trace.tokens(blocks);
                final long t0 = System.nanoTime();
                final PrefixLookup lookup = cache.lookup(tokens);
                lookupNs.recordValue(System.nanoTime() - t0);
                cache.checkHoles(lookup);
                final int hit = lookup.hitBlocks();
                if (hit > 0)
                {
                    final List<ByteBuffer> dsts = slices(loadArea, hit * k, s.pageBytes);
                    final long t1 = System.nanoTime();
                    cache.load(lookup, hit, dsts);
                    loadNs.recordValue(System.nanoTime() - t1);
                    for (final ByteBuffer d : dsts)
                    {
                        bytesLoaded += d.position();
                    }
                }
                cache.save(lookup, slices(saveArea, lookup.missingBlocks() * k, s.pageBytes));
                if (model.request(blocks) != hit)
                {
                    disagreeing++;
                }
                if (r + 1 == s.restartAfter)
                {
                    final MasterServer before = cluster.master();
                    prefixBreaks += before.evictor().prefixBreaks();
                    evictedObjects += before.evictor().evictedObjects(0) + before.evictor().evictedObjects(1);
                    putEndsDone += store.putEnds() - putEndsBefore;
                    final long restartNs = System.nanoTime();
                    final MasterServer after = cluster.restartMaster();
                    store = after.store();
                    putEndsBefore = store.putEnds();
                    if (progress != null)
                    {
                        progress.printf(Locale.ROOT, "  %s %.0f%%: master restarted after %d requests in %.1f s: %d " +
                            "objects rebuilt, %d linked to their parent, %d waiting for it%n", policy, fraction * 100,
                            r + 1, (System.nanoTime() - restartNs) / 1e9, store.rebuildCounters().objects(),
                            store.rebuildCounters().parentsLinked(), store.rebuiltAwaitingParents());
                    }
                }
                if (progress != null && (r + 1) % Math.max(1, trace.requestCount() / 10) == 0)
                {
                    progress.printf(Locale.ROOT, "  %s %.0f%%: %d/%d requests, %.1f s%n", policy, fraction * 100, r + 1,
                        trace.requestCount(), (System.nanoTime() - startNs) / 1e9);
                }
            }
            final double seconds = (System.nanoTime() - startNs) / 1e9;
            final PrefixStats stats = cache.stats();
            final MasterServer last = cluster.master();
            prefixBreaks += last.evictor().prefixBreaks();
            evictedObjects += last.evictor().evictedObjects(0) + last.evictor().evictedObjects(1);
            putEndsDone += store.putEnds() - putEndsBefore;
            return new Row(fraction, policy, capacityBlocks, segmentBytes, stats.hitRate(), model.hitRate(), bound,
                stats.strandedBlocks(), stats.holes(), model.strandedBlocks(), prefixBreaks, evictedObjects,
                disagreeing, bytesLoaded, putEndsDone * s.pageBytes, lookupNs, loadNs, seconds);
        }
    }

    /** {@code count} page-sized views of an area, positions at 0. */
    private static List<ByteBuffer> slices(final ByteBuffer area, final int count, final int pageBytes)
    {
        final List<ByteBuffer> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++)
        {
            out.add(area.slice(i * pageBytes, pageBytes));
        }
        return out;
    }

    static void print(final List<Row> rows, final PrintStream out)
    {
        out.printf(Locale.ROOT, "%-5s %-18s %9s %8s %8s %7s %8s %8s %7s %10s %10s %10s %9s %9s %9s %9s %7s%n",
            "POOL", "POLICY", "BLOCKS", "HIT", "MODEL", "BOUND", "%BOUND", "STRANDED", "BREAKS", "EVICTED",
            "LOADED", "SAVED", "LK-P50us", "LK-P99us", "LD-P50us", "LD-P99us", "WALL-S");
        for (final Row r : rows)
        {
            out.printf(Locale.ROOT, "%-5s %-18s %9d %8.4f %8.4f %7.4f %7.1f%% %8d %7d %10d %10s %10s %9.0f %9.0f %9.0f %9.0f %7.1f%n",
                Math.round(r.fraction() * 100) + "%", r.policy(), r.capacityBlocks(), r.hitRate(), r.modelHitRate(),
                r.bound(), r.ofBound() * 100, r.strandedBlocks(), r.prefixBreaks(), r.evictedObjects(),
                Units.formatBytes(r.bytesLoaded()).replace(" ", ""), Units.formatBytes(r.bytesSaved()).replace(" ", ""),
                us(r.lookupNs(), 50), us(r.lookupNs(), 99), us(r.loadNs(), 50), us(r.loadNs(), 99), r.seconds());
        }
        for (final Row r : rows)
        {
            if (r.requestsDisagreeing() != 0)
            {
                out.printf(Locale.ROOT, "note: %s at %.0f%%: %d requests found a different prefix than the model%n",
                    r.policy(), r.fraction() * 100, r.requestsDisagreeing());
            }
        }
    }

    static String json(final Row r)
    {
        return String.format(Locale.ROOT, "{\"pool_fraction\":%s,\"policy\":\"%s\",\"capacity_blocks\":%d," +
            "\"segment_bytes\":%d,\"hit_rate\":%.6f,\"model_hit_rate\":%.6f,\"bound\":%.6f,\"stranded_blocks\":%d," +
            "\"holes\":%d,\"model_stranded_blocks\":%d,\"prefix_breaks\":%d,\"evicted_objects\":%d," +
            "\"requests_disagreeing\":%d,\"bytes_loaded\":%d,\"bytes_saved\":%d,\"lookup_p50_us\":%.1f," +
            "\"lookup_p99_us\":%.1f,\"load_p50_us\":%.1f,\"load_p99_us\":%.1f,\"seconds\":%.2f}",
            r.fraction(), r.policy(), r.capacityBlocks(), r.segmentBytes(), r.hitRate(), r.modelHitRate(), r.bound(),
            r.strandedBlocks(), r.holes(), r.modelStrandedBlocks(), r.prefixBreaks(), r.evictedObjects(),
            r.requestsDisagreeing(), r.bytesLoaded(), r.bytesSaved(), us(r.lookupNs(), 50), us(r.lookupNs(), 99),
            us(r.loadNs(), 50), us(r.loadNs(), 99), r.seconds());
    }

    private static double us(final Histogram h, final double percentile)
    {
        return h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(percentile) / 1000.0;
    }
}
