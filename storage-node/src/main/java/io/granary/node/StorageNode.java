package io.granary.node;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.admin.NodeAdminServer;
import io.granary.node.admin.NodeMetrics;
import io.granary.node.master.MasterLink;
import io.granary.node.segment.HugePages;
import io.granary.node.segment.LedgerBudget;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.node.transfer.AccessTokenVerifier;
import io.granary.node.transfer.TransferMetrics;
import io.granary.node.transfer.TransferServer;
import io.granary.transfer.TransportKind;
import io.granary.protocol.FrameDescriptor;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.UncheckedIOException;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;

/**
 * The storage-node role: holds off-heap segments, serves transfer frames against them and keeps them
 * registered with the master. It never decides placement. Launched and closed by one owner thread;
 * accessors are safe from any thread.
 */
public final class StorageNode implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(StorageNode.class);

    private final Context ctx;
    private final String nodeId = UUID.randomUUID().toString();
    private final SegmentRegistry registry;
    private final TransferServer transferServer;
    private final String name;
    private final String endpoint;
    private final MasterLink masterLink;
    private final PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final NodeMetrics metrics;
    private final NodeAdminServer admin;
    private volatile boolean closed;

    private StorageNode(final Context ctx)
    {
        this.ctx = ctx;
        registry = new SegmentRegistry(
            ctx.ledgerBudgetBytes() > 0 ? new LedgerBudget(ctx.ledgerBudgetBytes()) : LedgerBudget.ofHeap());
        transferServer = new TransferServer(ctx.host(), ctx.transferPort(), registry, ctx.maxFrameBytes(),
            ctx.ioThreads(), ctx.preferEpoll(), new TransferMetrics(meters), new AccessTokenVerifier(ctx.clock()),
            ctx.tls(), ctx.transport()).localTransfers(ctx.localTransfers()).start();
        metrics = new NodeMetrics(meters, transferServer, registry, this::masterLink);
        MasterLink link = null;
        NodeAdminServer adminServer = null;
        try
        {
            name = ctx.name() != null ? ctx.name() : "node-" + transferServer.port();
            endpoint = endpoint(ctx.host(), transferServer.port());
            for (int i = 0; i < ctx.segmentCount(); i++)
            {
                final Segment segment = registry.allocate(name + "/seg" + i, ctx.segmentSizeBytes(), ctx.hugePages());
                if (ctx.preTouch())
                {
                    segment.preTouch();
                }
            }
            logHugePages(ctx);
            logLedgerBudget(ctx);
            link = new MasterLink(ctx.masterAddress(), nodeId, name, endpoint, registry, registry.segments(),
                ctx.heartbeatIntervalMs(), ctx.masterRpcTimeoutMs(), ctx.reconnectBackoffMs(),
                ctx.reconnectBackoffMaxMs(), ctx.clock(), ctx.tls());
            link.tokenKeyListener(transferServer.tokenVerifier()::updateKey);
            if (ctx.adminPort() >= 0)
            {
                try
                {
                    adminServer = new NodeAdminServer(ctx.host(), ctx.adminPort(), this, meters);
                }
                catch (final UncheckedIOException ex)
                {
                    throw new IllegalStateException(ex.getMessage() + ": " + ex.getCause().getMessage(), ex);
                }
            }
            link.start();
        }
        catch (final RuntimeException | Error ex)
        {
            if (adminServer != null)
            {
                adminServer.close();
            }
            if (link != null)
            {
                link.close();
            }
            transferServer.close();
            if (transferServer.isTerminated())
            {
                registry.close();
            }
            metrics.close();
            meters.close();
            throw ex;
        }
        masterLink = link;
        admin = adminServer;
        LOG.info("storage node {} ({}) serving {} segment(s) of {} bytes on {}, admin {}, master {}",
            name, nodeId, ctx.segmentCount(), ctx.segmentSizeBytes(), endpoint,
            admin == null ? "disabled" : endpoint(ctx.host(), admin.port()), ctx.masterAddress());
    }

    /** Validates the context and starts the node. @throws IllegalArgumentException for a bad setting. */
    public static StorageNode launch(final Context ctx)
    {
        return new StorageNode(ctx.conclude());
    }

    /** Starts a node configured from system properties (see {@link Configuration}) and runs until killed. */
    public static void main(final String[] args) throws InterruptedException
    {
        final StorageNode node = launch(new Context());
        final CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            node.close();
            stopped.countDown();
        }, "granary-node-shutdown"));
        stopped.await();
    }

    /** Random id of this process incarnation. */
    public String nodeId()
    {
        return nodeId;
    }

    public String name()
    {
        return name;
    }

    /** "host:port" of the transfer server, as advertised to the master. */
    public String endpoint()
    {
        return endpoint;
    }

    public int transferPort()
    {
        return transferServer.port();
    }

    public List<Segment> segments()
    {
        return registry.segments();
    }

    public TransferServer transferServer()
    {
        return transferServer;
    }

    public MasterLink masterLink()
    {
        return masterLink;
    }

    public Context context()
    {
        return ctx;
    }

    /** The bound admin HTTP port, or -1 when disabled. */
    public int adminPort()
    {
        return admin == null ? -1 : admin.port();
    }

    /** The admin endpoints, or null when the admin port is disabled. */
    public NodeAdminServer admin()
    {
        return admin;
    }

    /** The node's metrics registry (what {@code /metrics} serves). */
    public PrometheusMeterRegistry meterRegistry()
    {
        return meters;
    }

    /** The metrics in the Prometheus text format (also with the admin port disabled). */
    public String scrapeMetrics()
    {
        return meters.scrape();
    }

    public boolean isClosed()
    {
        return closed;
    }

    /**
     * Unmounts from the master, stops the transfer server and then frees segment memory (only once no
     * transfer thread can touch it). Idempotent.
     */
    @Override
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        if (admin != null)
        {
            admin.close();
        }
        masterLink.close();
        transferServer.close();
        if (transferServer.isTerminated())
        {
            registry.close();
        }
        else
        {
            LOG.error("transfer threads of node {} did not stop; leaving segment memory allocated", name);
        }
        metrics.close();
        meters.close();
        LOG.info("storage node {} stopped", name);
    }

    /**
     * The ledgers' heap budget against what the segments could hold in 4 KiB values (the smallest common KV page): an
     * operator learns at start, not at the first refused COMMIT, that small values need more heap.
     */
    private void logLedgerBudget(final Context ctx)
    {
        final long budget = registry.ledgerBudget().limitBytes();
        final long perValue = LedgerBudget.entryBytes(64); // a key of about 60 bytes, no group id
        final long fits = budget / perValue;
        final long smallValues = ctx.segmentCount() * (ctx.segmentSizeBytes() / 4096);
        LOG.info("ledgers: heap budget {} MiB{}: about {} values at {} bytes each (keys of ~60 bytes); the segments " +
                "hold up to {} values of 4 KiB{}", budget >> 20,
            ctx.ledgerBudgetBytes() > 0 ? "" : " (" + Math.round(LedgerBudget.HEAP_FRACTION * 100) + " % of the max heap)",
            fits, perValue, smallValues,
            fits < smallValues ? ": with values that small, give the node more heap (-Xmx)" : "");
    }

    /**
     * Says once at start whether the segments got huge pages: with pre-touch the smaps figure is final, without it it
     * grows as values are first written.
     */
    private void logHugePages(final Context ctx)
    {
        final List<Segment> segments = registry.segments();
        final long advised = segments.stream().filter(Segment::hugePagesAdvised).count();
        if (advised == 0)
        {
            final String cause = ctx.hugePages() == HugePages.OFF ? "--huge-pages off" : HugePages.unavailabilityCause();
            LOG.info("segments use 4 KiB pages ({})", cause == null ? "the kernel refused the advice" : cause);
            return;
        }
        final long backed = java.util.Arrays.stream(Segment.hugePageBytes(segments)).sum();
        final long total = segments.stream().mapToLong(Segment::sizeBytes).sum();
        LOG.info("segments advised transparent huge pages: {} MiB of {} MiB backed by huge pages now{}",
            backed >> 20, total >> 20, ctx.preTouch() ? "" : " (more as values are first written)");
    }

    static String endpoint(final String host, final int port)
    {
        return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
    }

    /**
     * Settings of a {@link StorageNode}: fluent setters, defaults from {@link Configuration} (system
     * properties or built-in values), {@link #conclude()} validates. Not thread safe; hand it to
     * {@link StorageNode#launch(Context)} and leave it alone afterwards.
     */
    public static final class Context
    {
        private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._:-]{0,127}");

        private String masterAddress = Configuration.masterAddress();
        private String host = Configuration.host();
        private int transferPort = Configuration.transferPort();
        private long segmentSizeBytes = Configuration.segmentSizeBytes();
        private int segmentCount = Configuration.segmentCount();
        private String name = Configuration.name();
        private long heartbeatIntervalMs = Configuration.heartbeatIntervalMs();
        private long masterRpcTimeoutMs = Configuration.masterRpcTimeoutMs();
        private long reconnectBackoffMs = Configuration.reconnectBackoffMs();
        private long reconnectBackoffMaxMs = Configuration.reconnectBackoffMaxMs();
        private int maxFrameBytes = Configuration.maxFrameBytes();
        private int ioThreads = Configuration.ioThreads();
        private boolean preTouch = Configuration.preTouch();
        private boolean localTransfers = Configuration.localTransfers();
        private HugePages hugePages = Configuration.hugePages();
        private boolean preferEpoll = Configuration.preferEpoll();
        private TransportKind transport = Configuration.transport();
        private TlsSettings tls = Configuration.tls();
        private int adminPort = Configuration.adminPort();
        private Clock clock = Clock.SYSTEM;
        private long ledgerBudgetBytes;

        /**
         * Checks every setting and derives the rest (segment size rounded up to the page size).
         *
         * @return this.
         * @throws IllegalArgumentException naming the first bad setting.
         */
        public Context conclude()
        {
            require(masterAddress != null && !masterAddress.isBlank(),
                "masterAddress is required (host:port of the master, or -D" +
                Configuration.MASTER_ADDRESS_PROP_NAME + ")");
            masterAddress = masterAddress.trim();
            require(isHostPort(masterAddress), "masterAddress must be host:port, was '" + masterAddress + "'");
            require(host != null && !host.isBlank(), "host must not be empty");
            host = host.trim();
            require(transport != null, "transport must be auto, java, native or rdma");
            require(hugePages != null, "hugePages must be auto, on or off");
            require(transferPort >= 0 && transferPort <= 65535,
                "transferPort must be in 0..65535, was " + transferPort);
            require(segmentSizeBytes >= Configuration.SEGMENT_SIZE_MIN &&
                segmentSizeBytes <= Configuration.SEGMENT_SIZE_MAX,
                "segmentSizeBytes must be in " + Configuration.SEGMENT_SIZE_MIN + ".." +
                Configuration.SEGMENT_SIZE_MAX + ", was " + segmentSizeBytes);
            segmentSizeBytes = Segment.alignToPage(segmentSizeBytes);
            require(segmentCount >= 1 && segmentCount <= Configuration.SEGMENT_COUNT_MAX,
                "segmentCount must be in 1.." + Configuration.SEGMENT_COUNT_MAX + ", was " + segmentCount);
            if (name != null && name.isBlank())
            {
                name = null;
            }
            require(name == null || NAME.matcher(name).matches(),
                "name must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit, was '" + name + "'");
            require(heartbeatIntervalMs >= 10 && heartbeatIntervalMs <= 600_000,
                "heartbeatIntervalMs must be in 10..600000, was " + heartbeatIntervalMs);
            require(masterRpcTimeoutMs >= 10 && masterRpcTimeoutMs <= 600_000,
                "masterRpcTimeoutMs must be in 10..600000, was " + masterRpcTimeoutMs);
            require(reconnectBackoffMs >= 1 && reconnectBackoffMs <= 600_000,
                "reconnectBackoffMs must be in 1..600000, was " + reconnectBackoffMs);
            require(reconnectBackoffMaxMs >= reconnectBackoffMs && reconnectBackoffMaxMs <= 600_000,
                "reconnectBackoffMaxMs must be in reconnectBackoffMs (" + reconnectBackoffMs + ")..600000, was " +
                reconnectBackoffMaxMs);
            require(maxFrameBytes >= Configuration.MAX_FRAME_BYTES_MIN &&
                maxFrameBytes <= FrameDescriptor.MAX_FRAME_LENGTH_LIMIT,
                "maxFrameBytes must be in " + Configuration.MAX_FRAME_BYTES_MIN + ".." +
                FrameDescriptor.MAX_FRAME_LENGTH_LIMIT + ", was " + maxFrameBytes);
            require(ioThreads >= 1 && ioThreads <= 256, "ioThreads must be in 1..256, was " + ioThreads);
            require(adminPort >= -1 && adminPort <= 65535, "adminPort must be in -1..65535, was " + adminPort);
            require(clock != null, "clock must not be null");
            require(ledgerBudgetBytes >= 0, "ledgerBudgetBytes must be 0 (70 % of the max heap) or positive, was " +
                ledgerBudgetBytes);
            require(tls != null, "tls must not be null");
            tls.validateForServer(); // names the --tls-* flag and file at fault
            return this;
        }

        private static boolean isHostPort(final String address)
        {
            final int colon = address.lastIndexOf(':');
            if (colon <= 0 || colon == address.length() - 1)
            {
                return false;
            }
            try
            {
                final int port = Integer.parseInt(address.substring(colon + 1));
                return port >= 1 && port <= 65535;
            }
            catch (final NumberFormatException ex)
            {
                return false;
            }
        }

        private static void require(final boolean condition, final String message)
        {
            if (!condition)
            {
                throw new IllegalArgumentException(message);
            }
        }

        /** Master gRPC address, "host:port". Required. */
        public String masterAddress()
        {
            return masterAddress;
        }

        public Context masterAddress(final String masterAddress)
        {
            this.masterAddress = masterAddress;
            return this;
        }

        /** Address the transfer server binds to and advertises; default 127.0.0.1. */
        public String host()
        {
            return host;
        }

        public Context host(final String host)
        {
            this.host = host;
            return this;
        }

        /** Transfer server port; 0 (default) picks an ephemeral port. */
        public int transferPort()
        {
            return transferPort;
        }

        public Context transferPort(final int transferPort)
        {
            this.transferPort = transferPort;
            return this;
        }

        /** Size of each segment (default 1 GiB, at least 1 MiB); rounded up to 4 KiB by conclude(). */
        public long segmentSizeBytes()
        {
            return segmentSizeBytes;
        }

        public Context segmentSizeBytes(final long segmentSizeBytes)
        {
            this.segmentSizeBytes = segmentSizeBytes;
            return this;
        }

        /** Number of segments (default 1). */
        public int segmentCount()
        {
            return segmentCount;
        }

        public Context segmentCount(final int segmentCount)
        {
            this.segmentCount = segmentCount;
            return this;
        }

        /** Node name, or null (default) for "node-&lt;transferPort&gt;" resolved after bind. */
        public String name()
        {
            return name;
        }

        public Context name(final String name)
        {
            this.name = name;
            return this;
        }

        /** Interval between heartbeats (default 1000 ms); a shorter interval asked by the master wins. */
        public long heartbeatIntervalMs()
        {
            return heartbeatIntervalMs;
        }

        public Context heartbeatIntervalMs(final long heartbeatIntervalMs)
        {
            this.heartbeatIntervalMs = heartbeatIntervalMs;
            return this;
        }

        /** Deadline of each call to the master (default 3000 ms). */
        public long masterRpcTimeoutMs()
        {
            return masterRpcTimeoutMs;
        }

        public Context masterRpcTimeoutMs(final long masterRpcTimeoutMs)
        {
            this.masterRpcTimeoutMs = masterRpcTimeoutMs;
            return this;
        }

        /** First retry delay while the master is unreachable or refuses (default 100 ms); doubles per failure. */
        public long reconnectBackoffMs()
        {
            return reconnectBackoffMs;
        }

        public Context reconnectBackoffMs(final long reconnectBackoffMs)
        {
            this.reconnectBackoffMs = reconnectBackoffMs;
            return this;
        }

        /** Cap of the retry delay (default 2000 ms); every delay is drawn from [d/2, d] to spread the nodes out. */
        public long reconnectBackoffMaxMs()
        {
            return reconnectBackoffMaxMs;
        }

        public Context reconnectBackoffMaxMs(final long reconnectBackoffMaxMs)
        {
            this.reconnectBackoffMaxMs = reconnectBackoffMaxMs;
            return this;
        }

        /** Longest range one frame may carry (default 16 MiB, at most 1 GiB). */
        public int maxFrameBytes()
        {
            return maxFrameBytes;
        }

        public Context maxFrameBytes(final int maxFrameBytes)
        {
            this.maxFrameBytes = maxFrameBytes;
            return this;
        }

        /** Heap the segments' ledgers may take before COMMITs are refused; 0 (the default) = 70 % of the max heap. */
        public long ledgerBudgetBytes()
        {
            return ledgerBudgetBytes;
        }

        public Context ledgerBudgetBytes(final long ledgerBudgetBytes)
        {
            this.ledgerBudgetBytes = ledgerBudgetBytes;
            return this;
        }

        /** Event-loop threads of the transfer server (default 2). */
        public int ioThreads()
        {
            return ioThreads;
        }

        public Context ioThreads(final int ioThreads)
        {
            this.ioThreads = ioThreads;
            return this;
        }

        /** Touch every page at start so that RSS is committed up front (default true). */
        /**
         * Whether the native transfer server tells clients on this host where segments lie in its memory
         * (LOCAL_CONNECT), so they copy with process_vm_readv/writev instead of loopback TCP (default true; the Java
         * server always refuses). Such a client can read and write this process's memory anyway (same user, ptrace
         * permitted); on a host with Yama's ptrace restriction the node opts in to being read (PR_SET_PTRACER).
         */
        public boolean localTransfers()
        {
            return localTransfers;
        }

        public Context localTransfers(final boolean localTransfers)
        {
            this.localTransfers = localTransfers;
            return this;
        }

        public boolean preTouch()
        {
            return preTouch;
        }

        public Context preTouch(final boolean preTouch)
        {
            this.preTouch = preTouch;
            return this;
        }

        /** Segment memory backed by transparent huge pages: AUTO (default; where available), ON (or fail), OFF. */
        public HugePages hugePages()
        {
            return hugePages;
        }

        public Context hugePages(final HugePages hugePages)
        {
            this.hugePages = hugePages;
            return this;
        }

        /** Transport of the transfer server: AUTO (native when available and TLS is off), JAVA or NATIVE. */
        public TransportKind transport()
        {
            return transport;
        }

        public Context transport(final TransportKind transport)
        {
            this.transport = transport;
            return this;
        }

        /** Use the native epoll transport when available (default true). */
        public boolean preferEpoll()
        {
            return preferEpoll;
        }

        public Context preferEpoll(final boolean preferEpoll)
        {
            this.preferEpoll = preferEpoll;
            return this;
        }

        /**
         * TLS (default off): the transfer server serves TLS with this certificate and key, and the node's link
         * to the master speaks TLS too, presenting the same certificate and verifying the master's against the
         * trust anchors.
         */
        public TlsSettings tls()
        {
            return tls;
        }

        public Context tls(final TlsSettings tls)
        {
            this.tls = tls == null ? TlsSettings.DISABLED : tls;
            return this;
        }

        /** Admin HTTP port (/health, /ready, /metrics); -1 (default unless the property is set) disables it. */
        public int adminPort()
        {
            return adminPort;
        }

        public Context adminPort(final int adminPort)
        {
            this.adminPort = adminPort;
            return this;
        }

        public Clock clock()
        {
            return clock;
        }

        public Context clock(final Clock clock)
        {
            this.clock = clock;
            return this;
        }

        @Override
        public String toString()
        {
            return "StorageNode.Context{masterAddress=" + masterAddress + ", host=" + host + ", transferPort=" +
                transferPort + ", segmentSizeBytes=" + segmentSizeBytes + ", segmentCount=" + segmentCount +
                ", name=" + name + ", heartbeatIntervalMs=" + heartbeatIntervalMs + ", masterRpcTimeoutMs=" +
                masterRpcTimeoutMs + ", reconnectBackoffMs=" + reconnectBackoffMs + ", reconnectBackoffMaxMs=" +
                reconnectBackoffMaxMs + ", maxFrameBytes=" + maxFrameBytes + ", ioThreads=" + ioThreads +
                ", preTouch=" + preTouch + ", localTransfers=" + localTransfers + ", hugePages=" + hugePages + ", preferEpoll=" + preferEpoll + ", transport=" + transport +
                ", adminPort=" + adminPort + ", tls=" + tls + ", ledgerBudgetBytes=" + ledgerBudgetBytes + '}';
        }
    }
}
