package io.granary.master;

import io.granary.common.Clock;
import io.granary.common.Units;
import io.granary.common.tls.GrpcTls;
import io.granary.common.tls.TlsContexts;
import io.granary.common.tls.TlsSettings;
import io.granary.master.admin.AdminHttpServer;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.evict.EvictionPolicy;
import io.granary.master.evict.Evictor;
import io.granary.master.events.EventDispatcher;
import io.granary.master.events.EventJournal;
import io.granary.master.events.zmq.ZmqEndpoints;
import io.granary.master.events.zmq.ZmqEventPublisher;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.MetadataStore;
import io.granary.master.metrics.MasterMetrics;
import io.granary.master.rpc.LookupServer;
import io.granary.master.rpc.MalformedRequests;
import io.granary.master.rpc.MasterGrpcService;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.master.rpc.RpcMetrics;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.master.token.TokenIssuer;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Limits;
import io.grpc.Server;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * The master role: owns all metadata (segments, objects, leases) and none of the data. Serves the
 * gRPC control plane and the admin HTTP port, runs housekeeping (node expiry, abandoned puts,
 * soft-pin expiry) on one background thread and watermark eviction on another. Launch with {@link #launch(Context)}; {@link #close()} stops everything.
 */
public final class MasterServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterServer.class);
    public static final String VERSION = "0.1.0";
    /** At most one INFO line summing up evictions per this interval. */
    private static final long EVICTION_SUMMARY_INTERVAL_NS = TimeUnit.SECONDS.toNanos(10);

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
        private EvictionPolicy evictionPolicy = EvictionPolicy.fromFlag(Configuration.EVICTION_POLICY_DEFAULT);
        private Duration nodeTtl = Configuration.NODE_TTL_DEFAULT;
        private Duration heartbeatInterval = Configuration.HEARTBEAT_INTERVAL_DEFAULT;
        private Duration putDiscardTimeout = Configuration.PUT_DISCARD_TIMEOUT_DEFAULT;
        private Duration putReleaseTimeout = Configuration.PUT_RELEASE_TIMEOUT_DEFAULT;
        private int metadataShards = Configuration.METADATA_SHARDS_DEFAULT;
        private long maxObjects = Configuration.MAX_OBJECTS_DEFAULT;
        private Map<String, Long> tenantQuotas = Map.of();
        private long defaultTenantQuota = Configuration.DEFAULT_TENANT_QUOTA_DEFAULT;
        private int allocationGranularity = Configuration.ALLOCATION_GRANULARITY_DEFAULT;
        private int listKeysLimit = Configuration.LIST_KEYS_LIMIT_DEFAULT;
        private int readyAfterNodes = Configuration.READY_AFTER_NODES_DEFAULT;
        private boolean dataTokens = Configuration.DATA_TOKENS_DEFAULT;
        private String tokenKeyFile = Configuration.TOKEN_KEY_FILE_DEFAULT;
        private byte[] tokenKey;
        private boolean events = Configuration.EVENTS_DEFAULT;
        private int eventsBuffer = Configuration.EVENTS_BUFFER_DEFAULT;
        private int eventsSubscriberQueue = Configuration.EVENTS_SUBSCRIBER_QUEUE_DEFAULT;
        private int eventsMaxSubscribers = Configuration.EVENTS_MAX_SUBSCRIBERS_DEFAULT;
        private String eventsZmqEndpoint = Configuration.EVENTS_ZMQ_ENDPOINT_DEFAULT;
        private String eventsZmqReplayEndpoint = Configuration.EVENTS_ZMQ_REPLAY_ENDPOINT_DEFAULT;
        private String eventsZmqTopic = Configuration.EVENTS_ZMQ_TOPIC_DEFAULT;
        private int eventsZmqReplayBatches = Configuration.EVENTS_ZMQ_REPLAY_BATCHES_DEFAULT;
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

        public EvictionPolicy evictionPolicy()
        {
            return evictionPolicy;
        }

        /** How eviction orders what it takes (see {@link EvictionPolicy}). */
        public Context evictionPolicy(final EvictionPolicy evictionPolicy)
        {
            this.evictionPolicy = evictionPolicy;
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

        /** The object budget as set: 0 derives it from the heap ({@link #effectiveMaxObjects()}). */
        public long maxObjects()
        {
            return maxObjects;
        }

        public Context maxObjects(final long maxObjects)
        {
            this.maxObjects = maxObjects;
            return this;
        }

        /** Byte quotas of named tenants ({@link Configuration#TENANT_QUOTAS_PROP}). */
        public Map<String, Long> tenantQuotas()
        {
            return tenantQuotas;
        }

        public Context tenantQuotas(final Map<String, Long> tenantQuotas)
        {
            this.tenantQuotas = Map.copyOf(tenantQuotas);
            return this;
        }

        /** The byte quota of every tenant not named in {@link #tenantQuotas()}; 0 = none. */
        public long defaultTenantQuota()
        {
            return defaultTenantQuota;
        }

        public Context defaultTenantQuota(final long bytes)
        {
            this.defaultTenantQuota = bytes;
            return this;
        }

        /** The object budget in force: {@link #maxObjects()}, or derived from this JVM's max heap when that is 0. */
        public long effectiveMaxObjects()
        {
            return maxObjects > 0 ? maxObjects : objectsForHeap(Runtime.getRuntime().maxMemory());
        }

        /** The object budget derived from a max heap of {@code maxHeapBytes} (see {@link Configuration#MAX_OBJECTS_PROP}). */
        static long objectsForHeap(final long maxHeapBytes)
        {
            return Math.max(1, maxHeapBytes / 100 * Configuration.METADATA_HEAP_SHARE_PERCENT /
                Configuration.BYTES_PER_OBJECT_ESTIMATE);
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

        public int readyAfterNodes()
        {
            return readyAfterNodes;
        }

        /**
         * Readiness (/ready) waits until this many nodes have registered and reported their ledgers, so that a
         * restarted master is taken into service once it has rebuilt what they hold; 0 = ready at once.
         */
        public Context readyAfterNodes(final int readyAfterNodes)
        {
            this.readyAfterNodes = readyAfterNodes;
            return this;
        }

        public boolean dataTokens()
        {
            return dataTokens;
        }

        /**
         * Whether the master issues data-plane access tokens with every extent it grants and hands each node a key
         * to check them (default true); false issues none and nodes accept frames without one.
         */
        public Context dataTokens(final boolean dataTokens)
        {
            this.dataTokens = dataTokens;
            return this;
        }

        public String tokenKeyFile()
        {
            return tokenKeyFile;
        }

        /**
         * File holding the 256-bit token key as 64 hex digits (whitespace around them ignored), so that tokens stay
         * valid across master restarts; empty (default) draws a random key at every start.
         */
        public Context tokenKeyFile(final String tokenKeyFile)
        {
            this.tokenKeyFile = tokenKeyFile;
            return this;
        }

        /** The key read from {@link #tokenKeyFile()} by {@link #conclude()}, or null for a random one. */
        public byte[] tokenKey()
        {
            return tokenKey == null ? null : tokenKey.clone();
        }

        public boolean events()
        {
            return events;
        }

        /** Publish KV events to SubscribeEvents streams (and the ZeroMQ publisher, when configured); default true. */
        public Context events(final boolean events)
        {
            this.events = events;
            return this;
        }

        public int eventsBuffer()
        {
            return eventsBuffer;
        }

        /** Replay buffer size in events (a power of two): a subscriber resuming within it gets no snapshot. */
        public Context eventsBuffer(final int eventsBuffer)
        {
            this.eventsBuffer = eventsBuffer;
            return this;
        }

        public int eventsSubscriberQueue()
        {
            return eventsSubscriberQueue;
        }

        /** A subscriber more than this many events behind the newest is cut off (at most {@link #eventsBuffer()}). */
        public Context eventsSubscriberQueue(final int eventsSubscriberQueue)
        {
            this.eventsSubscriberQueue = eventsSubscriberQueue;
            return this;
        }

        public int eventsMaxSubscribers()
        {
            return eventsMaxSubscribers;
        }

        public Context eventsMaxSubscribers(final int eventsMaxSubscribers)
        {
            this.eventsMaxSubscribers = eventsMaxSubscribers;
            return this;
        }

        public String eventsZmqEndpoint()
        {
            return eventsZmqEndpoint;
        }

        /** Where the ZeroMQ PUB socket of the vLLM-framed publisher binds (tcp://HOST:PORT); empty = no publisher. */
        public Context eventsZmqEndpoint(final String eventsZmqEndpoint)
        {
            this.eventsZmqEndpoint = eventsZmqEndpoint;
            return this;
        }

        public String eventsZmqReplayEndpoint()
        {
            return eventsZmqReplayEndpoint;
        }

        /** Where the publisher's replay ROUTER socket binds; empty = no replay. */
        public Context eventsZmqReplayEndpoint(final String eventsZmqReplayEndpoint)
        {
            this.eventsZmqReplayEndpoint = eventsZmqReplayEndpoint;
            return this;
        }

        public String eventsZmqTopic()
        {
            return eventsZmqTopic;
        }

        public Context eventsZmqTopic(final String eventsZmqTopic)
        {
            this.eventsZmqTopic = eventsZmqTopic;
            return this;
        }

        public int eventsZmqReplayBatches()
        {
            return eventsZmqReplayBatches;
        }

        public Context eventsZmqReplayBatches(final int eventsZmqReplayBatches)
        {
            this.eventsZmqReplayBatches = eventsZmqReplayBatches;
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
            require(evictionPolicy != null, "--eviction-policy must be oldest-lease or prefix-leaf-first");
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
            require(maxObjects >= 0, "--max-objects must be 0 (from the heap) or positive, was " + maxObjects);
            tenantQuotas.forEach((tenant, bytes) ->
            {
                final String bad = Limits.checkTenant(tenant);
                require(!tenant.isEmpty() && bad == null, "--tenant-quotas names an invalid tenant '" + tenant + "': " +
                    (bad == null ? "empty" : bad));
                require(bytes != null && bytes > 0,
                    "--tenant-quotas must give tenant '" + tenant + "' a quota > 0 bytes, was " + bytes);
            });
            require(defaultTenantQuota >= 0,
                "--default-tenant-quota must be 0 (none) or positive, was " + defaultTenantQuota);
            require(allocationGranularity >= 8 && allocationGranularity <= 1 << 20 &&
                Integer.bitCount(allocationGranularity) == 1,
                "--allocation-granularity must be a power of two in 8..1048576, was " + allocationGranularity);
            require(listKeysLimit >= 1, "--list-keys-limit must be positive, was " + listKeysLimit);
            require(readyAfterNodes >= 0 && readyAfterNodes <= 100_000,
                "--ready-after-nodes must be in 0..100000, was " + readyAfterNodes);
            require(tokenKeyFile != null, "--token-key-file must not be null (empty means a random key)");
            tokenKey = tokenKeyFile.isBlank() ? null : readTokenKey(tokenKeyFile);
            require(eventsBuffer >= 16 && eventsBuffer <= 1 << 24 && Integer.bitCount(eventsBuffer) == 1,
                "--events-buffer must be a power of two in 16..16777216, was " + eventsBuffer);
            require(eventsSubscriberQueue >= 1 && eventsSubscriberQueue <= eventsBuffer,
                "--events-subscriber-queue must be in 1..--events-buffer (" + eventsBuffer + "), was " +
                eventsSubscriberQueue);
            require(eventsMaxSubscribers >= 0 && eventsMaxSubscribers <= 10_000,
                "--events-max-subscribers must be in 0..10000, was " + eventsMaxSubscribers);
            require(eventsZmqEndpoint != null && eventsZmqReplayEndpoint != null && eventsZmqTopic != null,
                "--events-zmq-* must not be null (empty means none)");
            require(eventsZmqEndpoint.isEmpty() || ZmqEndpoints.check(eventsZmqEndpoint) == null,
                "--events-zmq-endpoint " + ZmqEndpoints.check(eventsZmqEndpoint));
            require(eventsZmqReplayEndpoint.isEmpty() || ZmqEndpoints.check(eventsZmqReplayEndpoint) == null,
                "--events-zmq-replay-endpoint " + ZmqEndpoints.check(eventsZmqReplayEndpoint));
            require(eventsZmqReplayEndpoint.isEmpty() || !eventsZmqEndpoint.isEmpty(),
                "--events-zmq-replay-endpoint needs --events-zmq-endpoint");
            require((eventsZmqEndpoint.isEmpty() && eventsZmqReplayEndpoint.isEmpty()) || events,
                "--events-zmq-endpoint needs --events=true");
            require(eventsZmqTopic.length() <= 255, "--events-zmq-topic must be at most 255 characters");
            require(eventsZmqReplayBatches >= 1 && eventsZmqReplayBatches <= 1_000_000,
                "--events-zmq-replay-batches must be in 1..1000000, was " + eventsZmqReplayBatches);
            require(clock != null, "clock must not be null");
            tls.validateForServer(); // names the --tls-* flag and file at fault
            return this;
        }

        /** Reads a key file of 64 hex digits. @throws IllegalArgumentException naming the flag and the problem. */
        static byte[] readTokenKey(final String file)
        {
            final String text;
            try
            {
                final Path path = Path.of(file);
                require(Files.size(path) <= 4096, "--token-key-file " + file + " is too large for a key file");
                text = Files.readString(path, StandardCharsets.US_ASCII).strip();
            }
            catch (final IOException | InvalidPathException ex)
            {
                throw new IllegalArgumentException("--token-key-file " + file + " cannot be read: " + ex, ex);
            }
            require(text.length() == 2 * AccessTokenCodec.KEY_LENGTH && text.chars().allMatch(
                c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')),
                "--token-key-file " + file + " must hold the key as " + 2 * AccessTokenCodec.KEY_LENGTH +
                " hex digits (e.g. from 'openssl rand -hex 32')");
            return HexFormat.of().parseHex(text);
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
            s.maxObjects = effectiveMaxObjects();
            s.tenantQuotaBytes = tenantQuotas;
            s.defaultTenantQuotaBytes = defaultTenantQuota;
            // A token's grant fields are 32-bit: with tokens, no value may be longer than a token can cover.
            s.maxValueBytes = dataTokens ? Math.min(Limits.MAX_VALUE_BYTES, FrameDescriptor.MAX_GRANT_LENGTH) :
                Limits.MAX_VALUE_BYTES;
            return s;
        }
    }

    private final Context ctx;
    private final SegmentRegistry registry;
    private final MetadataStore store;
    private final Evictor evictor;
    private final MasterRequestHandler handler;
    private final BatchProbe probe;
    private final PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final MasterMetrics metrics;
    private final TokenIssuer tokenIssuer;
    private final EventLoopGroup bossGroup;
    private final EventLoopGroup workerGroup;
    private final Server grpcServer;
    private final LookupServer lookupServer;
    private final AdminHttpServer admin;
    private final ScheduledExecutorService housekeeper;
    private final ScheduledExecutorService evictionThread;
    private final String masterId = UUID.randomUUID().toString();
    /** This incarnation's id as a number, carried with every event batch. */
    private final long epoch = epochOf(masterId);
    private final EventJournal eventJournal;
    private final EventDispatcher eventDispatcher;
    private final ZmqEventPublisher zmqPublisher;
    private final long startNs;
    private final Set<String> reportedNodes = ConcurrentHashMap.newKeySet();
    private final LongAdder ledgerReports = new LongAdder();
    private final LongAdder discardedReports = new LongAdder();
    private volatile boolean closed;

    private MasterServer(final Context ctx)
    {
        this.ctx = ctx;
        this.startNs = ctx.clock().nanoTime();
        final int granularity = ctx.allocationGranularity();
        this.registry = new SegmentRegistry(ctx.clock(), (id, name, size) ->
            new SegmentAllocation(id, name, new TlsfExtentAllocator(size, granularity)));
        this.store = new MetadataStore(ctx.storeSettings(), ctx.clock(), registry);
        this.tokenIssuer = ctx.dataTokens() ?
            new TokenIssuer(ctx.tokenKey() != null ? ctx.tokenKey() : AccessTokenCodec.newRandomKey()) : null;
        store.replicaTokens(tokenIssuer);
        this.evictor = new Evictor(store, registry, ctx.evictionHighWatermark(), ctx.evictionRatio(),
            ctx.allowEvictSoftPinned(), ctx.evictionPolicy()).attach();
        this.probe = new BatchProbe(store);
        this.handler = new MasterRequestHandler(this, store, probe, registry);
        this.metrics = new MasterMetrics(meters, store, registry, evictor, probe);
        if (ctx.events())
        {
            this.eventJournal = new EventJournal(ctx.eventsBuffer(), epoch, ctx.clock());
            store.eventJournal(eventJournal);
            final EventDispatcher.Settings eventSettings = new EventDispatcher.Settings();
            eventSettings.maxLagEvents = ctx.eventsSubscriberQueue();
            eventSettings.maxSubscribers = ctx.eventsMaxSubscribers();
            this.eventDispatcher = new EventDispatcher(eventJournal, store, eventSettings, masterId, ctx.clock());
            metrics.events(meters, eventDispatcher);
        }
        else
        {
            this.eventJournal = null;
            this.eventDispatcher = null;
        }
        if (eventJournal != null && !ctx.eventsZmqEndpoint().isEmpty())
        {
            final ZmqEventPublisher.Settings zmq = new ZmqEventPublisher.Settings();
            zmq.endpoint = ctx.eventsZmqEndpoint();
            zmq.replayEndpoint = ctx.eventsZmqReplayEndpoint();
            zmq.topic = ctx.eventsZmqTopic();
            zmq.replayBatches = ctx.eventsZmqReplayBatches();
            try
            {
                this.zmqPublisher = new ZmqEventPublisher(eventJournal, store, zmq, ctx.clock());
            }
            catch (final IllegalArgumentException ex)
            {
                eventDispatcher.close();
                closeMetrics();
                throw ex;
            }
            metrics.zmqEvents(meters, zmqPublisher);
        }
        else
        {
            this.zmqPublisher = null;
        }
        final MasterGrpcService service =
            new MasterGrpcService(handler, new RpcMetrics(meters, "grpc"), eventDispatcher);

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
            .withOption(io.netty.channel.ChannelOption.SO_REUSEADDR, true) // restart on the same port at once
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
            closeEvents();
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
            closeEvents();
            closeMetrics();
            throw new UncheckedIOException("cannot bind the master gRPC port " + ctx.host() + ":" + ctx.port(), ex);
        }

        LookupServer lookup = null;
        if (ctx.lookupPort() >= 0)
        {
            try
            {
                lookup = new LookupServer(ctx.host(), ctx.lookupPort(), bossGroup, workerGroup, channelType, handler,
                    new RpcMetrics(meters, "lookup"), lookupTls);
            }
            catch (final RuntimeException ex)
            {
                grpcServer.shutdownNow();
                shutdownGroups();
                closeEvents();
                closeMetrics();
                throw ex;
            }
        }
        this.lookupServer = lookup;

        AdminHttpServer adminServer = null;
        if (ctx.adminPort() >= 0)
        {
            try
            {
                adminServer = new AdminHttpServer(ctx.host(), ctx.adminPort(), this, metrics, meters);
            }
            catch (final RuntimeException ex)
            {
                if (lookupServer != null)
                {
                    lookupServer.close();
                }
                grpcServer.shutdownNow();
                shutdownGroups();
                closeEvents();
                closeMetrics();
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
        LOG.info("master ready: grpc={}:{} lookup={} admin={} id={} shards={} max-objects={}{} lease-ttl={} node-ttl={} "
            + "eviction={} data-tokens={} tls={}",
            ctx.host(), server.grpcPort(), server.lookupPort(), server.adminPort(), server.masterId,
            ctx.metadataShards(), server.store.settings().maxObjects,
            ctx.maxObjects() > 0 ? "" : " (" + Configuration.METADATA_HEAP_SHARE_PERCENT + " % of the max heap at " +
                Configuration.BYTES_PER_OBJECT_ESTIMATE + " bytes an object)",
            Units.formatDuration(ctx.leaseTtl()), Units.formatDuration(ctx.nodeTtl()), ctx.evictionPolicy(),
            !ctx.dataTokens() ? "off" : ctx.tokenKey() != null ? "on (key from " + ctx.tokenKeyFile() + ")" :
            "on (random key)",
            ctx.tls().isEnabled() ? "on (client auth " + ctx.tls().clientAuth().flagValue() + ")" : "off");
        if (!ctx.tenantQuotas().isEmpty() || ctx.defaultTenantQuota() > 0)
        {
            LOG.info("tenant quotas: {}; every other tenant: {}", ctx.tenantQuotas().isEmpty() ? "none named" :
                new java.util.TreeMap<>(ctx.tenantQuotas()), ctx.defaultTenantQuota() > 0 ?
                ctx.defaultTenantQuota() + " bytes" : "none");
        }
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

    /** The issuer of data-plane access tokens, or null when the master issues none ({@code --data-tokens=false}). */
    public TokenIssuer tokenIssuer()
    {
        return tokenIssuer;
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

    /** The admin endpoints, or null when the admin port is disabled. */
    public AdminHttpServer admin()
    {
        return admin;
    }

    /** The master's metrics registry (what {@code /metrics} serves). */
    public PrometheusMeterRegistry meterRegistry()
    {
        return meters;
    }

    /** The metrics in the Prometheus text format, as {@code /metrics} serves them (also with the port disabled). */
    public String scrapeMetrics()
    {
        metrics.refresh();
        return meters.scrape();
    }

    /** The KV event journal, or null with {@code --events=false}. */
    public EventJournal eventJournal()
    {
        return eventJournal;
    }

    /** The SubscribeEvents streams, or null with {@code --events=false}. */
    public EventDispatcher eventDispatcher()
    {
        return eventDispatcher;
    }

    /** The ZeroMQ event publisher, or null without {@code --events-zmq-endpoint}. */
    public ZmqEventPublisher zmqEventPublisher()
    {
        return zmqPublisher;
    }

    /** This incarnation's epoch: the number every event batch carries (non-zero, from {@link #masterId()}). */
    public long epoch()
    {
        return epoch;
    }

    static long epochOf(final String masterId)
    {
        final UUID id = UUID.fromString(masterId);
        final long epoch = (id.getMostSignificantBits() ^ id.getLeastSignificantBits()) & Long.MAX_VALUE;
        return epoch == 0 ? 1 : epoch;
    }

    public boolean isClosed()
    {
        return closed;
    }

    /** Random id of this master process: nodes use it to tell a restarted master from one that expired them. */
    public String masterId()
    {
        return masterId;
    }

    /** Serving, and {@code --ready-after-nodes} nodes have reported their ledgers. */
    public boolean isReady()
    {
        return !closed && reportedNodes.size() >= ctx.readyAfterNodes();
    }

    public long uptimeMs()
    {
        return TimeUnit.NANOSECONDS.toMillis(ctx.clock().nanoTime() - startNs);
    }

    /** A node finished reporting one segment's ledger (or was told to discard it). */
    public void onLedgerReported(final String nodeId, final boolean discarded)
    {
        (discarded ? discardedReports : ledgerReports).increment();
        if (reportedNodes.add(nodeId) && reportedNodes.size() == ctx.readyAfterNodes())
        {
            LOG.info("{} node(s) reported their ledgers: ready ({} objects rebuilt)", reportedNodes.size(),
                store.rebuildCounters().objects());
        }
    }

    /** Segment ledger reports completed (adopted, not discarded). */
    public long ledgerReports()
    {
        return ledgerReports.sum();
    }

    /** Segment ledger reports answered with discard_all (the node had been expired by this master). */
    public long discardedReports()
    {
        return discardedReports.sum();
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
            evictor.logSummaryIfDue(ctx.clock().nanoTime(), EVICTION_SUMMARY_INTERVAL_NS);
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
        if (eventDispatcher != null)
        {
            eventDispatcher.close(); // ends the event streams, which would otherwise hold the gRPC shutdown
        }
        if (zmqPublisher != null)
        {
            zmqPublisher.close();
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
        closeMetrics();
        LOG.info("master stopped");
    }

    private void closeEvents()
    {
        if (zmqPublisher != null)
        {
            zmqPublisher.close();
        }
        if (eventDispatcher != null)
        {
            eventDispatcher.close();
        }
    }

    private void closeMetrics()
    {
        metrics.close();
        meters.close();
    }

    private void shutdownGroups()
    {
        bossGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        workerGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
