package io.granary.node;

import io.granary.node.segment.HugePages;
import io.granary.common.Units;
import io.granary.common.tls.TlsSettings;
import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.TransportKind;

import java.util.Locale;

/**
 * Storage-node settings: each system property name next to its default. {@link StorageNode.Context}
 * starts from these values; the property values accept the human units of {@link Units} ("1g", "500ms").
 */
public final class Configuration
{
    /** Master gRPC address, "host:port". Required. */
    public static final String MASTER_ADDRESS_PROP_NAME = "granary.node.master.address";

    /** Address the transfer server binds to and advertises to clients. */
    public static final String HOST_PROP_NAME = "granary.node.host";
    public static final String HOST_DEFAULT = "127.0.0.1";

    /** Transfer server port; 0 picks an ephemeral one. */
    public static final String TRANSFER_PORT_PROP_NAME = "granary.node.transfer.port";
    public static final int TRANSFER_PORT_DEFAULT = 0;

    /** Size of each segment, rounded up to the page size. */
    public static final String SEGMENT_SIZE_PROP_NAME = "granary.node.segment.size";
    public static final long SEGMENT_SIZE_DEFAULT = 1L << 30;
    public static final long SEGMENT_SIZE_MIN = 1L << 20;
    public static final long SEGMENT_SIZE_MAX = 1L << 40;
    public static final int PAGE_SIZE_BYTES = 4096;

    /** Number of segments of the node. */
    public static final String SEGMENT_COUNT_PROP_NAME = "granary.node.segment.count";
    public static final int SEGMENT_COUNT_DEFAULT = 1;
    public static final int SEGMENT_COUNT_MAX = 1024;

    /** Node name; unset means "node-&lt;transfer port&gt;". Segments are named "&lt;name&gt;/seg&lt;i&gt;". */
    public static final String NAME_PROP_NAME = "granary.node.name";

    /** Interval between heartbeats to the master. */
    public static final String HEARTBEAT_INTERVAL_PROP_NAME = "granary.node.heartbeat.interval";
    public static final long HEARTBEAT_INTERVAL_DEFAULT_MS = 1_000;

    /** Deadline of each control-plane call to the master. */
    public static final String MASTER_RPC_TIMEOUT_PROP_NAME = "granary.node.master.rpc.timeout";
    public static final long MASTER_RPC_TIMEOUT_DEFAULT_MS = 3_000;

    /** First delay before retrying an unreachable or refusing master; doubles on every failure. */
    public static final String RECONNECT_BACKOFF_PROP_NAME = "granary.node.master.reconnect.backoff";
    public static final long RECONNECT_BACKOFF_DEFAULT_MS = 100;

    /** Cap of the doubling retry delay; each delay is drawn at random from [cap/2, cap] once reached. */
    public static final String RECONNECT_BACKOFF_MAX_PROP_NAME = "granary.node.master.reconnect.backoff.max";
    public static final long RECONNECT_BACKOFF_MAX_DEFAULT_MS = 2_000;

    /** Longest range one transfer frame may carry; longer frames close the connection. */
    public static final String MAX_FRAME_BYTES_PROP_NAME = "granary.node.transfer.max.frame";
    public static final int MAX_FRAME_BYTES_DEFAULT = 16 << 20;
    public static final int MAX_FRAME_BYTES_MIN = 4096;

    /** Event-loop threads of the transfer server. */
    public static final String IO_THREADS_PROP_NAME = "granary.node.transfer.io.threads";
    public static final int IO_THREADS_DEFAULT = 2;

    /** Touch every segment page at start so that the memory is committed up front. */
    public static final String PRE_TOUCH_PROP_NAME = "granary.node.segment.pretouch";
    public static final boolean PRE_TOUCH_DEFAULT = true;
    /** Whether the native transfer server answers LOCAL_CONNECT (same-host clients copy with process_vm_*). */
    public static final String LOCAL_TRANSFERS_PROP_NAME = "granary.node.transfer.local";
    public static final boolean LOCAL_TRANSFERS_DEFAULT = true;

    /** Segment memory backed by transparent huge pages: auto, on or off (see {@link HugePages}). */
    public static final String HUGE_PAGES_PROP_NAME = "granary.node.segment.hugepages";
    public static final HugePages HUGE_PAGES_DEFAULT = HugePages.AUTO;

    /**
     * Admin HTTP port (/health, /ready, /metrics): -1 disables it, 0 picks a free one. {@code granary node} opens
     * {@link #ADMIN_PORT_DEFAULT} unless told otherwise; an embedded {@link StorageNode.Context} keeps it closed
     * unless this property or the setter asks for one.
     */
    public static final String ADMIN_PORT_PROP_NAME = "granary.node.admin.port";
    public static final int ADMIN_PORT_DEFAULT = 9091;
    public static final int ADMIN_PORT_DISABLED = -1;

    /**
     * Transport of the transfer server: auto (the native C server when its library loads and TLS is off, else
     * Java), java (Netty) or native.
     */
    public static final String TRANSPORT_PROP_NAME = "granary.node.transfer.transport";
    public static final String TRANSPORT_DEFAULT = "auto";

    /** Use Netty's native epoll transport when available. */
    public static final String PREFER_EPOLL_PROP_NAME = "granary.node.transfer.epoll";
    public static final boolean PREFER_EPOLL_DEFAULT = true;

    /** PEM certificate chain of the node (transfer server, and client certificate towards the master); unset = no TLS. */
    public static final String TLS_CERT_PROP_NAME = "granary.node.tls.cert";

    /** PEM PKCS#8 private key of that certificate. */
    public static final String TLS_KEY_PROP_NAME = "granary.node.tls.key";

    /** PEM trust anchors: the master's certificate and client certificates must chain to them. */
    public static final String TLS_CA_PROP_NAME = "granary.node.tls.ca";

    /** none, optional or require: whether transfer clients must present a certificate. */
    public static final String TLS_CLIENT_AUTH_PROP_NAME = "granary.node.tls.client.auth";
    public static final String TLS_CLIENT_AUTH_DEFAULT = "none";

    private Configuration()
    {
    }

    /** TLS settings from the TLS_ properties; disabled when none is set. Files are checked by conclude(). */
    public static TlsSettings tls()
    {
        final TlsSettings.ClientAuth clientAuth;
        try
        {
            clientAuth = TlsSettings.ClientAuth.parse(
                System.getProperty(TLS_CLIENT_AUTH_PROP_NAME, TLS_CLIENT_AUTH_DEFAULT));
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(TLS_CLIENT_AUTH_PROP_NAME + " must be none, optional or require, was '" +
                System.getProperty(TLS_CLIENT_AUTH_PROP_NAME) + "'", ex);
        }
        return TlsSettings.ofFiles(System.getProperty(TLS_CERT_PROP_NAME), System.getProperty(TLS_KEY_PROP_NAME),
            System.getProperty(TLS_CA_PROP_NAME), clientAuth);
    }

    public static String masterAddress()
    {
        return System.getProperty(MASTER_ADDRESS_PROP_NAME);
    }

    public static String host()
    {
        return System.getProperty(HOST_PROP_NAME, HOST_DEFAULT);
    }

    public static int transferPort()
    {
        return intProperty(TRANSFER_PORT_PROP_NAME, TRANSFER_PORT_DEFAULT);
    }

    public static long segmentSizeBytes()
    {
        final String value = System.getProperty(SEGMENT_SIZE_PROP_NAME);
        return value == null ? SEGMENT_SIZE_DEFAULT : parse(SEGMENT_SIZE_PROP_NAME, value, Kind.SIZE);
    }

    public static int segmentCount()
    {
        return intProperty(SEGMENT_COUNT_PROP_NAME, SEGMENT_COUNT_DEFAULT);
    }

    public static String name()
    {
        return System.getProperty(NAME_PROP_NAME);
    }

    public static long heartbeatIntervalMs()
    {
        final String value = System.getProperty(HEARTBEAT_INTERVAL_PROP_NAME);
        return value == null ?
            HEARTBEAT_INTERVAL_DEFAULT_MS : parse(HEARTBEAT_INTERVAL_PROP_NAME, value, Kind.DURATION);
    }

    public static long masterRpcTimeoutMs()
    {
        final String value = System.getProperty(MASTER_RPC_TIMEOUT_PROP_NAME);
        return value == null ?
            MASTER_RPC_TIMEOUT_DEFAULT_MS : parse(MASTER_RPC_TIMEOUT_PROP_NAME, value, Kind.DURATION);
    }

    public static long reconnectBackoffMs()
    {
        final String value = System.getProperty(RECONNECT_BACKOFF_PROP_NAME);
        return value == null ?
            RECONNECT_BACKOFF_DEFAULT_MS : parse(RECONNECT_BACKOFF_PROP_NAME, value, Kind.DURATION);
    }

    public static long reconnectBackoffMaxMs()
    {
        final String value = System.getProperty(RECONNECT_BACKOFF_MAX_PROP_NAME);
        return value == null ?
            RECONNECT_BACKOFF_MAX_DEFAULT_MS : parse(RECONNECT_BACKOFF_MAX_PROP_NAME, value, Kind.DURATION);
    }

    public static int maxFrameBytes()
    {
        final String value = System.getProperty(MAX_FRAME_BYTES_PROP_NAME);
        if (value == null)
        {
            return MAX_FRAME_BYTES_DEFAULT;
        }
        final long bytes = parse(MAX_FRAME_BYTES_PROP_NAME, value, Kind.SIZE);
        if (bytes > FrameDescriptor.MAX_FRAME_LENGTH_LIMIT)
        {
            throw new IllegalArgumentException(MAX_FRAME_BYTES_PROP_NAME + " must be at most " +
                FrameDescriptor.MAX_FRAME_LENGTH_LIMIT + ", was '" + value + "'");
        }
        return (int)bytes;
    }

    public static int ioThreads()
    {
        return intProperty(IO_THREADS_PROP_NAME, IO_THREADS_DEFAULT);
    }

    /** The property's port when set, else {@link #ADMIN_PORT_DISABLED}. */
    public static int adminPort()
    {
        return intProperty(ADMIN_PORT_PROP_NAME, ADMIN_PORT_DISABLED);
    }

    public static boolean preTouch()
    {
        return booleanProperty(PRE_TOUCH_PROP_NAME, PRE_TOUCH_DEFAULT);
    }

    public static boolean localTransfers()
    {
        return booleanProperty(LOCAL_TRANSFERS_PROP_NAME, LOCAL_TRANSFERS_DEFAULT);
    }

    public static HugePages hugePages()
    {
        final String value = System.getProperty(HUGE_PAGES_PROP_NAME);
        if (value == null)
        {
            return HUGE_PAGES_DEFAULT;
        }
        try
        {
            return HugePages.parse(value);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(HUGE_PAGES_PROP_NAME + ": " + ex.getMessage(), ex);
        }
    }

    public static TransportKind transport()
    {
        final String value = System.getProperty(TRANSPORT_PROP_NAME, TRANSPORT_DEFAULT);
        try
        {
            return TransportKind.parse(value);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(TRANSPORT_PROP_NAME + ": " + ex.getMessage(), ex);
        }
    }

    public static boolean preferEpoll()
    {
        return booleanProperty(PREFER_EPOLL_PROP_NAME, PREFER_EPOLL_DEFAULT);
    }

    private enum Kind
    {
        SIZE, DURATION
    }

    private static long parse(final String name, final String value, final Kind kind)
    {
        try
        {
            return kind == Kind.SIZE ? Units.parseSize(value) : Units.parseDuration(value).toMillis();
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(name + ": " + ex.getMessage(), ex);
        }
    }

    private static int intProperty(final String name, final int defaultValue)
    {
        final String value = System.getProperty(name);
        if (value == null)
        {
            return defaultValue;
        }
        try
        {
            return Integer.parseInt(value.trim());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException(name + " must be an integer, was '" + value + "'");
        }
    }

    private static boolean booleanProperty(final String name, final boolean defaultValue)
    {
        final String value = System.getProperty(name);
        if (value == null)
        {
            return defaultValue;
        }
        switch (value.trim().toLowerCase(Locale.ROOT))
        {
            case "true": return true;
            case "false": return false;
            default: throw new IllegalArgumentException(name + " must be true or false, was '" + value + "'");
        }
    }
}
