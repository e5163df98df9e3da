package io.granary.cli;

import io.granary.common.tls.TlsSettings;
import io.granary.node.Configuration;
import io.granary.node.StorageNode;
import io.granary.node.segment.HugePages;
import io.granary.transfer.TransportKind;
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
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code granary node}: runs a storage node in the foreground until SIGTERM/SIGINT, then unmounts its
 * segments from the master and exits 0. Defaults are the node's {@link Configuration} (built-in values,
 * or the {@code granary.node.*} system properties when set).
 */
@Command(
    name = "node",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    defaultValueProvider = NodeCommand.Defaults.class,
    showDefaultValues = true,
    description = {
        "Run a storage node in the foreground: off-heap segments served over TCP, registered with the master.",
        "Prints one line 'granary node ready name=... endpoint=HOST:PORT node-id=... segments=N segment-size=BYTES "
            + "admin=HOST:PORT' "
            + "once the master has mounted its segments, and exits 0 on SIGTERM or SIGINT. Sizes take k/m/g/t, "
            + "durations ms/s/m/h."})
final class NodeCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(NodeCommand.class);

    /** Context field names in StorageNode.Context.conclude() messages, and the flags that set them. */
    private static final String[][] FLAG_OF_FIELD = {
        {"masterAddress", "--master"},
        {"host", "--host"},
        {"transferPort", "--port"},
        {"segmentSizeBytes", "--segment-size"},
        {"segmentCount", "--segments"},
        {"name", "--name"},
        {"heartbeatIntervalMs", "--heartbeat-interval"},
        {"masterRpcTimeoutMs", "--master-rpc-timeout"},
        {"reconnectBackoffMaxMs", "--reconnect-backoff-max"},
        {"reconnectBackoffMs", "--reconnect-backoff"},
        {"maxFrameBytes", "--max-frame"},
        {"ioThreads", "--io-threads"},
        {"adminPort", "--admin-port"}};

    @Spec
    private CommandSpec spec;

    @Option(names = "--master", required = true, paramLabel = "HOST:PORT", description = "The master's gRPC address.")
    private String master;

    @Option(names = "--host", paramLabel = "ADDR",
        description = "Address the transfer server binds to and advertises to clients.")
    private String host;

    @Option(names = "--port", paramLabel = "PORT", description = "Transfer server port; 0 picks a free one.")
    private int port;

    @Option(names = "--segment-size", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Size of each segment (rounded up to 4 KiB; at least 1m). Memory is committed at start "
            + "unless --pre-touch=false.")
    private long segmentSizeBytes;

    @Option(names = "--segments", paramLabel = "N", description = "Number of segments.")
    private int segments;

    @Option(names = "--name", paramLabel = "NAME",
        description = "Node name; segments are named NAME/seg<i>. Default: node-<transfer port>.")
    private String name;

    @Option(names = "--heartbeat-interval", paramLabel = "DURATION",
        description = "Interval between heartbeats (the master may ask for a shorter one).")
    private Duration heartbeatInterval;

    @Option(names = "--master-rpc-timeout", paramLabel = "DURATION",
        description = "Deadline of each call to the master.")
    private Duration masterRpcTimeout;

    @Option(names = "--reconnect-backoff", paramLabel = "DURATION",
        description = "First pause before retrying an unreachable or refusing master; doubles on each failure.")
    private Duration reconnectBackoff;

    @Option(names = "--reconnect-backoff-max", paramLabel = "DURATION",
        description = "Cap of the doubling pause; every pause is drawn at random from [d/2, d].")
    private Duration reconnectBackoffMax;

    @Option(names = "--max-frame", paramLabel = "SIZE", converter = Converters.SizeConverter.class,
        description = "Longest range one transfer frame may carry.")
    private long maxFrameBytes;

    @Option(names = "--io-threads", paramLabel = "N", description = "Event-loop threads of the transfer server.")
    private int ioThreads;

    @Option(names = "--transport", paramLabel = "KIND", converter = ClientOptions.TransportConverter.class,
        description = "Transfer server: auto (the native C server when its library loads and TLS is off, else "
            + "Java), java (Netty) or native.")
    private TransportKind transport;

    @Option(names = "--pre-touch", arity = "0..1", paramLabel = "true|false", fallbackValue = "true",
        showDefaultValue = CommandLine.Help.Visibility.ALWAYS,
        description = "Touch every segment page at start so the memory is committed up front (false: commit as "
            + "values are first written).")
    private boolean preTouch;

    @Option(names = "--huge-pages", paramLabel = "auto|on|off", converter = HugePagesConverter.class,
        description = "Back segment memory with transparent huge pages: auto (where the native library loads and the "
            + "kernel's THP mode is madvise or always), on (or refuse to start, naming why) or off (4 KiB pages).")
    private HugePages hugePages;

    @Option(names = "--local-transfers", arity = "0..1", paramLabel = "true|false", fallbackValue = "true",
        showDefaultValue = CommandLine.Help.Visibility.ALWAYS,
        description = "Let clients on this host copy values straight into and out of segment memory with "
            + "process_vm_readv/writev (native server; they must run as the same user) instead of loopback TCP.")
    private boolean localTransfers;

    @Option(names = "--admin-port", paramLabel = "PORT",
        description = "Admin HTTP port (/health, /ready, /segments, /metrics); 0 picks a free one, -1 disables it.")
    private int adminPort;

    @Option(names = "--log-level", paramLabel = "LEVEL", defaultValue = "info",
        description = "Log level on stderr: " + Logging.LEVELS + ".")
    private String logLevel;

    @Mixin
    private TlsOptions tls;

    @Option(names = "--tls-client-auth", paramLabel = "MODE", converter = TlsOptions.ClientAuthConverter.class,
        description = "Whether transfer clients must present a certificate that chains to --tls-ca: none, optional "
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
        final ConfigDefaults config = ConfigDefaults.of(spec);
        final StorageNode.Context ctx;
        try
        {
            ctx = context().conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            final String message = flagMessage(ex.getMessage());
            err.println("error: " + (config == null ? message : config.withOrigins(message, spec)));
            err.flush();
            return Granary.EXIT_BAD_INPUT;
        }
        if (config != null)
        {
            LOG.info("granary node configuration: {}", config.describe(spec));
        }

        final Termination termination = Termination.install();
        final StorageNode node;
        try
        {
            node = StorageNode.launch(ctx);
        }
        catch (final IllegalStateException ex)
        {
            err.println("error: " + ex.getMessage());
            err.flush();
            return Granary.EXIT_FAILED;
        }
        catch (final OutOfMemoryError ex)
        {
            err.println("error: cannot allocate " + ctx.segmentCount() + " segment(s) of " + ctx.segmentSizeBytes() +
                " bytes: " + ex.getMessage());
            err.flush();
            return Granary.EXIT_FAILED;
        }
        final Thread hook = Termination.closeOnExit("granary-node", node);
        // Ready means mounted: clients can be placed on this node. Until then the node retries on its own.
        boolean stopRequested = false;
        while (!node.masterLink().isRegistered())
        {
            if (termination.await(20, TimeUnit.MILLISECONDS))
            {
                stopRequested = true;
                break;
            }
        }
        if (!stopRequested)
        {
            out.println("granary node ready name=" + node.name() + " endpoint=" + node.endpoint() + " node-id=" +
                node.nodeId() + " segments=" + ctx.segmentCount() + " segment-size=" + ctx.segmentSizeBytes() +
                " admin=" + (node.adminPort() < 0 ? "disabled" : MasterCommand.hostPort(ctx.host(), node.adminPort())));
            out.flush();
            termination.await();
        }
        node.close();
        Termination.removeHook(hook);
        return 0;
    }

    /** The node context these flags describe (not yet concluded). */
    StorageNode.Context context()
    {
        if (maxFrameBytes > Integer.MAX_VALUE)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--max-frame': " + maxFrameBytes + " bytes is too large");
        }
        return new StorageNode.Context()
            .masterAddress(master)
            .host(host)
            .transferPort(port)
            .segmentSizeBytes(segmentSizeBytes)
            .segmentCount(segments)
            .name(name)
            .heartbeatIntervalMs(heartbeatInterval.toMillis())
            .masterRpcTimeoutMs(masterRpcTimeout.toMillis())
            .reconnectBackoffMs(reconnectBackoff.toMillis())
            .reconnectBackoffMaxMs(reconnectBackoffMax.toMillis())
            .maxFrameBytes((int)maxFrameBytes)
            .ioThreads(ioThreads)
            .preTouch(preTouch)
            .localTransfers(localTransfers)
            .hugePages(hugePages)
            .transport(transport)
            .adminPort(adminPort)
            .tls(tls.settings(tlsClientAuth));
    }

    /** Names the flag instead of the context field in a conclude() message ("segmentSizeBytes must..."). */
    static String flagMessage(final String message)
    {
        for (final String[] pair : FLAG_OF_FIELD)
        {
            if (message.startsWith(pair[0] + " "))
            {
                return pair[1] + message.substring(pair[0].length());
            }
        }
        return message;
    }

    /**
     * The defaults of a fresh {@link StorageNode.Context}: {@link Configuration}'s built-in values, or the
     * {@code granary.node.*} system properties when set. A malformed property is a usage error.
     */
    static final class Defaults implements IDefaultValueProvider
    {
        @Override
        public String defaultValue(final ArgSpec argSpec)
        {
            if (!argSpec.isOption())
            {
                return null;
            }
            final Map<String, String> defaults;
            try
            {
                defaults = byFlag(new StorageNode.Context());
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.ParameterException(argSpec.command().commandLine(),
                    "bad system property: " + ex.getMessage());
            }
            return defaults.get(((OptionSpec)argSpec).longestName());
        }

        static Map<String, String> byFlag(final StorageNode.Context ctx)
        {
            final Map<String, String> defaults = new LinkedHashMap<>();
            defaults.put("--host", ctx.host());
            defaults.put("--port", Integer.toString(ctx.transferPort()));
            defaults.put("--segment-size", Converters.formatSize(ctx.segmentSizeBytes()));
            defaults.put("--segments", Integer.toString(ctx.segmentCount()));
            defaults.put("--name", ctx.name());
            defaults.put("--heartbeat-interval", millis(ctx.heartbeatIntervalMs()));
            defaults.put("--master-rpc-timeout", millis(ctx.masterRpcTimeoutMs()));
            defaults.put("--reconnect-backoff", millis(ctx.reconnectBackoffMs()));
            defaults.put("--reconnect-backoff-max", millis(ctx.reconnectBackoffMaxMs()));
            defaults.put("--max-frame", Converters.formatSize(ctx.maxFrameBytes()));
            defaults.put("--io-threads", Integer.toString(ctx.ioThreads()));
            defaults.put("--pre-touch", Boolean.toString(ctx.preTouch()));
            defaults.put("--local-transfers", Boolean.toString(ctx.localTransfers()));
            defaults.put("--huge-pages", ctx.hugePages().flagValue());
            defaults.put("--transport", ctx.transport().name().toLowerCase(Locale.ROOT));
            defaults.put("--tls-cert", pathOrNull(ctx.tls().certChainFile()));
            defaults.put("--tls-key", pathOrNull(ctx.tls().privateKeyFile()));
            defaults.put("--tls-ca", pathOrNull(ctx.tls().trustCertsFile()));
            defaults.put("--tls-client-auth", ctx.tls().clientAuth().flagValue());
            // A node run as a service opens its admin port unless told otherwise; embedded nodes keep it closed.
            defaults.put("--admin-port", Integer.toString(
                System.getProperty(Configuration.ADMIN_PORT_PROP_NAME) == null ?
                    Configuration.ADMIN_PORT_DEFAULT : ctx.adminPort()));
            return defaults;
        }

        private static String pathOrNull(final java.nio.file.Path path)
        {
            return path == null ? null : path.toString();
        }

        private static String millis(final long ms)
        {
            return Converters.formatDuration(Duration.ofMillis(ms));
        }
    }

    /** --huge-pages values, case-insensitive. */
    static final class HugePagesConverter extends ClientOptions.ParsingConverter<HugePages>
    {
        HugePagesConverter()
        {
            super(HugePages::parse);
        }
    }
}
