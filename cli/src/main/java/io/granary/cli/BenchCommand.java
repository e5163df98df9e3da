package io.granary.cli;

import io.granary.cli.LoopbackBaseline.Shape;
import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.HostBuffer;
import io.granary.client.KeyInfo;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.Units;
import io.granary.node.segment.HugePages;
import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngines;
import io.granary.transfer.TransportKind;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.net.http.HttpClient;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;

/**
 * {@code granary bench}: puts and gets {@code --count} values of each {@code --size} with {@code --concurrency}
 * callers sharing one client (one value per call, or {@code --batch} values per putBatch/getBatchInto), against a
 * running cluster or an in-process one per size ({@code --local}), and prints one table with a row per size and
 * phase: ops/s (values per second), GB/s and latency percentiles per call. With {@code --baseline} it measures the
 * loopback limit of the same shapes ({@link LoopbackBaseline}) right before and right after the measured phases and
 * adds Granary's share of the higher of the two. Values
 * are slices of one random pattern (deterministic, distinct per key), sent from direct memory; single gets read
 * into per-caller direct buffers. Runs on the calling thread, which starts and joins the caller threads.
 */
@Command(
    name = "bench",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Put and get COUNT values of each SIZE with C concurrent callers (BATCH values per call) and print one row "
            + "per size and phase: ops/s (values/s), GB/s (1e9 bytes/s) and GiB/s, latency per call "
            + "p50/p99/p99.9/max, and errors.",
        "Runs against the master at --master, or an in-process cluster per size with --local. --baseline "
            + "measures plain Java sockets moving the same values over loopback (the loopback limit) right before and "
            + "right after the measured phases and adds %%LIMIT = Granary GB/s / the higher limit GB/s of the same "
            + "shape, size, concurrency and batch.",
        "Keys are unique per run and removed at the end unless --keep. Exits 1 if any operation failed or any "
            + "verified value differed."})
final class BenchCommand implements Callable<Integer>
{
    private static final int PATTERN_SPAN = 1 << 16;
    private static final int OFFSET_STRIDE = 4099; // odd: 65536 distinct offsets before repeating
    private static final int MAX_SIZE = Integer.MAX_VALUE - PATTERN_SPAN;
    private static final long MIN_SLICE_BYTES = 4096;
    private static final long MAX_SLICE_BYTES = 1L << 30;
    private static final double MAX_BASELINE_SECONDS = 3600;
    /** Bytes of values the default warmup moves per size (docs/benchmarks.md, "Warmup"). */
    static final long DEFAULT_WARMUP_BYTES = 2L << 30;
    /** Bytes of puts per round of the timed warmup (--warmup-seconds). */
    static final long WARMUP_ROUND_BYTES = 256L << 20;
    /**
     * Rounds in a row the JIT must stay below --warmup-jit-quiet: it compiles in bursts, and one quiet round between
     * two bursts was seen to end a warmup whose measured phase then gave 11 % of the cores to the compiler.
     */
    static final int JIT_QUIET_ROUNDS = 3;
    /** The longest the timed warmup goes on for --warmup-calls or --warmup-jit-quiet alone. */
    static final int MAX_CALL_WARMUP_SECONDS = 120;
    /** Bytes of puts a round of the timed warmup has at least, however small --warmup is. */
    static final long MIN_WARMUP_ROUND_BYTES = 16L << 20;
    private static final int KIND_GET = 0;
    private static final int KIND_PUT = 1;

    /** What the measured phases do. */
    enum Op
    {
        put, get, both, mixed
    }

    @Spec
    private CommandSpec spec;

    @Mixin
    private ClientOptions clientOptions;

    @Option(names = "--local", description = "Start an in-process master and --nodes storage nodes (a fresh cluster "
        + "per size) instead of using --master; a 'master:' line per phase says what it cost the master.")
    private boolean local;

    @Option(names = "--nodes", paramLabel = "N", defaultValue = "1", description = "Storage nodes of --local.")
    private int nodes;

    @Option(names = "--segment-size", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Segment size of --local nodes. Default: sized to hold each size's run at under 80%% use.")
    private Long segmentSizeOption;

    @Option(names = "--pre-touch", description = "Commit the --local segments' memory before the run, as "
        + "'granary node --pre-touch' does (otherwise the put phase pays the first touch of every page).")
    private boolean preTouch;

    @Option(names = "--huge-pages", paramLabel = "auto|on|off", defaultValue = "auto",
        converter = NodeCommand.HugePagesConverter.class,
        description = "Segment memory of --local nodes backed by transparent huge pages, as 'granary node "
            + "--huge-pages' (auto: where available).")
    private HugePages hugePages;

    @Option(names = "--pool", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Gets land in random slots of one host buffer of SIZE (split among the callers, touched before "
            + "the run), as in an engine's KV pool, instead of one small buffer per caller. At most 2 GiB - 1.")
    private Long poolBytes;

    @Option(names = "--pool-huge-pages", arity = "1", paramLabel = "true|false", defaultValue = "true",
        description = "With --pool: a host buffer on transparent huge pages where available (HostBuffer), or plain "
            + "4 KiB pages.")
    private boolean poolHugePages;

    @Option(names = "--count", paramLabel = "N", defaultValue = "1000", description = "Values per phase.")
    private int count;

    @Option(names = "--size", paramLabel = "SIZE", defaultValue = "1m", split = ",",
        converter = Converters.SizeConverter.class,
        description = "Bytes per value; a comma list (4k,64k,1m,4m) repeats the run per size.")
    private List<Long> sizes;

    @Option(names = "--concurrency", paramLabel = "C", defaultValue = "1", description = "Concurrent callers.")
    private int concurrency;

    @Option(names = "--batch", paramLabel = "N", defaultValue = "1", description = "Values per call: above 1 each "
        + "caller uses putBatch/getBatchInto of N values; latency is then per batch call.")
    private int batch;

    @Option(names = "--op", paramLabel = "OP", defaultValue = "both",
        description = "put, get (values are put first, unmeasured), both (a put phase, then a get phase) or mixed "
            + "(gets and puts in --read-ratio against COUNT pre-filled values).")
    private Op op;

    @Option(names = "--read-ratio", paramLabel = "R", defaultValue = "0.9",
        description = "Share of gets (by call) in --op mixed, 0..1.")
    private double readRatio;

    @Option(names = "--replicas", paramLabel = "R", defaultValue = "1", description = "Replicas per value.")
    private int replicas;

    @Option(names = "--warmup", paramLabel = "N",
        description = "Unmeasured puts and gets of separate keys before each size's phases. Default: as many values "
            + "as fill 2 GiB, at least 200 and at most COUNT.")
    private Integer warmupOption;

    @Option(names = "--warmup-seconds", paramLabel = "S", defaultValue = "15",
        description = "After the --warmup values, keep warming up until S seconds of warmup have passed: rounds of "
            + "puts of fresh keys (16-256 MiB of them, removed after each round) and gets of the warmup values. The "
            + "JIT needs 10-20 s of "
            + "steady work to compile a put's and a get's whole path; 0 stops after the --warmup values. 0..600.")
    private int warmupSeconds;

    @Option(names = "--warmup-calls", paramLabel = "N", defaultValue = "0",
        description = "With --warmup-seconds above 0, the timed rounds also go on until the warmup made at least N "
            + "put calls and N get calls (at most " + MAX_CALL_WARMUP_SECONDS + " s in all, or --warmup-seconds if "
            + "longer): C2 compiles a method after about 5,000 calls, and a call of 8 x 1 MiB takes milliseconds, so "
            + "6000 gives slow batched calls a compiled path. 0..10000000.")
    private int warmupCalls;

    @Option(names = "--warmup-jit-quiet", paramLabel = "P", defaultValue = "5",
        description = "With --warmup-seconds above 0, the timed rounds also go on until the JIT took less than P %% of "
            + "the cores in " + JIT_QUIET_ROUNDS + " rounds in a row (its threads' CPU time where /proc tells it, else "
            + "its compile time; at most " + MAX_CALL_WARMUP_SECONDS + " s in all, or --warmup-seconds if longer), so "
            + "the measured phases do not share the cores with the compiler. 0 does not wait for it. 0..100.")
    private double warmupJitQuiet;

    @Option(names = "--verify", description = "Compare every value read (default: every 10th).")
    private boolean verifyAll;

    @Option(names = "--checksums", arity = "1", paramLabel = "true|false", defaultValue = "true",
        description = "Record a CRC32C of every value at put and check it on every get (the client's default); "
            + "false measures without.")
    private boolean checksums;

    @Option(names = "--caller-driven", arity = "1", paramLabel = "true|false", defaultValue = "true",
        description = "Synchronous calls move their own bytes on the calling thread (the client's default); false "
            + "sends every transfer through the engine's event loops.")
    private boolean callerDriven;

    @Option(names = "--lanes-per-peer", paramLabel = "N", defaultValue = "" + TransferConfig.DEFAULT_LANES_PER_PEER,
        description = "The client's lanesPerPeer: transfer connections per storage node (1..64).")
    private int lanesPerPeer;

    @Option(names = "--max-vector-entries", paramLabel = "N",
        defaultValue = "" + TransferConfig.DEFAULT_MAX_VECTOR_ENTRIES,
        description = "The client's maxVectorEntries: most small reads (READV) and, with the native transport, small "
            + "writes (WRITEV) in one frame (1..1024; 1 sends each in a frame of its own).")
    private int maxVectorEntries;

    @Option(names = "--slice-bytes", paramLabel = "SIZE", defaultValue = "" + TransferConfig.DEFAULT_SLICE_BYTES,
        converter = Converters.SizeConverter.class,
        description = "The client's sliceBytes: the largest range one transfer frame carries (4 KiB..1 GiB; at most "
            + "the nodes' --max-frame, 16 MiB by default); bigger values are split into slices spread over the lanes.")
    private long sliceBytes;

    @Option(names = "--data-tokens", arity = "1", paramLabel = "true|false", defaultValue = "true",
        description = "With --local: the master issues data-plane access tokens and the nodes check them (the "
            + "master's default); false measures without.")
    private boolean dataTokens;

    @Option(names = "--local-transfers", arity = "1", paramLabel = "true|false", defaultValue = "true",
        description = "The client's localTransfers (the native transport moves values of at least 64 KiB to nodes on "
            + "this host with process_vm_readv/writev instead of loopback TCP), and with --local the nodes' "
            + "--local-transfers; false measures TCP only.")
    private boolean localTransfers;

    @Option(names = "--keep", description = "Leave the keys in the cluster.")
    private boolean keep;

    @Option(names = "--master-metrics", paramLabel = "HOST:PORT", description = "A running master's admin HTTP "
        + "address: read its call timers from /metrics before and after each phase and print the 'master:' lines "
        + "--local prints (what the phase cost the master).")
    private String masterMetrics;

    @Option(names = "--baseline", description = "Right before and right after each size's measured phases, measure "
        + "the loopback limit: plain blocking java.nio sockets between threads over 127.0.0.1, C connections, the "
        + "same request/response shape, size and batch; adds LIMIT(GB/S) (the higher of the two) and %%LIMIT columns.")
    private boolean baseline;

    @Option(names = "--baseline-seconds", paramLabel = "S", defaultValue = "3",
        description = "Measured seconds of each baseline shape (after a warmup of a third of it, at most 1 s).")
    private double baselineSeconds;

    @Option(names = "--baseline-stream", description = "With --baseline, also measure one-way streaming of the "
        + "same values (no responses; for information, not used in %%LIMIT).")
    private boolean baselineStream;

    @Option(names = "--baseline-cold", description = "With --baseline, also measure the put and get shapes with the "
        + "server side reading (get) or landing (put) every value at the next place of a --baseline-cold-region "
        + "region instead of one buffer that stays in the CPU's caches, as a storage node reads and writes values "
        + "where they live in its segment; adds COLD(GB/S) (the higher of before and after) and %%COLD columns, for "
        + "information: %%LIMIT stays the measure of the targets.")
    private boolean baselineCold;

    @Option(names = "--baseline-cold-region", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        defaultValue = "1GiB", description = "Size of the --baseline-cold region (direct memory, allocated once): "
        + "much larger than the CPU's last-level cache, at least one value, less than 2 GiB.")
    private long baselineColdRegion;

    /** The region of --baseline-cold, allocated at its first use. */
    private ByteBuffer coldRegion;

    @Option(names = "--tls-client-auth", paramLabel = "MODE", defaultValue = "none",
        converter = TlsOptions.ClientAuthConverter.class,
        description = "With --local and --tls-*: whether the in-process master and nodes require the client's "
            + "certificate (none, optional, require). Their certificate is --tls-cert too.")
    private io.granary.common.tls.TlsSettings.ClientAuth tlsClientAuth;

    @Option(names = "--json", description = "Print one JSON object per row (baseline and Granary rows) on stdout; "
        + "other output goes to stderr.")
    private boolean json;

    private ByteBuffer pattern;
    private PrintWriter out;
    private PrintWriter info;
    /** The client's metrics with --transport rdma (else null): the one-sided READ counters. */
    private SimpleMeterRegistry engineMeters;
    /** Reads the master's call timers: the in-process master's while a --local size runs, or --master-metrics. */
    private MasterReader masterReader;

    @Override
    public Integer call()
    {
        Logging.setLevel(spec, clientOptions.logLevel);
        validate();
        out = spec.commandLine().getOut();
        info = json ? spec.commandLine().getErr() : out;
        pattern = pattern(sizes.stream().mapToLong(Long::longValue).max().orElseThrow());
        final String runPrefix = "bench/" + Long.toString(System.currentTimeMillis(), 36) + "-" +
            Integer.toString(new SplittableRandom().nextInt(1 << 20), 36) + "/";
        final List<Row> rows = new ArrayList<>();
        final List<String> notes = new ArrayList<>();
        try (HostBuffer pool = poolBytes == null ? null : HostBuffer.allocate(poolBytes.intValue(), poolHugePages))
        {
            if (pool != null)
            {
                final ByteBuffer memory = pool.buffer();
                for (int at = 0; at < memory.capacity(); at += 4096)
                {
                    memory.put(at, (byte)0);
                }
                info.printf(Locale.ROOT, "pool: gets land in random slots of a %s host buffer, %s%n",
                    Units.formatBytes(pool.capacity()), pool.hugePagesAdvised() ? "huge pages advised (" +
                        Units.formatBytes(pool.hugePageBytes()) + " backed)" : "4 KiB pages (" + pool.plainReason() + ")");
            }
            Phase.pool(pool == null ? null : pool.buffer(), concurrency);
            return runAll(runPrefix, rows, notes);
        }
        finally
        {
            Phase.pool(null, 1);
        }
    }

    /**
     * The warmup values of one size: --warmup, else as many as fill {@link #DEFAULT_WARMUP_BYTES}, at least 200 and at
     * most --count. The JIT compiles the data path over the first seconds of work: with a warmup of 200 values its
     * compiler threads still took a share of the two cores in the measured phases, which then measured the JVM's
     * start more than the store (docs/benchmarks.md, "Warmup").
     */
    static int warmupFor(final Integer warmupOption, final long size, final int count)
    {
        if (warmupOption != null)
        {
            return warmupOption;
        }
        return (int)Math.min(count, Math.max(200, DEFAULT_WARMUP_BYTES / size));
    }

    private int runAll(final String runPrefix, final List<Row> rows, final List<String> notes)
    {
        boolean failed = false;

        if (local)
        {
            for (final long size : sizes)
            {
                failed |= runLocal(size, warmupFor(warmupOption, size, count), runPrefix, rows, notes);
            }
        }
        else
        {
            info.println("cluster: master " + clientOptions.master +
                (masterMetrics == null ? "" : ", its metrics at http://" + masterMetrics + "/metrics"));
            info.flush();
            if (masterMetrics != null)
            {
                final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
                masterReader = () -> MasterTimes.scrape(http, masterMetrics);
            }
            try (GranaryClient client = GranaryClient.connect(clientConfig(clientOptions.master)))
            {
                for (final long size : sizes)
                {
                    failed |= runSize(client, size, warmupFor(warmupOption, size, count), runPrefix, rows, notes);
                }
                if (!keep)
                {
                    info.println("cleanup: removed " + removeRun(client, runPrefix) + " keys");
                }
            }
            catch (final GranaryException ex)
            {
                throw ClientOptions.withHint(ex, clientOptions.master);
            }
        }
        if (!json)
        {
            printTable(rows);
        }
        notes.forEach(info::println);
        out.flush();
        info.flush();
        return failed ? Granary.EXIT_FAILED : 0;
    }

    private void validate()
    {
        final CommandLine cmd = spec.commandLine();
        if (local && cmd.getParseResult().hasMatchedOption("--master"))
        {
            throw new CommandLine.ParameterException(cmd, "give either --master or --local, not both");
        }
        require(count >= 1, "--count must be positive, was " + count);
        require(!sizes.isEmpty(), "--size needs at least one size");
        for (final long size : sizes)
        {
            require(size >= 1 && size <= MAX_SIZE, "--size must be in 1.." + MAX_SIZE + ", was " + size);
            require(!baselineCold || size <= baselineColdRegion, "--baseline-cold-region (" + baselineColdRegion +
                " bytes) must hold at least one value of --size " + size);
        }
        require(concurrency >= 1 && concurrency <= 1024, "--concurrency must be in 1..1024, was " + concurrency);
        require(batch >= 1 && batch <= LoopbackBaseline.MAX_BATCH,
            "--batch must be in 1.." + LoopbackBaseline.MAX_BATCH + ", was " + batch);
        require(readRatio >= 0 && readRatio <= 1, "--read-ratio must be in 0..1, was " + readRatio);
        require(baselineSeconds > 0 && baselineSeconds <= MAX_BASELINE_SECONDS,
            "--baseline-seconds must be above 0 and at most " + (int)MAX_BASELINE_SECONDS + ", was " + baselineSeconds);
        require(baseline || !baselineStream, "--baseline-stream needs --baseline");
        require(baseline || !baselineCold, "--baseline-cold needs --baseline");
        require(baselineColdRegion >= 1 && baselineColdRegion <= Integer.MAX_VALUE,
            "--baseline-cold-region must be at least 1 byte and below 2 GiB, was " + baselineColdRegion);
        require(nodes >= 1 && nodes <= 64, "--nodes must be in 1..64, was " + nodes);
        if (poolBytes != null)
        {
            final long largest = sizes.stream().mapToLong(Long::longValue).max().orElse(1);
            require(poolBytes >= largest * batch * concurrency && poolBytes <= Integer.MAX_VALUE,
                "--pool must hold a batch of the largest size for every caller (" + largest * batch * concurrency +
                " bytes) and be at most " + Integer.MAX_VALUE + ", was " + poolBytes);
        }
        require(warmupOption == null || warmupOption >= 0, "--warmup must not be negative, was " + warmupOption);
        require(warmupSeconds >= 0 && warmupSeconds <= 600, "--warmup-seconds must be in 0..600, was " + warmupSeconds);
        require(warmupCalls >= 0 && warmupCalls <= 10_000_000, "--warmup-calls must be in 0..10000000, was " +
            warmupCalls);
        require(warmupJitQuiet >= 0 && warmupJitQuiet <= 100, "--warmup-jit-quiet must be in 0..100, was " +
            warmupJitQuiet);
        require(replicas >= 1, "--replicas must be positive, was " + replicas);
        require(lanesPerPeer >= 1 && lanesPerPeer <= TransferConfig.MAX_LANES_PER_PEER,
            "--lanes-per-peer must be in 1.." + TransferConfig.MAX_LANES_PER_PEER + ", was " + lanesPerPeer);
        require(maxVectorEntries >= 1 && maxVectorEntries <= FrameDescriptor.MAX_VECTOR_ENTRIES,
            "--max-vector-entries must be in 1.." + FrameDescriptor.MAX_VECTOR_ENTRIES + ", was " + maxVectorEntries);
        require(sliceBytes >= MIN_SLICE_BYTES && sliceBytes <= MAX_SLICE_BYTES,
            "--slice-bytes must be in " + MIN_SLICE_BYTES + ".." + MAX_SLICE_BYTES + ", was " + sliceBytes);
        require(local || tlsClientAuth == io.granary.common.tls.TlsSettings.ClientAuth.NONE,
            "--tls-client-auth applies to the in-process servers of --local only");
        if (local)
        {
            try
            {
                clientOptions.tls.settings(tlsClientAuth).validateForServer();
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.ParameterException(cmd, ex.getMessage());
            }
        }
        require(masterMetrics == null || !local,
            "--master-metrics is for a running master; --local reads the in-process master's timers itself");
        require(masterMetrics == null || ClientConfig.Builder.checkHostPort(masterMetrics) == null,
            "--master-metrics must be HOST:PORT (the master's admin port, 1..65535), was '" + masterMetrics + "'");
        require(local || !cmd.getParseResult().hasMatchedOption("--data-tokens"),
            "--data-tokens applies to --local clusters; a running master has its own --data-tokens");
    }

    /**
     * The client settings of the shared flags plus --checksums, --caller-driven, --lanes-per-peer, --slice-bytes,
     * --max-vector-entries.
     */
    private ClientConfig clientConfig(final String masterAddress)
    {
        final ClientConfig.Builder builder = clientOptions.config(spec.commandLine(), masterAddress).toBuilder()
            .checksums(checksums).callerDriven(callerDriven).lanesPerPeer(lanesPerPeer).sliceBytes((int)sliceBytes)
            .maxVectorEntries(maxVectorEntries)
            .localTransfers(localTransfers);
        final boolean localSizes = localTransfers && clientOptions.transport != TransportKind.JAVA &&
            sizes.stream().anyMatch(size -> size >= TransferConfig.DEFAULT_LOCAL_MIN_BYTES);
        if (clientOptions.transport == TransportKind.RDMA || localSizes)
        {
            // Only then (the client's metrics cost a little on every call): how many READs went one-sided over RDMA,
            // how many transfers went local.
            engineMeters = new SimpleMeterRegistry();
            builder.meterRegistry(engineMeters);
        }
        return builder.build();
    }

    /** The client's meters (docs/operations.md) of one-sided RDMA reads and same-host transfers. */
    private static final String RDMA_READS_METER = "granary.client.transfer.rdma.reads";
    private static final String LOCAL_TRANSFERS_METER = "granary.client.transfer.local";

    /** A counter of the client's native engine so far (0 without one): {@code name} with {@code outcome}. */
    private long engineCount(final String name, final String outcome)
    {
        final FunctionCounter counter = engineMeters == null ? null :
            engineMeters.find(name).tag("outcome", outcome).functionCounter();
        return counter == null ? 0 : (long)counter.count();
    }

    private void require(final boolean condition, final String message)
    {
        if (!condition)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), message);
        }
    }

    /** One size against a fresh in-process cluster sized for it; the cluster goes away with its keys. */
    private boolean runLocal(
        final long size, final int warmup, final String runPrefix, final List<Row> rows, final List<String> notes)
    {
        final int segmentsPerNode = Math.max(1, (replicas + nodes - 1) / nodes);
        final long valuesStored = (long)count * (op == Op.mixed ? 2 : 1) + warmup +
            (warmup > 0 && warmupSeconds > 0 ? 2L * warmupRoundValues(size, warmup) : 0);
        final long segmentSize = segmentSizeOption != null ? segmentSizeOption :
            localSegmentSize(valuesStored * size * replicas, nodes * segmentsPerNode);
        info.printf(Locale.ROOT, "cluster: in-process, %d node(s) x %d segment(s) of %s%s%s, data tokens %s%s%n",
            nodes, segmentsPerNode, Units.formatBytes(segmentSize), preTouch ? ", pre-touched" : "",
            hugePagesNote(),
            dataTokens ? "on" : "off", clientOptions.tls.settings(null).isEnabled() ? ", TLS on every channel" : "");
        info.flush();
        try (LocalCluster cluster = LocalCluster.builder()
            .nodes(nodes)
            .segmentsPerNode(segmentsPerNode)
            .segmentSizeBytes(segmentSize)
            .masterContext(LocalCluster.defaultMasterContext().dataTokens(dataTokens))
            .nodeContext(ctx -> ctx.preTouch(preTouch).hugePages(hugePages).transport(nodeTransport())
                .localTransfers(localTransfers))
            .tls(clientOptions.tls.settings(tlsClientAuth), clientOptions.tls.settings(null))
            .start())
        {
            final GranaryClient client = cluster.newClient(clientConfig(cluster.masterAddress()));
            info.printf(Locale.ROOT, "transport: client %s, node %s%n",
                TransferEngines.resolve(clientOptions.transport, clientOptions.tls.settings(null).isEnabled())
                    .name().toLowerCase(Locale.ROOT),
                cluster.nodes().get(0).transferServer().transport().name().toLowerCase(Locale.ROOT));
            final MeterRegistry registry = cluster.master().meterRegistry();
            masterReader = () -> MasterTimes.of(registry);
            try
            {
                return runSize(client, size, warmup, runPrefix, rows, notes);
            }
            finally
            {
                masterReader = null;
            }
        }
    }

    /**
     * Runs a measured phase; with --local or --master-metrics, also notes what it cost the master ({@link MasterTimes}).
     * A master whose metrics cannot be read gets a line saying why; the phase counts all the same. Always notes what
     * this JVM spent compiling and collecting during the phase ({@link JvmTimes}).
     */
    private Phase measured(final Phase phase, final String sizeLabel, final List<String> masterLines)
    {
        final MasterReader reader = masterReader;
        final String label = sizeLabel + " " + phase.name;
        MasterTimes before = null;
        String unavailable = null;
        try
        {
            before = reader == null ? null : reader.read();
        }
        catch (final IOException ex)
        {
            unavailable = ex.getMessage();
        }
        final JvmTimes jvmBefore = JvmTimes.now();
        phase.run(concurrency);
        final JvmTimes jvm = JvmTimes.now().since(jvmBefore);
        if (before != null)
        {
            try
            {
                masterLines.add(reader.read().since(before).describe(label, phase.elapsedNs));
            }
            catch (final IOException ex)
            {
                unavailable = ex.getMessage();
            }
        }
        if (unavailable != null)
        {
            masterLines.add("master: " + label + ": metrics unavailable: " + unavailable);
        }
        masterLines.add(jvm.describe(label, phase.elapsedNs, Runtime.getRuntime().availableProcessors(),
            phase.count));
        return phase;
    }

    /** Where {@link #measured} reads the master's timers. */
    @FunctionalInterface
    private interface MasterReader
    {
        MasterTimes read() throws IOException;
    }

    /** The transport of --local nodes: the client's --transport (a node serves native TCP for an RDMA client). */
    private TransportKind nodeTransport()
    {
        return clientOptions.transport == TransportKind.RDMA ? TransportKind.NATIVE : clientOptions.transport;
    }

    /** The baseline (if asked), warmup and measured phases of one size; adds its rows, returns whether it failed. */
    private boolean runSize(
        final GranaryClient client,
        final long sizeLong,
        final int warmup,
        final String runPrefix,
        final List<Row> rows,
        final List<String> notes)
    {
        final int size = (int)sizeLong;
        final String sizeLabel = Converters.formatSize(size);
        final String prefix = runPrefix + sizeLabel + "/";
        final PutOptions options = PutOptions.builder().replicas(replicas).build();
        info.printf(Locale.ROOT, "bench: %d x %s values, concurrency %d, batch %d, replicas %d, op %s%s, warmup %d, "
                + "checksums %s, caller-driven %s, %d lane(s) per node, slices of %s, keys %s*%n", count,
            Units.formatBytes(size), concurrency, batch, replicas, op,
            op == Op.mixed ? " (read ratio " + readRatio + ")" : "", warmup, checksums ? "on" : "off",
            callerDriven ? "on" : "off", lanesPerPeer, Units.formatBytes(sliceBytes), prefix);
        info.flush();

        if (warmup > 0)
        {
            warmUp(client, prefix, size, warmup, options);
        }
        // The limit is measured right before and right after the phases (this machine's speed drifts within a
        // minute); each phase is compared with the higher of the two.
        final Map<Shape, LoopbackBaseline.Result> before = baseline ? measureBaseline(size, "before", false) : Map.of();
        final Map<Shape, LoopbackBaseline.Result> coldBefore =
            baselineCold ? measureBaseline(size, "before", true) : Map.of();

        final List<Phase> phases = new ArrayList<>();
        final List<String> masterLines = new ArrayList<>();
        final Phase puts = new Phase("put", count, batch,
            (first, n, outcome) -> put(client, prefix, first, n, size, options, outcome));
        if (op == Op.put || op == Op.both)
        {
            phases.add(measured(puts, sizeLabel, masterLines));
        }
        else
        {
            puts.run(concurrency); // unmeasured: the values the get or mixed phase reads
        }
        if (op == Op.get || op == Op.both)
        {
            phases.add(measured(new Phase("get", count, batch,
                (first, n, outcome) -> get(client, prefix, first, n, size, verifyAll, outcome)), sizeLabel, masterLines));
        }
        if (op == Op.mixed)
        {
            phases.add(measured(new Phase("mixed", count, batch,
                (first, n, outcome) -> mixed(client, prefix, first, n, size, options, outcome)), sizeLabel, masterLines));
        }

        final Map<Shape, LoopbackBaseline.Result> limits =
            baseline ? higherOf(before, measureBaseline(size, "after", false)) : Map.of();
        final Map<Shape, LoopbackBaseline.Result> coldLimits =
            baselineCold ? higherOf(coldBefore, measureBaseline(size, "after", true)) : Map.of();
        boolean failed = puts.errors.get() > 0;
        for (final Phase p : phases)
        {
            final Row row = new Row(sizeLabel, size, p, limitOf(p.name, limits), limitOf(p.name, coldLimits));
            rows.add(row);
            if (json)
            {
                out.println(row.json(this));
            }
            failed |= p.errors.get() > 0 || p.mismatches.get() > 0;
        }
        if (puts.errors.get() > 0 && !phases.contains(puts))
        {
            info.println("put (unmeasured): " + puts.errors.get() + " errors, first: " + puts.firstError.get());
        }
        for (final Phase p : phases)
        {
            if (p.firstError.get() != null)
            {
                info.println(p.name + ": " + p.errors.get() + " errors, first: " + p.firstError.get());
            }
            if (p.valuesOfKind[KIND_GET].get() > 0 && (p.name.equals("get") || p.name.equals("mixed")))
            {
                info.printf(Locale.ROOT, "verify: %d of %d values read compared byte for byte, %d differed%s%n",
                    p.verified.get(), p.valuesOfKind[KIND_GET].get(), p.mismatches.get(),
                    verifyAll ? "" : " (--verify compares all)");
            }
            if (p.name.equals("mixed"))
            {
                notes.add(mixedNote(sizeLabel, p));
            }
        }
        masterLines.forEach(info::println);
        if (clientOptions.transport == TransportKind.RDMA)
        {
            info.printf(Locale.ROOT, "rdma: %d READs completed one-sided so far, %d failed there (the rest went over " +
                "TCP: WRITEs, READs with access tokens, segments a node refused RDMA for)%n",
                engineCount(RDMA_READS_METER, "ok"), engineCount(RDMA_READS_METER, "failed"));
        }
        if (engineMeters != null && localTransfers)
        {
            info.printf(Locale.ROOT, "local: %d transfers moved with process_vm_readv/writev so far, %d that could " +
                "(reads, writes of 64 KiB or more) took TCP instead (a node on another host or refusing, a changed " +
                "segment table, a failed copy)%n", engineCount(LOCAL_TRANSFERS_METER, "local"),
                engineCount(LOCAL_TRANSFERS_METER, "tcp"));
        }
        info.flush();
        out.flush();
        return failed;
    }

    /** Per shape, the result with the higher throughput. */
    static Map<Shape, LoopbackBaseline.Result> higherOf(
        final Map<Shape, LoopbackBaseline.Result> a, final Map<Shape, LoopbackBaseline.Result> b)
    {
        final Map<Shape, LoopbackBaseline.Result> higher = new EnumMap<>(Shape.class);
        higher.putAll(a);
        b.forEach((shape, result) -> higher.merge(shape, result,
            (x, y) -> y.gbPerSecond() > x.gbPerSecond() ? y : x));
        return higher;
    }

    /**
     * The loopback limit of this run's shapes; {@code when} ("before" or "after" the phases) labels its lines. With
     * {@code cold}, the put and get shapes with the server side's values spread over the cold region.
     */
    private Map<Shape, LoopbackBaseline.Result> measureBaseline(final int size, final String when, final boolean cold)
    {
        if (cold && coldRegion == null)
        {
            coldRegion = ByteBuffer.allocateDirect((int)baselineColdRegion); // zeroed, so every page is in memory
        }
        final List<Shape> shapes = new ArrayList<>();
        if (op != Op.get)
        {
            shapes.add(Shape.PUT);
        }
        if (op != Op.put)
        {
            shapes.add(Shape.GET);
        }
        if (baselineStream && !cold)
        {
            shapes.add(Shape.STREAM);
        }
        final Duration measured = Duration.ofNanos((long)(baselineSeconds * 1e9));
        final Duration warmup = Duration.ofNanos(Math.min(1_000_000_000L, measured.toNanos() / 3));
        final Map<Shape, LoopbackBaseline.Result> results = new EnumMap<>(Shape.class);
        for (final Shape shape : shapes)
        {
            final LoopbackBaseline.Result result =
                LoopbackBaseline.measure(shape, size, concurrency, batch, warmup, measured, cold ? coldRegion : null);
            results.put(shape, result);
            if (json)
            {
                out.println(baselineJson(result, when));
                out.flush();
            }
            else
            {
                info.println("baseline " + when + ": loopback " + result.describe());
                info.flush();
            }
        }
        return results;
    }

    /**
     * The limit in GB/s for a phase: its shape's baseline; for mixed, the time-weighted mix of the get and put
     * limits (a byte share R at the get limit and 1 - R at the put limit). Null without a baseline.
     */
    private Double limitOf(final String phase, final Map<Shape, LoopbackBaseline.Result> limits)
    {
        if (limits.isEmpty())
        {
            return null;
        }
        switch (phase)
        {
            case "put":
                return limits.get(Shape.PUT).gbPerSecond();
            case "get":
                return limits.get(Shape.GET).gbPerSecond();
            default:
                return mixedLimit(readRatio, limits.get(Shape.GET).gbPerSecond(), limits.get(Shape.PUT).gbPerSecond());
        }
    }

    /** GB/s of a mix moving a share {@code readRatio} of its bytes at {@code getGbps} and the rest at {@code putGbps}. */
    static double mixedLimit(final double readRatio, final double getGbps, final double putGbps)
    {
        final double secondsPerGb = (readRatio > 0 ? readRatio / getGbps : 0) +
            (readRatio < 1 ? (1 - readRatio) / putGbps : 0);
        return 1 / secondsPerGb;
    }

    /**
     * Values per round of the timed warmup: {@code warmup} of them, but at least 16 MiB and at most 256 MiB of
     * values (at least one), so that a round's removal (one RemoveByRegex) comes every few thousand small values, not
     * every few. The segment of --local holds two rounds besides the warmup values.
     */
    static int warmupRoundValues(final long size, final int warmup)
    {
        return (int)Math.max(1, Math.min(WARMUP_ROUND_BYTES / size, Math.max(warmup, MIN_WARMUP_ROUND_BYTES / size)));
    }

    /**
     * Puts and gets the {@code warmup} values (kept, under {@code prefix + "w"}), then, until --warmup-seconds have
     * passed since the start, rounds of puts of fresh keys (removed after their round, so memory stays bounded: they
     * are never read, hence never leased) each followed by gets of as many kept values. Prints the rounds and errors.
     */
    private void warmUp(
        final GranaryClient client, final String prefix, final int size, final int warmup, final PutOptions options)
    {
        final long start = System.nanoTime();
        final long deadline = start + warmupSeconds * 1_000_000_000L;
        // Each phase's errors are taken as it ends and the phase dropped (a phase holds three histograms).
        final WarmupErrors errors = new WarmupErrors();
        errors.add(new Phase("warmup", warmup, batch,
            (first, n, outcome) -> put(client, prefix + "w", first, n, size, options, outcome)).run(concurrency));
        errors.add(new Phase("warmup", warmup, batch,
            (first, n, outcome) -> get(client, prefix + "w", first, n, size, true, outcome)).run(concurrency));
        final int roundValues = warmupRoundValues(size, warmup);
        final int roundGets = Math.min(roundValues, warmup); // of the warmup values, which stay
        long values = 2L * warmup;
        long putCalls = calls(warmup);
        long getCalls = calls(warmup);
        long removed = 0;
        int rounds = 0;
        double roundJitShare = -1; // of the last round; -1 before the first or when it cannot be measured
        int quietRounds = 0; // rounds in a row, up to the last, with the JIT below --warmup-jit-quiet
        final long capNs = Math.max(warmupSeconds, MAX_CALL_WARMUP_SECONDS) * 1_000_000_000L;
        while (warmupSeconds > 0 && System.nanoTime() - start < capNs &&
            (System.nanoTime() < deadline || Math.min(putCalls, getCalls) < warmupCalls ||
                jitBusy(warmupJitQuiet, quietRounds)))
        {
            final long roundStart = System.nanoTime();
            final JvmTimes roundJvm = JvmTimes.now();
            rounds++;
            final String roundPrefix = prefix + "w" + rounds + "-";
            errors.add(new Phase("warmup", roundValues, batch,
                (first, n, outcome) -> put(client, roundPrefix, first, n, size, options, outcome)).run(concurrency));
            errors.add(new Phase("warmup", roundGets, batch,
                (first, n, outcome) -> get(client, prefix + "w", first, n, size, false, outcome)).run(concurrency));
            removed += client.removeByRegex(Pattern.quote(roundPrefix) + "[0-9]+");
            values += roundValues + roundGets;
            putCalls += calls(roundValues);
            getCalls += calls(roundGets);
            roundJitShare = JvmTimes.now().since(roundJvm).compilerShare(System.nanoTime() - roundStart,
                Runtime.getRuntime().availableProcessors());
            quietRounds = roundJitShare < warmupJitQuiet ? quietRounds + 1 : 0;
        }
        info.printf(Locale.ROOT, "warmup: %d values put or read in %.1f s, %d timed round(s) of %d puts and %d gets, "
            + "%d round values removed, %d put calls and %d get calls%s%n", values, (System.nanoTime() - start) / 1e9,
            rounds, roundValues, roundGets, removed, putCalls, getCalls, roundJitShare < 0 ? "" :
                String.format(Locale.ROOT, ", the JIT took %.1f %% of the cores in the last round", roundJitShare));
        if (errors.count > 0)
        {
            info.println("warmup: " + errors.count + " errors, first: " + errors.first);
        }
        info.flush();
    }

    /**
     * Whether --warmup-jit-quiet {@code quietPercent} keeps the timed warmup going: until the JIT took less than that
     * share of the cores ({@link JvmTimes#compilerShare}) in {@link #JIT_QUIET_ROUNDS} rounds in a row
     * ({@code quietRounds}; a round where the share cannot be measured counts as quiet). 0 never does.
     */
    static boolean jitBusy(final double quietPercent, final int quietRounds)
    {
        return quietPercent > 0 && quietRounds < JIT_QUIET_ROUNDS;
    }

    /** Calls a phase of {@code values} values makes (calls of up to --batch values). */
    private long calls(final int values)
    {
        return (values + batch - 1) / batch;
    }

    /** The errors of the warmup's phases, and the first one's message. */
    private static final class WarmupErrors
    {
        long count;
        String first;

        void add(final Phase phase)
        {
            count += phase.errors.get();
            if (first == null)
            {
                first = phase.firstError.get();
            }
        }
    }

    // ------------------------------------------------------------------------------------------- operations

    private void put(
        final GranaryClient client,
        final String prefix,
        final int first,
        final int n,
        final int size,
        final PutOptions options,
        final Outcome outcome)
    {
        outcome.kind = KIND_PUT;
        if (n == 1 && batch == 1)
        {
            client.put(prefix + first, value(first, size), options);
            outcome.ok = 1;
            return;
        }
        final List<String> keys = new ArrayList<>(n);
        final List<ByteBuffer> values = new ArrayList<>(n);
        for (int i = first; i < first + n; i++)
        {
            keys.add(prefix + i);
            values.add(value(i, size));
        }
        final List<OpResult<Void>> results = client.putBatch(keys, values, options);
        for (final OpResult<Void> result : results)
        {
            outcome.onResult(result);
        }
    }

    /** Gets values {@code first .. first + n - 1} of {@code prefix}; compares every 10th or, with {@code all}, each. */
    private void get(
        final GranaryClient client,
        final String prefix,
        final int first,
        final int n,
        final int size,
        final boolean all,
        final Outcome outcome)
    {
        outcome.kind = KIND_GET;
        if (n == 1 && batch == 1)
        {
            final ByteBuffer buffer = Phase.landing(size);
            buffer.clear();
            final int length = client.getInto(prefix + first, buffer);
            outcome.ok = 1;
            if (all || first % 10 == 0)
            {
                buffer.flip();
                outcome.onCompared(length == size && buffer.mismatch(value(first, size)) < 0);
            }
            return;
        }
        // Batches land in the caller's direct memory, as an engine loading pages into its KV buffers does.
        final List<String> keys = new ArrayList<>(n);
        final List<ByteBuffer> dsts = new ArrayList<>(n);
        final ByteBuffer region = Phase.landing((long)n * size);
        for (int i = 0; i < n; i++)
        {
            keys.add(prefix + (first + i));
            final ByteBuffer dst = region.duplicate();
            dst.clear().position(i * size).limit((i + 1) * size);
            dsts.add(dst.slice());
        }
        final List<OpResult<Integer>> results = client.getBatchInto(keys, dsts);
        for (int j = 0; j < results.size(); j++)
        {
            final OpResult<Integer> result = results.get(j);
            outcome.onResult(result);
            final int index = first + j;
            if (result.ok() && (all || index % 10 == 0))
            {
                final ByteBuffer landed = dsts.get(j).flip();
                outcome.onCompared(result.value() == size && landed.mismatch(value(index, size)) < 0);
            }
        }
    }

    /** A get of pre-filled values or a put of new ones, chosen per call by a hash of its position. */
    private void mixed(
        final GranaryClient client,
        final String prefix,
        final int first,
        final int n,
        final int size,
        final PutOptions options,
        final Outcome outcome)
    {
        if (isRead(first / batch, readRatio))
        {
            get(client, prefix, first, n, size, verifyAll, outcome);
        }
        else
        {
            put(client, prefix + "m", first, n, size, options, outcome);
        }
    }

    /** Whether call {@code callIndex} of a mixed phase is a get: a fixed pseudo-random choice with P(get) = ratio. */
    static boolean isRead(final int callIndex, final double readRatio)
    {
        long z = callIndex * 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        z ^= z >>> 31;
        return (z >>> 11) * 0x1.0p-53 < readRatio;
    }

    /** The value of key {@code index}: a slice of the shared pattern at a per-index offset (read-only view). */
    private ByteBuffer value(final int index, final int size)
    {
        final int offset = (int)(((long)index * OFFSET_STRIDE) % PATTERN_SPAN);
        return pattern.duplicate().position(offset).limit(offset + size).slice();
    }

    // ------------------------------------------------------------------------------------------- output

    private void printTable(final List<Row> rows)
    {
        final boolean withLimit = baseline;
        final List<String> headers = new ArrayList<>(List.of("SIZE", "PHASE", ">OPS", ">ERRORS", ">SECONDS",
            ">OPS/S", ">GB/S", ">GIB/S", ">P50(MS)", ">P99(MS)", ">P99.9(MS)", ">MAX(MS)"));
        if (withLimit)
        {
            headers.add(">LIMIT(GB/S)");
            headers.add(">%LIMIT");
        }
        if (baselineCold)
        {
            headers.add(">COLD(GB/S)");
            headers.add(">%COLD");
        }
        final Table table = new Table(headers.toArray(new String[0]));
        for (final Row r : rows)
        {
            final List<Object> cells = new ArrayList<>(List.of(r.sizeLabel, r.phase, r.values, r.errors,
                fixed(r.seconds, 3), fixed(r.valuesPerSecond(), 1), fixed(r.gbPerSecond(), 3),
                fixed(r.gbPerSecond() * 1e9 / (1L << 30), 3), fixed(r.p50Ms, 3), fixed(r.p99Ms, 3),
                fixed(r.p999Ms, 3), fixed(r.maxMs, 3)));
            if (withLimit)
            {
                cells.add(r.limitGbps == null ? null : fixed(r.limitGbps, 3));
                cells.add(r.percentOfLimit() == null ? null : fixed(r.percentOfLimit(), 1));
            }
            if (baselineCold)
            {
                cells.add(r.coldLimitGbps == null ? null : fixed(r.coldLimitGbps, 3));
                cells.add(r.percentOf(r.coldLimitGbps) == null ? null : fixed(r.percentOf(r.coldLimitGbps), 1));
            }
            table.row(cells.toArray());
        }
        table.print(out, "");
        if (batch > 1)
        {
            out.println("ops = values; latency is per call of up to " + batch + " values (putBatch/getBatchInto)");
        }
        if (withLimit)
        {
            out.println("LIMIT: plain Java sockets over loopback, same shape (get: 64 B request -> value; put: value "
                + "-> 64 B ack), size, concurrency and batch, the higher of the runs before and after the phases; "
                + "mixed: the read-ratio mix of both");
        }
        if (baselineCold)
        {
            out.println("COLD: the same sockets with the server side's values read from or landed at distinct places of "
                + "a " + Units.formatBytes(baselineColdRegion) + " region (main memory, as a storage node's segment), "
                + "not one cached buffer");
        }
    }

    private String mixedNote(final String sizeLabel, final Phase p)
    {
        final long gets = p.valuesOfKind[KIND_GET].get();
        final long puts = p.valuesOfKind[KIND_PUT].get();
        return String.format(Locale.ROOT, "mixed %s: %d values got (%.1f%%), %d put; get %s; put %s", sizeLabel, gets,
            gets + puts == 0 ? 0.0 : 100.0 * gets / (gets + puts), puts, p.latencyOfKind[KIND_GET].p50p99(),
            p.latencyOfKind[KIND_PUT].p50p99());
    }

    private String baselineJson(final LoopbackBaseline.Result r, final String when)
    {
        final Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("type", "baseline");
        fields.put("when", when);
        fields.put("size", r.valueBytes());
        fields.put("shape", r.shape().label());
        fields.put("memory", r.cold() ? "cold" : "hot");
        fields.put("concurrency", r.concurrency());
        fields.put("batch", r.batch());
        fields.put("values", r.values());
        fields.put("roundTrips", r.roundTrips());
        fields.put("seconds", r.seconds());
        fields.put("valuesPerSec", r.valuesPerSecond());
        fields.put("gbPerSec", r.gbPerSecond());
        fields.put("p50Ms", r.p50Ms());
        fields.put("p99Ms", r.p99Ms());
        fields.put("p999Ms", r.p999Ms());
        fields.put("maxMs", r.maxMs());
        return jsonObject(fields);
    }

    /** A one-line JSON object of strings, numbers (non-finite ones as null), booleans and nulls. */
    static String jsonObject(final Map<String, Object> fields)
    {
        final StringBuilder json = new StringBuilder("{");
        for (final Map.Entry<String, Object> field : fields.entrySet())
        {
            if (json.length() > 1)
            {
                json.append(',');
            }
            appendString(json, field.getKey());
            json.append(':');
            final Object value = field.getValue();
            if (value == null || (value instanceof Double && !Double.isFinite((Double)value)))
            {
                json.append("null");
            }
            else if (value instanceof Number || value instanceof Boolean)
            {
                json.append(value);
            }
            else
            {
                appendString(json, value.toString());
            }
        }
        return json.append('}').toString();
    }

    private static void appendString(final StringBuilder json, final String text)
    {
        json.append('"');
        for (int i = 0; i < text.length(); i++)
        {
            final char c = text.charAt(i);
            if (c == '"' || c == '\\')
            {
                json.append('\\').append(c);
            }
            else if (c < 0x20)
            {
                json.append(String.format(Locale.ROOT, "\\u%04x", (int)c));
            }
            else
            {
                json.append(c);
            }
        }
        json.append('"');
    }

    // ------------------------------------------------------------------------------------------- cleanup, sizing

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

    /** ", huge pages" when the --local segments will be advised huge pages, else why not (off, or unavailable). */
    private String hugePagesNote()
    {
        if (hugePages == HugePages.OFF)
        {
            return ", 4 KiB pages (--huge-pages off)";
        }
        final String cause = HugePages.unavailabilityCause();
        return cause == null ? ", huge pages advised" : ", 4 KiB pages (" + cause + ")";
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

    // ------------------------------------------------------------------------------------------- model

    /** One table row: a measured phase of one size and, with --baseline, its limit. */
    private static final class Row
    {
        final String sizeLabel;
        final int size;
        final String phase;
        final long values;
        final long errors;
        final double seconds;
        final double p50Ms;
        final double p99Ms;
        final double p999Ms;
        final double maxMs;
        final long gets;
        final long puts;
        final Double limitGbps;
        final Double coldLimitGbps;

        Row(final String sizeLabel, final int size, final Phase p, final Double limitGbps, final Double coldLimitGbps)
        {
            this.sizeLabel = sizeLabel;
            this.size = size;
            this.phase = p.name;
            this.values = p.okValues.get();
            this.errors = p.errors.get();
            this.seconds = p.elapsedNs / 1e9;
            this.p50Ms = p.latency.percentileMs(50);
            this.p99Ms = p.latency.percentileMs(99);
            this.p999Ms = p.latency.percentileMs(99.9);
            this.maxMs = p.latency.maxMs();
            this.gets = p.valuesOfKind[KIND_GET].get();
            this.puts = p.valuesOfKind[KIND_PUT].get();
            this.limitGbps = limitGbps;
            this.coldLimitGbps = coldLimitGbps;
        }

        double valuesPerSecond()
        {
            return seconds == 0 ? 0 : values / seconds;
        }

        double gbPerSecond()
        {
            return seconds == 0 ? 0 : values * (double)size / seconds / 1e9;
        }

        Double percentOfLimit()
        {
            return percentOf(limitGbps);
        }

        /** This row's GB/s as a percentage of {@code limit}; null without one. */
        Double percentOf(final Double limit)
        {
            return limit == null || limit <= 0 ? null : 100 * gbPerSecond() / limit;
        }

        String json(final BenchCommand bench)
        {
            final Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("type", "granary");
            fields.put("size", size);
            fields.put("phase", phase);
            fields.put("concurrency", bench.concurrency);
            fields.put("batch", bench.batch);
            fields.put("replicas", bench.replicas);
            fields.put("checksums", bench.checksums);
            fields.put("caller_driven", bench.callerDriven);
            if (bench.local)
            {
                fields.put("dataTokens", bench.dataTokens);
            }
            fields.put("values", values);
            fields.put("errors", errors);
            fields.put("seconds", seconds);
            fields.put("valuesPerSec", valuesPerSecond());
            fields.put("gbPerSec", gbPerSecond());
            fields.put("gibPerSec", gbPerSecond() * 1e9 / (1L << 30));
            fields.put("p50Ms", p50Ms);
            fields.put("p99Ms", p99Ms);
            fields.put("p999Ms", p999Ms);
            fields.put("maxMs", maxMs);
            if (phase.equals("mixed"))
            {
                fields.put("readRatio", bench.readRatio);
                fields.put("gets", gets);
                fields.put("puts", puts);
            }
            fields.put("limitGbPerSec", limitGbps);
            fields.put("pctLimit", percentOfLimit());
            if (bench.baselineCold)
            {
                fields.put("coldLimitGbPerSec", coldLimitGbps);
                fields.put("pctColdLimit", percentOf(coldLimitGbps));
            }
            return jsonObject(fields);
        }
    }

    /** One call of a phase: {@code n} values from index {@code first}; reports into the caller's outcome. */
    @FunctionalInterface
    interface Operation
    {
        /** @throws GranaryException when the whole call failed (every value of it counts as an error). */
        void apply(int first, int n, Outcome outcome);
    }

    /** What one call did; owned by one caller thread and reset before each call. */
    static final class Outcome
    {
        int kind;
        int ok;
        int errors;
        int compared;
        int mismatches;
        String firstError;

        void reset()
        {
            kind = KIND_GET;
            ok = 0;
            errors = 0;
            compared = 0;
            mismatches = 0;
            firstError = null;
        }

        void onResult(final OpResult<?> result)
        {
            if (result.ok())
            {
                ok++;
            }
            else
            {
                errors++;
                if (firstError == null)
                {
                    firstError = result.error().name() + ": " + result.message();
                }
            }
        }

        void onCompared(final boolean matched)
        {
            compared++;
            mismatches += matched ? 0 : 1;
        }
    }

    /** One measured (or warmup) phase: {@code count} values in calls of {@code batch}, shared by C caller threads. */
    static final class Phase
    {
        private static final ThreadLocal<ByteBuffer> BUFFERS = new ThreadLocal<>();
        /** The caller's index in its phase, for its part of the --pool. */
        private static final ThreadLocal<Integer> CALLER = new ThreadLocal<>();
        private static volatile ByteBuffer pool;
        private static volatile int poolParts = 1;

        final String name;
        final int count;
        final int batch;
        final Operation operation;
        final LatencyRecorder latency = new LatencyRecorder();
        final LatencyRecorder[] latencyOfKind = {new LatencyRecorder(), new LatencyRecorder()};
        final AtomicLong[] valuesOfKind = {new AtomicLong(), new AtomicLong()};
        final AtomicLong okValues = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        final AtomicLong verified = new AtomicLong();
        final AtomicLong mismatches = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>();
        long elapsedNs;

        Phase(final String name, final int count, final int batch, final Operation operation)
        {
            this.name = name;
            this.count = count;
            this.batch = batch;
            this.operation = operation;
        }

        /** Gets land in random slots of {@code memory} (null: in {@link #buffer}), split into {@code parts} callers. */
        static void pool(final ByteBuffer memory, final int parts)
        {
            pool = memory;
            poolParts = parts;
        }

        /**
         * Where a get of {@code size} bytes lands: a random {@code size}-aligned slot of the caller's part of the pool,
         * or the caller's own buffer without a pool.
         */
        static ByteBuffer landing(final long size)
        {
            final ByteBuffer memory = pool;
            final Integer caller = CALLER.get();
            if (memory == null || caller == null)
            {
                return buffer(size);
            }
            final int part = memory.capacity() / poolParts;
            final int slots = (int)(part / size);
            final int at = caller * part + java.util.concurrent.ThreadLocalRandom.current().nextInt(slots) * (int)size;
            return memory.duplicate().position(at).limit(at + (int)size).slice();
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
            final int calls = (int)(((long)count + batch - 1) / batch);
            final AtomicInteger next = new AtomicInteger();
            final CountDownLatch start = new CountDownLatch(1);
            final LatencyRecorder[][] recorders = new LatencyRecorder[concurrency][];
            final Thread[] threads = new Thread[concurrency];
            for (int t = 0; t < concurrency; t++)
            {
                final LatencyRecorder[] byKind = {new LatencyRecorder(), new LatencyRecorder()};
                recorders[t] = byKind;
                final int caller = t;
                threads[t] = new Thread(() ->
                {
                    CALLER.set(caller);
                    awaitUninterruptibly(start);
                    final Outcome outcome = new Outcome();
                    for (int c = next.getAndIncrement(); c < calls; c = next.getAndIncrement())
                    {
                        final int first = c * batch;
                        final int n = Math.min(batch, count - first);
                        outcome.reset();
                        final long t0 = System.nanoTime();
                        try
                        {
                            operation.apply(first, n, outcome);
                        }
                        catch (final GranaryException ex)
                        {
                            errors.addAndGet(n);
                            firstError.compareAndSet(null, Granary.errorLine(ex).substring("error: ".length()));
                            continue;
                        }
                        byKind[outcome.kind].record(System.nanoTime() - t0);
                        valuesOfKind[outcome.kind].addAndGet(n);
                        okValues.addAndGet(outcome.ok);
                        if (outcome.errors > 0)
                        {
                            errors.addAndGet(outcome.errors);
                            firstError.compareAndSet(null, outcome.firstError);
                        }
                        verified.addAndGet(outcome.compared);
                        mismatches.addAndGet(outcome.mismatches);
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
            for (final LatencyRecorder[] byKind : recorders)
            {
                for (int k = 0; k < byKind.length; k++)
                {
                    latency.add(byKind[k]);
                    latencyOfKind[k].add(byKind[k]);
                }
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
