package io.granary.cli;

import io.granary.common.tls.TlsSettings;
import io.granary.master.Configuration;
import io.granary.master.MasterServer;
import io.granary.master.evict.EvictionPolicy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IDefaultValueProvider;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code granary master}: runs the master in the foreground until SIGTERM/SIGINT. Every setting of
 * {@link MasterServer.Context} is a flag named as in {@link Configuration}, with that class's default.
 */
@Command(
    name = "master",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    defaultValueProvider = MasterCommand.Defaults.class,
    showDefaultValues = true,
    description = {
        "Run the master (metadata, placement, leases, eviction) in the foreground.",
        "Prints one line 'granary master ready grpc=HOST:PORT lookup=HOST:PORT admin=HOST:PORT' when it serves, and exits 0 on "
            + "SIGTERM or SIGINT. Durations take ms/s/m/h."})
final class MasterCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterCommand.class);

    @Spec
    private CommandSpec spec;

    @Option(names = "--host", paramLabel = "ADDR", description = "Address to bind the gRPC and admin ports to.")
    private String host;

    @Option(names = "--port", paramLabel = "PORT", description = "gRPC (control plane) port; 0 picks a free one.")
    private int port;

    @Option(names = "--lookup-port", paramLabel = "PORT",
        description = "Framed lookup port (exists, probes, replica lists without HTTP/2); 0 picks a free one, "
            + "-1 disables it (clients then use gRPC).")
    private int lookupPort;

    @Option(names = "--admin-port", paramLabel = "PORT",
        description = "Admin HTTP port (/health, /ready, /status, /segments, /query, /keys, /metrics); "
            + "0 picks a free one, -1 disables it.")
    private int adminPort;

    @Option(names = "--lease-ttl", paramLabel = "DURATION", description = "Read lease granted by exists/get.")
    private Duration leaseTtl;

    @Option(names = "--soft-pin-default-ttl", paramLabel = "DURATION",
        description = "Soft-pin TTL when a put enables a soft pin without one.")
    private Duration softPinDefaultTtl;

    @Option(names = "--soft-pin-max-ttl", paramLabel = "DURATION", description = "Longest soft-pin TTL a put may ask.")
    private Duration softPinMaxTtl;

    @Option(names = "--allow-evict-soft-pinned", arity = "1", paramLabel = "true|false",
        showDefaultValue = CommandLine.Help.Visibility.ALWAYS,
        description = "Whether the second eviction pass may take soft-pinned objects.")
    private boolean allowEvictSoftPinned;

    @Option(names = "--eviction-high-watermark", paramLabel = "FRACTION",
        description = "Pool usage above which eviction starts, in (0, 1].")
    private double evictionHighWatermark;

    @Option(names = "--eviction-ratio", paramLabel = "FRACTION",
        description = "Fraction of the pool one eviction round frees, in (0, 1].")
    private double evictionRatio;

    @Option(names = "--eviction-policy", paramLabel = "POLICY", converter = Converters.EvictionPolicyConverter.class,
        description = "Eviction order: oldest-lease (oldest lease first, Mooncake's order) or prefix-leaf-first (oldest "
            + "lease first among objects no live object names as its parent, so a KV block goes only after every "
            + "later block of its chain).")
    private EvictionPolicy evictionPolicy;

    @Option(names = "--node-ttl", paramLabel = "DURATION",
        description = "A node silent for this long loses its segments and their replicas.")
    private Duration nodeTtl;

    @Option(names = "--heartbeat-interval", paramLabel = "DURATION",
        description = "Heartbeat interval advertised to nodes; must be shorter than --node-ttl.")
    private Duration heartbeatInterval;

    @Option(names = "--put-discard-timeout", paramLabel = "DURATION",
        description = "An unfinished put older than this can be preempted by a new put of the same key.")
    private Duration putDiscardTimeout;

    @Option(names = "--put-release-timeout", paramLabel = "DURATION",
        description = "An unfinished put's extents are reclaimed after this long.")
    private Duration putReleaseTimeout;

    @Option(names = "--metadata-shards", paramLabel = "N", description = "Metadata shards (a power of two).")
    private int metadataShards;

    @Option(names = "--max-objects", paramLabel = "N",
        description = "Most objects the master holds: a put beyond it evicts first and is refused "
            + "(NO_AVAILABLE_HANDLE) if nothing can go; 0 = 70 %% of the max heap at 512 bytes an object.")
    private long maxObjects;

    @Option(names = "--tenant-quotas", paramLabel = "TENANT=SIZE,...", converter = Converters.TenantQuotasConverter.class,
        description = "Byte quotas of named tenants (e.g. team-a=64g,team-b=8g): the value bytes of a tenant's objects, "
            + "replicas counted once. A put of a new key beyond its tenant's quota evicts that tenant's oldest objects "
            + "first and is refused (TENANT_QUOTA_EXCEEDED) if none can go.")
    private Converters.TenantQuotas tenantQuotas;

    @Option(names = "--default-tenant-quota", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Byte quota of every tenant --tenant-quotas does not name; 0 = none.")
    private long defaultTenantQuota;

    @Option(names = "--allocation-granularity", paramLabel = "BYTES",
        description = "Allocation unit inside segments (a power of two, 8..1048576).")
    private int allocationGranularity;

    @Option(names = "--list-keys-limit", paramLabel = "N", description = "Most keys one ListKeys answer carries.")
    private int listKeysLimit;

    @Option(names = "--ready-after-nodes", paramLabel = "N",
        description = "/ready answers 503 until N nodes have registered and reported their ledgers (a restarted "
            + "master has then rebuilt what they hold); 0 = ready at once.")
    private int readyAfterNodes;
    @Option(names = "--data-tokens", arity = "1", paramLabel = "true|false",
        showDefaultValue = CommandLine.Help.Visibility.ALWAYS,
        description = "Issue data-plane access tokens with every extent and make nodes refuse frames without a "
            + "valid one; false issues none (nodes then accept any frame).")
    private boolean dataTokens;

    @Option(names = "--token-key-file", paramLabel = "FILE",
        description = "File with the 256-bit token key as 64 hex digits (e.g. 'openssl rand -hex 32'), so tokens "
            + "survive a master restart; empty draws a random key at every start.")
    private String tokenKeyFile;

    @Option(names = "--events", arity = "1", paramLabel = "true|false",
        showDefaultValue = CommandLine.Help.Visibility.ALWAYS,
        description = "Publish KV events (stored / removed / cleared) to SubscribeEvents streams (docs/events.md).")
    private boolean events;

    @Option(names = "--events-buffer", paramLabel = "N",
        description = "Replay buffer in events (a power of two, about 100 bytes + the key each): a subscriber that "
            + "resumes within it gets what it missed, an older one a snapshot.")
    private int eventsBuffer;

    @Option(names = "--events-subscriber-queue", paramLabel = "N",
        description = "A subscriber that stops reading while this many events behind is cut off "
            + "(RESOURCE_EXHAUSTED) and resubscribes from its last sequence; at most --events-buffer.")
    private int eventsSubscriberQueue;

    @Option(names = "--events-max-subscribers", paramLabel = "N", description = "Most event streams open at once.")
    private int eventsMaxSubscribers;

    @Option(names = "--events-zmq-endpoint", paramLabel = "tcp://HOST:PORT",
        description = "Also publish the events over ZeroMQ in vLLM's KV-events framing (PUB socket bound here); "
            + "empty = no ZeroMQ publisher.")
    private String eventsZmqEndpoint;

    @Option(names = "--events-zmq-replay-endpoint", paramLabel = "tcp://HOST:PORT",
        description = "ROUTER socket answering replay requests (8-byte start sequence) of the ZeroMQ publisher; "
            + "empty = none.")
    private String eventsZmqReplayEndpoint;

    @Option(names = "--events-zmq-topic", paramLabel = "TOPIC",
        description = "Topic frame of every ZeroMQ message (subscribers filter on its prefix).")
    private String eventsZmqTopic;

    @Option(names = "--events-zmq-replay-batches", paramLabel = "N",
        description = "Batches the ZeroMQ publisher keeps for replay requests.")
    private int eventsZmqReplayBatches;

    @Option(names = "--log-level", paramLabel = "LEVEL", defaultValue = "info",
        description = "Log level on stderr: " + Logging.LEVELS + ".")
    private String logLevel;

    @Mixin
    private TlsOptions tls;

    @Option(names = "--tls-client-auth", paramLabel = "MODE", defaultValue = "none",
        converter = TlsOptions.ClientAuthConverter.class,
        description = "Whether clients and nodes must present a certificate that chains to --tls-ca: none, optional "
            + "or require (mutual TLS).")
    private TlsSettings.ClientAuth tlsClientAuth;

    @Option(names = "--log-format", paramLabel = "FORMAT", defaultValue = "text",
        description = "Log format on stderr: text lines, or json (one JSON object per line).")
    private String logFormat;

    @Override
    public Integer call() throws InterruptedException
    {
        Logging.setLevel(spec, logLevel);
        Logging.setFormat(spec, logFormat);
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final MasterServer.Context ctx = context();
        try
        {
            ctx.conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            final ConfigDefaults config = ConfigDefaults.of(spec);
            err.println("error: " + (config == null ? ex.getMessage() : config.withOrigins(ex.getMessage(), spec)));
            err.flush();
            return Granary.EXIT_BAD_INPUT;
        }

        final ConfigDefaults config = ConfigDefaults.of(spec);
        if (config != null)
        {
            LOG.info("granary master {} configuration: {}", MasterServer.VERSION, config.describe(spec));
        }
        final Termination termination = Termination.install();
        final MasterServer server;
        try
        {
            server = MasterServer.launch(ctx);
        }
        catch (final UncheckedIOException ex)
        {
            err.println("error: " + ex.getMessage() + ": " + ex.getCause().getMessage());
            err.flush();
            return Granary.EXIT_FAILED;
        }
        final Thread hook = Termination.closeOnExit("granary-master", server);
        out.println("granary master ready grpc=" + hostPort(ctx.host(), server.grpcPort()) + " lookup=" +
            (server.lookupPort() < 0 ? "disabled" : hostPort(ctx.host(), server.lookupPort())) + " admin=" +
            (server.adminPort() < 0 ? "disabled" : hostPort(ctx.host(), server.adminPort())) +
            (ctx.tls().isEnabled() ? " tls=" + ctx.tls().clientAuth().flagValue() : ""));
        out.flush();

        termination.await();
        server.close();
        Termination.removeHook(hook);
        return 0;
    }

    /** The master context these flags describe (not yet concluded). */
    MasterServer.Context context()
    {
        return new MasterServer.Context()
            .host(host)
            .port(port)
            .lookupPort(lookupPort)
            .adminPort(adminPort)
            .leaseTtl(leaseTtl)
            .softPinDefaultTtl(softPinDefaultTtl)
            .softPinMaxTtl(softPinMaxTtl)
            .allowEvictSoftPinned(allowEvictSoftPinned)
            .evictionHighWatermark(evictionHighWatermark)
            .evictionRatio(evictionRatio)
            .evictionPolicy(evictionPolicy)
            .nodeTtl(nodeTtl)
            .heartbeatInterval(heartbeatInterval)
            .putDiscardTimeout(putDiscardTimeout)
            .putReleaseTimeout(putReleaseTimeout)
            .metadataShards(metadataShards)
            .maxObjects(maxObjects)
            .tenantQuotas(tenantQuotas.bytes())
            .defaultTenantQuota(defaultTenantQuota)
            .allocationGranularity(allocationGranularity)
            .listKeysLimit(listKeysLimit)
            .readyAfterNodes(readyAfterNodes)
            .dataTokens(dataTokens)
            .tokenKeyFile(tokenKeyFile == null ? "" : tokenKeyFile)
            .events(events)
            .eventsBuffer(eventsBuffer)
            .eventsSubscriberQueue(eventsSubscriberQueue)
            .eventsMaxSubscribers(eventsMaxSubscribers)
            .eventsZmqEndpoint(eventsZmqEndpoint == null ? "" : eventsZmqEndpoint)
            .eventsZmqReplayEndpoint(eventsZmqReplayEndpoint == null ? "" : eventsZmqReplayEndpoint)
            .eventsZmqTopic(eventsZmqTopic == null ? "" : eventsZmqTopic)
            .eventsZmqReplayBatches(eventsZmqReplayBatches)
            .tls(tls.settings(tlsClientAuth));
    }

    static String hostPort(final String host, final int port)
    {
        return host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]:" + port : host + ":" + port;
    }

    /**
     * Defaults straight from {@link Configuration}: each {@code X_PROP} names the flag, {@code X_DEFAULT}
     * holds its default, so a new master setting gets its default here without being typed twice.
     */
    static final class Defaults implements IDefaultValueProvider
    {
        private static final Map<String, String> BY_FLAG = fromConfiguration();

        @Override
        public String defaultValue(final ArgSpec argSpec)
        {
            return argSpec.isOption() ? BY_FLAG.get(((OptionSpec)argSpec).longestName()) : null;
        }

        /** Flag ("--lease-ttl") to its default as flag text ("10s"). */
        static Map<String, String> fromConfiguration()
        {
            final Map<String, String> defaults = new LinkedHashMap<>();
            try
            {
                for (final Field field : Configuration.class.getFields())
                {
                    if (!Modifier.isStatic(field.getModifiers()) || !field.getName().endsWith("_PROP"))
                    {
                        continue;
                    }
                    final String base = field.getName().substring(0, field.getName().length() - "_PROP".length());
                    final Object value = Configuration.class.getField(base + "_DEFAULT").get(null);
                    defaults.put("--" + field.get(null), format(value));
                }
            }
            catch (final ReflectiveOperationException ex)
            {
                throw new IllegalStateException("master Configuration must pair every X_PROP with X_DEFAULT", ex);
            }
            return Collections.unmodifiableMap(defaults);
        }

        private static String format(final Object value)
        {
            return value instanceof Duration ? Converters.formatDuration((Duration)value) : String.valueOf(value);
        }
    }
}
