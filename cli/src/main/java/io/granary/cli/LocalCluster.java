package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.common.tls.TlsSettings;
import io.granary.master.MasterServer;
import io.granary.master.segment.MountedSegment;
import io.granary.node.StorageNode;
import io.granary.node.segment.Segment;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * A whole Granary cluster in this JVM: one master on an ephemeral port and N storage nodes, started and
 * awaited (the master sees every segment) before {@link Builder#start()} returns. The demo, {@code bench --local},
 * tests and benchmarks use it. Start, add/stop nodes and close from one thread; accessors are safe from any.
 */
public final class LocalCluster implements AutoCloseable
{
    private static final long POLL_NS = 1_000_000L;

    private volatile MasterServer master;
    private final String masterAddress;
    private final Builder settings;
    private final List<StorageNode> nodes = Collections.synchronizedList(new ArrayList<>());
    private final List<GranaryClient> clients = Collections.synchronizedList(new ArrayList<>());
    private int nodesStarted;
    private boolean closed;

    private LocalCluster(final Builder settings)
    {
        this.settings = settings;
        this.master = MasterServer.launch(settings.masterContext);
        this.masterAddress = MasterCommand.hostPort(settings.masterContext.host(), master.grpcPort());
    }

    public static Builder builder()
    {
        return new Builder();
    }

    /** The master settings a cluster starts with unless told otherwise: ephemeral ports, admin port disabled. */
    public static MasterServer.Context defaultMasterContext()
    {
        return new MasterServer.Context().port(0).lookupPort(0).adminPort(-1);
    }

    /** A cluster of {@code nodes} nodes with one segment of {@code segmentSizeBytes} each. */
    public static LocalCluster start(final int nodes, final long segmentSizeBytes)
    {
        return builder().nodes(nodes).segmentSizeBytes(segmentSizeBytes).start();
    }

    /** host:port of the master's gRPC port. */
    public String masterAddress()
    {
        return masterAddress;
    }

    public MasterServer master()
    {
        return master;
    }

    /** Calls of master RPC {@code method} (e.g. "BatchGetReplicaList") served so far, over gRPC and the lookup port. */
    public long masterCalls(final String method)
    {
        long calls = 0;
        for (final io.micrometer.core.instrument.Timer t : master.meterRegistry().find("granary.master.rpc")
            .tag("method", method).timers())
        {
            calls += t.count();
        }
        return calls;
    }

    /** The running nodes, in start order (a snapshot). */
    public List<StorageNode> nodes()
    {
        synchronized (nodes)
        {
            return List.copyOf(nodes);
        }
    }

    /** Client settings pointing at this cluster, to adjust and build. */
    public ClientConfig.Builder clientConfig()
    {
        return ClientConfig.builder().masterAddress(masterAddress).tls(settings.clientTls);
    }

    /** A client of this cluster with default settings; closed by {@link #close()} unless closed before. */
    public GranaryClient newClient()
    {
        return newClient(clientConfig().build());
    }

    /** A client with {@code config}; closed by {@link #close()} unless closed before. */
    public GranaryClient newClient(final ClientConfig config)
    {
        final GranaryClient client = GranaryClient.connect(config);
        clients.add(client);
        return client;
    }

    /** Starts one more node like the others and waits until the master has mounted its segments. */
    public StorageNode startNode()
    {
        final StorageNode.Context ctx = new StorageNode.Context()
            .masterAddress(masterAddress)
            .segmentSizeBytes(settings.segmentSizeBytes)
            .segmentCount(settings.segmentsPerNode)
            .name(settings.namePrefix + nodesStarted)
            .tls(settings.masterContext.tls());
        settings.nodeCustomizer.accept(ctx);
        final StorageNode node = StorageNode.launch(ctx);
        nodesStarted++;
        nodes.add(node);
        awaitMounted(node, true);
        return node;
    }

    /**
     * Stops the master and starts a new one with the same settings on the same ports, as an operator restarting it
     * would: the nodes keep their memory, register with the new master and report their ledgers, from which it
     * rebuilds its metadata. Waits until the new master shows every node's segments again (their reports done).
     * Clients reconnect by themselves. Not while other threads use {@link #master()}.
     */
    public MasterServer restartMaster()
    {
        final MasterServer old = master;
        final MasterServer.Context ctx = settings.masterContext;
        ctx.port(old.grpcPort()).lookupPort(old.lookupPort());
        if (old.adminPort() > 0)
        {
            ctx.adminPort(old.adminPort());
        }
        old.close();
        master = MasterServer.launch(ctx);
        for (final StorageNode node : snapshot(nodes))
        {
            awaitMounted(node, true);
        }
        return master;
    }

    /** Closes {@code node} (it unmounts its segments) and waits until the master no longer lists them. */
    public void stopNode(final StorageNode node)
    {
        if (!nodes.remove(node))
        {
            throw new IllegalArgumentException("not a running node of this cluster: " + node.name());
        }
        node.close();
        awaitMounted(node, false);
    }

    /** Waits until the master shows all of {@code node}'s segments ({@code mounted}) or none of them. */
    private void awaitMounted(final StorageNode node, final boolean mounted)
    {
        final Set<String> names = new HashSet<>();
        for (final Segment segment : node.segments())
        {
            names.add(segment.name());
        }
        final long deadlineNs = System.nanoTime() + settings.startTimeout.toNanos();
        while (true)
        {
            int seen = 0;
            for (final MountedSegment segment : master.registry().liveSegments())
            {
                seen += names.contains(segment.name()) ? 1 : 0;
            }
            if (mounted ? seen == names.size() : seen == 0)
            {
                return;
            }
            if (System.nanoTime() - deadlineNs > 0)
            {
                throw new IllegalStateException("the master at " + masterAddress + " shows " + seen + " of the " +
                    names.size() + " segment(s) of node " + node.name() + " after " + settings.startTimeout +
                    (mounted ? "; expected all" : "; expected none"));
            }
            LockSupport.parkNanos(POLL_NS);
        }
    }

    /** Closes clients, then nodes (which unmount from the still running master), then the master. Idempotent. */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        RuntimeException failure = null;
        for (final GranaryClient client : snapshot(clients))
        {
            failure = closeQuietly(client, failure);
        }
        final List<StorageNode> running = snapshot(nodes);
        Collections.reverse(running);
        for (final StorageNode node : running)
        {
            failure = closeQuietly(node, failure);
        }
        failure = closeQuietly(master, failure);
        if (failure != null)
        {
            throw failure;
        }
    }

    private static <T> List<T> snapshot(final List<T> list)
    {
        synchronized (list)
        {
            return new ArrayList<>(list);
        }
    }

    private static RuntimeException closeQuietly(final AutoCloseable closeable, final RuntimeException failure)
    {
        try
        {
            closeable.close();
            return failure;
        }
        catch (final Exception ex)
        {
            final RuntimeException wrapped = ex instanceof RuntimeException ?
                (RuntimeException)ex : new IllegalStateException("close failed", ex);
            if (failure != null)
            {
                failure.addSuppressed(wrapped);
                return failure;
            }
            return wrapped;
        }
    }

    /** Settings of a {@link LocalCluster}; {@link #start()} launches it. Not thread safe. */
    public static final class Builder
    {
        private int nodes = 1;
        private int segmentsPerNode = 1;
        private long segmentSizeBytes = 64L << 20;
        private String namePrefix = "local-node-";
        private MasterServer.Context masterContext = defaultMasterContext();
        private Consumer<StorageNode.Context> nodeCustomizer = ctx -> { };
        private Duration startTimeout = Duration.ofSeconds(30);
        private TlsSettings clientTls = TlsSettings.DISABLED;

        private Builder()
        {
        }

        /**
         * TLS on every channel: the master and the nodes serve with {@code serverTls} (nodes also present its
         * certificate to the master), clients from {@link #clientConfig()} use {@code clientTls}. Call it after
         * {@link #masterContext}, which replaces the master's context.
         */
        public Builder tls(final TlsSettings serverTls, final TlsSettings clientTls)
        {
            masterContext.tls(serverTls);
            this.clientTls = Objects.requireNonNull(clientTls, "clientTls");
            return this;
        }

        /** Storage nodes to start (default 1; 0 is allowed: add them later with startNode()). */
        public Builder nodes(final int nodes)
        {
            if (nodes < 0)
            {
                throw new IllegalArgumentException("nodes must not be negative, was " + nodes);
            }
            this.nodes = nodes;
            return this;
        }

        /** Segments per node (default 1). */
        public Builder segmentsPerNode(final int segmentsPerNode)
        {
            this.segmentsPerNode = segmentsPerNode;
            return this;
        }

        /** Size of each segment (default 64 MiB). */
        public Builder segmentSizeBytes(final long segmentSizeBytes)
        {
            this.segmentSizeBytes = segmentSizeBytes;
            return this;
        }

        /** Node names are this prefix and the node's start index (default "local-node-"). */
        public Builder namePrefix(final String namePrefix)
        {
            this.namePrefix = Objects.requireNonNull(namePrefix, "namePrefix");
            return this;
        }

        /** The master's settings (default: port 0, admin port disabled); the cluster owns the context. */
        public Builder masterContext(final MasterServer.Context masterContext)
        {
            this.masterContext = Objects.requireNonNull(masterContext, "masterContext");
            return this;
        }

        /** Adjusts each node's context after the cluster set master address, segment size, count and name. */
        public Builder nodeContext(final Consumer<StorageNode.Context> nodeCustomizer)
        {
            this.nodeCustomizer = Objects.requireNonNull(nodeCustomizer, "nodeCustomizer");
            return this;
        }

        /** How long to wait for the master to see a node's segments (default 30 s). */
        public Builder startTimeout(final Duration startTimeout)
        {
            this.startTimeout = Objects.requireNonNull(startTimeout, "startTimeout");
            return this;
        }

        /**
         * Launches the master and the nodes and waits until the master has mounted every segment.
         *
         * @throws IllegalArgumentException for a bad setting; IllegalStateException when the nodes do not
         *                                  register in time (everything started is closed again).
         */
        public LocalCluster start()
        {
            final LocalCluster cluster = new LocalCluster(this);
            try
            {
                for (int i = 0; i < nodes; i++)
                {
                    cluster.startNode();
                }
            }
            catch (final RuntimeException | Error ex)
            {
                try
                {
                    cluster.close();
                }
                catch (final RuntimeException closeFailure)
                {
                    ex.addSuppressed(closeFailure);
                }
                throw ex;
            }
            return cluster;
        }
    }
}
