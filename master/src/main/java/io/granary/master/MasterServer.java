package io.granary.master;

import io.granary.common.Clock;
import io.granary.common.Units;
import io.granary.common.tls.GrpcTls;
import io.granary.common.tls.TlsContexts;
import io.granary.common.tls.TlsSettings;
import io.granary.master.admin.AdminHttpServer;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.evict.Evictor;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.MetadataStore;
import io.granary.master.rpc.LookupServer;
import io.granary.master.rpc.MalformedRequests;
import io.granary.master.rpc.MasterGrpcService;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The master role: owns all metadata (segments, objects, leases) and none of the data. Serves the
 * gRPC control plane and the admin HTTP port, runs housekeeping (node expiry, abandoned puts,
 * soft-pin expiry) on one background thread and watermark eviction on another. Launch with {@link #launch(Context)}; {@link #close()} stops everything.
 */
public final class MasterServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterServer.class);
    public static final String VERSION = "0.1.0";

    /** Master configuration (Aeron style): fluent accessors, defaults from {@link Configuration}. */
    public static final class Context
    {
        private String host = Configuration.HOST_DEFAULT;
        private int port = Configuration.PORT_DEFAULT;
        private int adminPort = Configuration.ADMIN_PORT_DEFAULT;
        private int lookupPort = Configuration.LOOKUP_PORT_DEFAULT;
        private Duration leaseTtl = Configuration.LEASE_TTL_DEFAULT;
        private Duration softPinDefaultTtl = Configuration.SOFT_PIN_DEFAULT_TTL_DEFAULT;
        private Duration softPinMaxTtl = Configuration.SOFT_PIN_MAX_TTL_DEFAULT;
        private boolean allowEvictSoftPinned = Configuration.ALLOW_EVICT_SOFT_PINNED_DEFAULT;
        private double evictionHighWatermark = Configuration.EVICTION_HIGH_WATERMARK_DEFAULT;
        private double evictionRatio = Configuration.EVICTION_RATIO_DEFAULT;
        private Duration nodeTtl = Configuration.NODE_TTL_DEFAULT;
        private Duration heartbeatInterval = Configuration.HEARTBEAT_INTERVAL_DEFAULT;
        private Duration putDiscardTimeout = Configuration.PUT_DISCARD_TIMEOUT_DEFAULT;
        private Duration putReleaseTimeout = Configuration.PUT_RELEASE_TIMEOUT_DEFAULT;
        private int metadataShards = Configuration.METADATA_SHARDS_DEFAULT;
        private int allocationGranularity = Configuration.ALLOCATION_GRANULARITY_DEFAULT;
        private int listKeysLimit = Configuration.LIST_KEYS_LIMIT_DEFAULT;
        private boolean housekeeping = true;
        private TlsSettings tls = TlsSettings.DISABLED;
        private Clock clock = Clock.SYSTEM;

        public String host()
        {
            return host;
        }

        public Context host(final String host)
        {
            this.host = host;
            return this;
        }

        public int port()
        {
            return port;
        }

        /** gRPC port; 0 picks a free one. */
        public Context port(final int port)
        {
            this.port = port;
            return this;
        }

        public int adminPort()
        {
            return adminPort;
        }

        /** Admin HTTP port; 0 picks a free one, -1 disables it. */
        public Context adminPort(final int adminPort)
        {
            this.adminPort = adminPort;
            return this;
        }

        public int lookupPort()
        {
            return lookupPort;
        }

        /** Port of the framed lookup protocol (hot read-only calls); 0 picks a free one, -1 disables it. */
        public Context lookupPort(final int lookupPort)
        {
            this.lookupPort = lookupPort;
            return this;
        }

        public Duration leaseTtl()
        {
            return leaseTtl;
        }

        public Context leaseTtl(final Duration leaseTtl)
        {
            this.leaseTtl = leaseTtl;
            return this;
        }

        public Duration softPinDefaultTtl()
        {
            return softPinDefaultTtl;
        }

        public Context softPinDefaultTtl(final Duration softPinDefaultTtl)
        {
            this.softPinDefaultTtl = softPinDefaultTtl;
            return this;
        }

        public Duration softPinMaxTtl()
        {
            return softPinMaxTtl;
        }

        public Context softPinMaxTtl(final Duration softPinMaxTtl)
        {
            this.softPinMaxTtl = softPinMaxTtl;
            return this;
        }

        public boolean allowEvictSoftPinned()
        {
            return allowEvictSoftPinned;
        }

        public Context allowEvictSoftPinned(final boolean allowEvictSoftPinned)
        {
            this.allowEvictSoftPinned = allowEvictSoftPinned;
            return this;
        }

        public double evictionHighWatermark()
        {
            return evictionHighWatermark;
        }

        public Context evictionHighWatermark(final double evictionHighWatermark)
        {
            this.evictionHighWatermark = evictionHighWatermark;
            return this;
        }

        public double evictionRatio()
        {
            return evictionRatio;
        }

        public Context evictionRatio(final double evictionRatio)
        {
            this.evictionRatio = evictionRatio;
            return this;
        }

        public Duration nodeTtl()
        {
            return nodeTtl;
        }

        public Context nodeTtl(final Duration nodeTtl)
        {
            this.nodeTtl = nodeTtl;
            return this;
        }

        public Duration heartbeatInterval()
        {
            return heartbeatInterval;
        }

        /** The heartbeat interval the master advertises to nodes when they mount. */
        public Context heartbeatInterval(final Duration heartbeatInterval)
        {
            this.heartbeatInterval = heartbeatInterval;
            return this;
        }

        public Duration putDiscardTimeout()
        {
            return putDiscardTimeout;
        }

        public Context putDiscardTimeout(final Duration putDiscardTimeout)
        {
            this.putDiscardTimeout = putDiscardTimeout;
            return this;
        }

        public Duration putReleaseTimeout()
        {
            return putReleaseTimeout;
        }

        public Context putReleaseTimeout(final Duration putReleaseTimeout)
        {
            this.putReleaseTimeout = putReleaseTimeout;
            return this;
        }

        public int metadataShards()
        {
            return metadataShards;
        }

        public Context metadataShards(final int metadataShards)
        {
            this.metadataShards = metadataShards;
            return this;
        }

        public int allocationGranularity()
        {
            return allocationGranularity;
        }

        public Context allocationGranularity(final int allocationGranularity)
        {
            this.allocationGranularity = allocationGranularity;
            return this;
        }

        public int listKeysLimit()
        {
            return listKeysLimit;
        }

        public Context listKeysLimit(final int listKeysLimit)
        {
            this.listKeysLimit = listKeysLimit;
            return this;
        }

        public boolean housekeeping()
        {
            return housekeeping;
        }

        /** Run the background housekeeping thread (tests driving time by hand turn it off). */
        public Context housekeeping(final boolean housekeeping)
        {
            this.housekeeping = housekeeping;
            return this;
        }

        /** TLS on the gRPC and lookup ports (default off); with client auth, clients must present certificates. */
        public TlsSettings tls()
        {
            return tls;
        }

        public Context tls(final TlsSettings tls)
        {
            this.tls = tls == null ? TlsSettings.DISABLED : tls;
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

        /**
         * Validates every setting against the others.
         *
         * @throws IllegalArgumentException naming the flag and the rule it breaks.
         */
        public Context conclude()
        {
            require(host != null && !host.isBlank(), "--host must not be empty");
            require(port >= 0 && port <= 65535, "--port must be in 0..65535, was " + port);
            require(adminPort >= -1 && adminPort <= 65535, "--admin-port must be in -1..65535, was " + adminPort);
            require(lookupPort >= -1 && lookupPort <= 65535, "--lookup-port must be in -1..65535, was " + lookupPort);
            requirePositive(leaseTtl, "--lease-ttl");
            requirePositive(softPinDefaultTtl, "--soft-pin-default-ttl");
            requirePositive(softPinMaxTtl, "--soft-pin-max-ttl");
            require(softPinDefaultTtl.compareTo(softPinMaxTtl) <= 0,
                "--soft-pin-default-ttl (" + fmt(softPinDefaultTtl) + ") must not exceed --soft-pin-max-ttl (" +
                fmt(softPinMaxTtl) + ")");
            require(evictionHighWatermark > 0 && evictionHighWatermark <= 1.0,
                "--eviction-high-watermark must be in (0, 1], was " + evictionHighWatermark);
            require(evictionRatio > 0 && evictionRatio <= 1.0, "--eviction-ratio must be in (0, 1], was " + evictionRatio);
            requirePositive(nodeTtl, "--node-ttl");
            requirePositive(heartbeatInterval, "--heartbeat-interval");
            require(heartbeatInterval.compareTo(nodeTtl) < 0,
                "--heartbeat-interval (" + fmt(heartbeatInterval) + ") must be shorter than --node-ttl (" +
                fmt(nodeTtl) + ")");
            requirePositive(putDiscardTimeout, "--put-discard-timeout");
            requirePositive(putReleaseTimeout, "--put-release-timeout");
            require(putReleaseTimeout.compareTo(putDiscardTimeout) >= 0,
                "--put-release-timeout (" + fmt(putReleaseTimeout) + ") must be at least --put-discard-timeout (" +
                fmt(putDiscardTimeout) + ")");
            require(metadataShards >= 1 && metadataShards <= 65536 && Integer.bitCount(metadataShards) == 1,
                "--metadata-shards must be a power of two in 1..65536, was " + metadataShards);
            require(allocationGranularity >= 8 && allocationGranularity <= 1 << 20 &&
                Integer.bitCount(allocationGranularity) == 1,
                "--allocation-granularity must be a power of two in 8..1048576, was " + allocationGranularity);
            require(listKeysLimit >= 1, "--list-keys-limit must be positive, was " + listKeysLimit);
            require(clock != null, "clock must not be null");
            tls.validateForServer(); // names the --tls-* flag and file at fault
            return this;
        }

        private static void requirePositive(final Duration d, final String flag)
        {
            require(d != null && !d.isNegative() && !d.isZero(),
                flag + " must be a positive duration, was " + (d == null ? "null" : fmt(d)));
        }

        private static String fmt(final Duration d)
        {
            return Units.formatDuration(d);
        }

        private static void require(final boolean condition, final String message)
        {
            if (!condition)
            {
                throw new IllegalArgumentException(message);
            }
        }

        MetadataStore.Settings storeSettings()
        {
            final MetadataStore.Settings s = new MetadataStore.Settings();
            s.shardCount = metadataShards;
            s.leaseTtlNs = leaseTtl.toNanos();
            s.softPinDefaultTtlNs = softPinDefaultTtl.toNanos();
            s.softPinMaxTtlNs = softPinMaxTtl.toNanos();
            s.putDiscardTimeoutNs = putDiscardTimeout.toNanos();
            s.putReleaseTimeoutNs = putReleaseTimeout.toNanos();
            s.listKeysLimit = listKeysLimit;
            return s;
        }
    }

    private final Context ctx;
    private final SegmentRegistry registry;
    private final MetadataStore store;
    private final Evictor evictor;
    private final MasterRequestHandler handler;
    private final EventLoopGroup bossGroup;
    private final EventLoopGroup workerGroup;
    private final Server grpcServer;
    private final LookupServer lookupServer;
    private final AdminHttpServer admin;
    private final ScheduledExecutorService housekeeper;
    private final ScheduledExecutorService evictionThread;
    private volatile boolean closed;

    private MasterServer(final Context ctx)
    {
        this.ctx = ctx;
        final int granularity = ctx.allocationGranularity();
        this.registry = new SegmentRegistry(ctx.clock(), (id, name, size) ->
            new SegmentAllocation(id, name, new TlsfExtentAllocator(size, granularity)));
        this.store = new MetadataStore(ctx.storeSettings(), ctx.clock(), registry);
        this.evictor = new Evictor(store, registry, ctx.evictionHighWatermark(), ctx.evictionRatio(),
            ctx.allowEvictSoftPinned()).attach();
        this.handler = new MasterRequestHandler(this, store, new BatchProbe(store), registry);
        final MasterGrpcService service = new MasterGrpcService(handler);

        final boolean epoll = Epoll.isAvailable();
        final Class<? extends ServerChannel> channelType =
            epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        this.bossGroup = new MultiThreadIoEventLoopGroup(
            1, new DefaultThreadFactory("granary-master-accept", true),
            epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
        this.workerGroup = new MultiThreadIoEventLoopGroup(
            Math.min(4, Runtime.getRuntime().availableProcessors()), new DefaultThreadFactory("granary-master-rpc", true),
            epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());

        // Handlers never block (shard locks are short), so they run on the event loop: no hand-off.
        final NettyServerBuilder grpcBuilder = NettyServerBuilder.forAddress(new InetSocketAddress(ctx.host(), ctx.port()))
            .channelType(channelType)
            .bossEventLoopGroup(bossGroup)
            .workerEventLoopGroup(workerGroup)
            .directExecutor()
            .maxInboundMessageSize(64 << 20)
            .permitKeepAliveTime(10, TimeUnit.SECONDS)
            .permitKeepAliveWithoutCalls(true)
            .addService(MalformedRequests.guard(service.bindService()));
        final io.netty.handler.ssl.SslContext lookupTls;
        try
        {
            if (ctx.tls().isEnabled())
            {
                grpcBuilder.sslContext(GrpcTls.serverContext(ctx.tls()));
            }
            lookupTls = TlsContexts.serverContext(ctx.tls());
        }
        catch (final IllegalArgumentException ex)
        {
            shutdownGroups();
            throw ex;
        }
        this.grpcServer = grpcBuilder.build();
        try
        {
            grpcServer.start();
        }
        catch (final IOException ex)
        {
            shutdownGroups();
            throw new UncheckedIOException("cannot bind the master gRPC port " + ctx.host() + ":" + ctx.port(), ex);
        }

        LookupServer lookup = null;
        if (ctx.lookupPort() >= 0)
        {
            try
            {
                lookup = new LookupServer(
                    ctx.host(), ctx.lookupPort(), bossGroup, workerGroup, channelType, handler, lookupTls);
            }
            catch (final RuntimeException ex)
            {
                grpcServer.shutdownNow();
                shutdownGroups();
                throw ex;
            }
        }
        this.lookupServer = lookup;

        AdminHttpServer adminServer = null;
        if (ctx.adminPort() >= 0)
        {
            try
            {
                adminServer = new AdminHttpServer(ctx.host(), ctx.adminPort(), this);
            }
            catch (final RuntimeException ex)
            {
                if (lookupServer != null)
                {
                    lookupServer.close();
                }
                grpcServer.shutdownNow();
                shutdownGroups();
                throw ex;
            }
        }
        this.admin = adminServer;

        if (ctx.housekeeping())
        {
            housekeeper = Executors.newSingleThreadScheduledExecutor(new DefaultThreadFactory("granary-master-housekeeper", true));
            final long periodMs = Math.max(10, Math.min(1000, ctx.nodeTtl().toMillis() / 4));
            housekeeper.scheduleWithFixedDelay(this::housekeepSafely, periodMs, periodMs, TimeUnit.MILLISECONDS);
            evictionThread = Executors.newSingleThreadScheduledExecutor(new DefaultThreadFactory("granary-master-evictor", true));
            evictionThread.scheduleWithFixedDelay(this::evictSafely, 100, 100, TimeUnit.MILLISECONDS);
        }
        else
        {
            housekeeper = null;
            evictionThread = null;
        }
    }

    /** Validates the context and starts the master. */
    public static MasterServer launch(final Context ctx)
    {
        ctx.conclude();
        final MasterServer server = new MasterServer(ctx);
        LOG.info("master started: grpc={}:{} lookup={} admin={} shards={} lease-ttl={} node-ttl={} tls={}",
            ctx.host(), server.grpcPort(), server.lookupPort(), server.adminPort(), ctx.metadataShards(),
            Units.formatDuration(ctx.leaseTtl()), Units.formatDuration(ctx.nodeTtl()),
            ctx.tls().isEnabled() ? "on (client auth " + ctx.tls().clientAuth().flagValue() + ")" : "off");
        return server;
    }

    public Context context()
    {
        return ctx;
    }

    public MetadataStore store()
    {
        return store;
    }

    public SegmentRegistry registry()
    {
        return registry;
    }

    public Evictor evictor()
    {
        return evictor;
    }

    /** The bound gRPC port. */
    public int grpcPort()
    {
        return grpcServer.getPort();
    }

    /** Requests served on the lookup port (0 when disabled). */
    public long lookupRequests()
    {
        return lookupServer == null ? 0 : lookupServer.requests();
    }

    /** The bound lookup port, or -1 when disabled. */
    public int lookupPort()
    {
        return lookupServer == null ? -1 : lookupServer.port();
    }

    /** The bound admin HTTP port, or -1 when disabled. */
    public int adminPort()
    {
        return admin == null ? -1 : admin.port();
    }

    public boolean isClosed()
    {
        return closed;
    }

    /**
     * One round of housekeeping: expire silent nodes (dropping their replicas) and reclaim abandoned
     * puts. Runs on the housekeeper thread; tests with a manual clock call it directly.
     */
    public void housekeep()
    {
        final List<MountedSegment> expired = registry.expire(ctx.nodeTtl().toNanos());
        if (!expired.isEmpty())
        {
            store.purgeSegments(new HashSet<>(expired));
        }
        store.reclaimAbandonedPuts();
        store.expireSoftPins();
    }

    private void evictSafely()
    {
        try
        {
            evictor.maybeEvict();
        }
        catch (final Throwable t)
        {
            LOG.error("eviction round failed; will retry", t);
        }
    }

    private void housekeepSafely()
    {
        try
        {
            housekeep();
        }
        catch (final Throwable t)
        {
            LOG.error("housekeeping failed; will retry", t);
        }
    }

    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        if (housekeeper != null)
        {
            housekeeper.shutdownNow();
            evictionThread.shutdownNow();
        }
        if (admin != null)
        {
            admin.close();
        }
        if (lookupServer != null)
        {
            lookupServer.close();
        }
        grpcServer.shutdown();
        try
        {
            if (!grpcServer.awaitTermination(2, TimeUnit.SECONDS))
            {
                grpcServer.shutdownNow();
                grpcServer.awaitTermination(2, TimeUnit.SECONDS);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            grpcServer.shutdownNow();
        }
        shutdownGroups();
        LOG.info("master stopped");
    }

    private void shutdownGroups()
    {
        bossGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        workerGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
