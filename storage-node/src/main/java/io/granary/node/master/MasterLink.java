package io.granary.node.master;

import io.granary.common.Clock;
import io.granary.common.tls.GrpcTls;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.proto.ErrorCode;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.SegmentInfo;
import io.granary.proto.DeregisterNodeRequest;
import io.granary.proto.UnmountSegmentRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.ssl.SslContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.function.Consumer;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The storage node's control-plane link: mounts every segment with the master, heartbeats, mounts
 * again when the master forgot the node, and retries with capped exponential backoff while the master
 * is unreachable. All RPCs run on one scheduler thread; {@link #close()} is called by the owner.
 */
public final class MasterLink implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterLink.class);
    /** Total time close() spends unmounting segments. */
    static final long UNMOUNT_BUDGET_MS = 2_000;

    private enum LinkState
    {
        STARTING, REGISTERED, UNREACHABLE, REFUSED
    }

    private final String masterAddress;
    private final String nodeId;
    private final String nodeName;
    private final String endpoint;
    private final List<Segment> segments;
    private final long heartbeatIntervalMs;
    private final long rpcTimeoutMs;
    private final long initialBackoffMs;
    private final long maxBackoffMs;
    private final Clock clock;
    private final ManagedChannel channel;
    private final MasterServiceGrpc.MasterServiceBlockingStub stub;
    private final ScheduledExecutorService scheduler;
    private final AtomicLong mounts = new AtomicLong();
    private final AtomicLong heartbeats = new AtomicLong();
    private volatile Consumer<byte[]> tokenKeyListener = key -> { };
    private volatile boolean closing;
    private volatile LinkState state = LinkState.STARTING;

    // Scheduler-thread confined.
    private boolean mounted;
    private boolean everMounted;
    private long effectiveHeartbeatMs;
    private long backoffMs;
    private long lostContactNs;
    private int lastHeartbeatCode;

    public MasterLink(
        final String masterAddress,
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final List<Segment> segments,
        final long heartbeatIntervalMs,
        final long rpcTimeoutMs,
        final Clock clock)
    {
        this(masterAddress, nodeId, nodeName, endpoint, segments, heartbeatIntervalMs, rpcTimeoutMs, clock,
            TlsSettings.DISABLED);
    }

    /** @param tls TLS towards the master: its certificate is verified, the node's own is presented. */
    public MasterLink(
        final String masterAddress,
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final List<Segment> segments,
        final long heartbeatIntervalMs,
        final long rpcTimeoutMs,
        final Clock clock,
        final TlsSettings tls)
    {
        this.masterAddress = masterAddress;
        this.nodeId = nodeId;
        this.nodeName = nodeName;
        this.endpoint = endpoint;
        this.segments = List.copyOf(segments);
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        this.rpcTimeoutMs = rpcTimeoutMs;
        this.initialBackoffMs = Math.max(10, Math.min(250, heartbeatIntervalMs / 4));
        this.maxBackoffMs = Math.max(initialBackoffMs, 2 * heartbeatIntervalMs);
        this.clock = clock;
        this.effectiveHeartbeatMs = heartbeatIntervalMs;
        this.backoffMs = initialBackoffMs;
        this.channel = channel(masterAddress, tls);
        this.stub = MasterServiceGrpc.newBlockingStub(channel);
        this.scheduler = Executors.newSingleThreadScheduledExecutor(r ->
        {
            final Thread t = new Thread(r, "granary-master-link");
            t.setDaemon(true);
            return t;
        });
    }

    private static ManagedChannel channel(final String masterAddress, final TlsSettings tls)
    {
        final SslContext sslContext = GrpcTls.clientContext(tls);
        if (sslContext == null)
        {
            return ManagedChannelBuilder.forTarget(masterAddress).usePlaintext().build();
        }
        return NettyChannelBuilder.forTarget(masterAddress).sslContext(sslContext).build();
    }

    /**
     * Receives the data-token key of every MountSegment answer (empty when the master issues no tokens), on the
     * link's thread; set before {@link #start()}. It may throw IllegalArgumentException for a key it cannot use:
     * the mount then counts as refused and is retried.
     */
    public MasterLink tokenKeyListener(final Consumer<byte[]> listener)
    {
        this.tokenKeyListener = listener;
        return this;
    }

    /** Starts mounting and heartbeating in the background; returns at once. */
    public void start()
    {
        scheduler.execute(this::tick);
    }

    /** True while the master has every segment of this node mounted, as far as the node knows. */
    public boolean isRegistered()
    {
        return state == LinkState.REGISTERED;
    }

    /** MountSegment calls answered OK (or already mounted). */
    public long mounts()
    {
        return mounts.get();
    }

    /** Heartbeats answered by the master. */
    public long heartbeats()
    {
        return heartbeats.get();
    }

    private void tick()
    {
        if (closing)
        {
            return;
        }
        long delayMs;
        try
        {
            if (!mounted)
            {
                mountAll();
                delayMs = effectiveHeartbeatMs;
            }
            else
            {
                delayMs = heartbeat();
            }
            backoffMs = initialBackoffMs;
        }
        catch (final StatusRuntimeException ex)
        {
            if (closing)
            {
                return;
            }
            onUnreachable(ex);
            delayMs = nextBackoff();
            channel.resetConnectBackoff(); // the channel's own backoff must not delay the retry
        }
        catch (final MountRefusedException ex)
        {
            if (state != LinkState.REFUSED)
            {
                state = LinkState.REFUSED;
                LOG.warn("master {} refused segment {}: code {}; retrying", masterAddress, ex.segment, ex.code);
            }
            delayMs = nextBackoff();
        }
        schedule(delayMs);
    }

    private void mountAll()
    {
        for (final Segment segment : segments)
        {
            final MountSegmentResponse response = stub()
                .mountSegment(MountSegmentRequest.newBuilder()
                    .setNodeId(nodeId)
                    .setNodeName(nodeName)
                    .setEndpoint(endpoint)
                    .setSegment(SegmentInfo.newBuilder()
                        .setSegmentId(segment.id())
                        .setName(segment.name())
                        .setSizeBytes(segment.sizeBytes()))
                    .build());
            final int code = response.getCode();
            if (code != ErrorCode.OK_VALUE && code != ErrorCode.SEGMENT_ALREADY_EXISTS_VALUE)
            {
                throw new MountRefusedException(segment.name(), code);
            }
            mounts.incrementAndGet();
            onTokenKey(segment, response);
            final long masterIntervalMs = response.getHeartbeatIntervalMs();
            if (masterIntervalMs > 0 && masterIntervalMs < effectiveHeartbeatMs)
            {
                // Never heartbeat slower than the master expects.
                effectiveHeartbeatMs = masterIntervalMs;
            }
        }
        mounted = true;
        everMounted = true;
        onReachable();
        state = LinkState.REGISTERED;
        LOG.info("node {} ({}) mounted {} segment(s) at master {}, transfer endpoint {}",
            nodeName, nodeId, segments.size(), masterAddress, endpoint);
    }

    /** Hands the master's data-token key to the transfer server before the node counts as registered. */
    private void onTokenKey(final Segment segment, final MountSegmentResponse response)
    {
        try
        {
            tokenKeyListener.accept(response.getDataTokenKey().toByteArray());
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.error("master {} sent an unusable data-token key: {}", masterAddress, ex.getMessage());
            throw new MountRefusedException(segment.name(), ErrorCode.INVALID_PARAMS_VALUE);
        }
    }

    private long heartbeat()
    {
        final HeartbeatResponse response = stub().heartbeat(HeartbeatRequest.newBuilder().setNodeId(nodeId).build());
        heartbeats.incrementAndGet();
        onReachable();
        final int code = response.getCode();
        if (code == ErrorCode.SEGMENT_NOT_FOUND_VALUE)
        {
            LOG.info("master {} does not know node {} any more (restarted or expired); mounting segments again",
                masterAddress, nodeName);
            mounted = false;
            state = LinkState.STARTING;
            lastHeartbeatCode = code;
            return 0;
        }
        if (code != ErrorCode.OK_VALUE && code != lastHeartbeatCode)
        {
            LOG.warn("master {} answered a heartbeat with code {}", masterAddress, code);
        }
        lastHeartbeatCode = code;
        return effectiveHeartbeatMs;
    }

    private void onReachable()
    {
        if (state == LinkState.UNREACHABLE)
        {
            LOG.info("master {} reachable again after {} ms", masterAddress,
                TimeUnit.NANOSECONDS.toMillis(clock.nanoTime() - lostContactNs));
        }
    }

    private void onUnreachable(final StatusRuntimeException ex)
    {
        if (state == LinkState.UNREACHABLE)
        {
            return;
        }
        lostContactNs = clock.nanoTime();
        if (!everMounted)
        {
            LOG.warn("master {} not reachable ({}); the transfer server is up and the node keeps trying to register",
                masterAddress, describe(ex));
        }
        else
        {
            LOG.warn("lost contact with master {} ({}); retrying every {} ms at most",
                masterAddress, describe(ex), maxBackoffMs);
        }
        state = LinkState.UNREACHABLE;
    }

    private long nextBackoff()
    {
        final long delayMs = backoffMs;
        backoffMs = Math.min(maxBackoffMs, backoffMs * 2);
        return delayMs;
    }

    private void schedule(final long delayMs)
    {
        try
        {
            scheduler.schedule(this::tick, delayMs, TimeUnit.MILLISECONDS);
        }
        catch (final RejectedExecutionException ex)
        {
            // closing
        }
    }

    private MasterServiceGrpc.MasterServiceBlockingStub stub()
    {
        return stub.withDeadlineAfter(rpcTimeoutMs, TimeUnit.MILLISECONDS);
    }

    /** Stops heartbeats, unmounts every segment (best effort, bounded) and shuts the channel down. */
    @Override
    public void close()
    {
        if (closing)
        {
            return;
        }
        closing = true;
        scheduler.shutdownNow();
        try
        {
            if (!scheduler.awaitTermination(rpcTimeoutMs + 1_000, TimeUnit.MILLISECONDS))
            {
                LOG.warn("master link thread did not stop in time");
            }
            if (state == LinkState.REGISTERED)
            {
                unmountAll();
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        finally
        {
            channel.shutdownNow();
            try
            {
                channel.awaitTermination(1, TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void unmountAll()
    {
        final long deadlineNs = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(UNMOUNT_BUDGET_MS);
        int unmounted = 0;
        for (final Segment segment : segments)
        {
            final long remainingNs = deadlineNs - clock.nanoTime();
            if (remainingNs <= 0)
            {
                break;
            }
            try
            {
                stub.withDeadlineAfter(remainingNs, TimeUnit.NANOSECONDS)
                    .unmountSegment(UnmountSegmentRequest.newBuilder()
                        .setNodeId(nodeId)
                        .setSegmentId(segment.id())
                        .build());
                unmounted++;
            }
            catch (final StatusRuntimeException ex)
            {
                LOG.warn("could not unmount segment {} at master {}: {}", segment.name(), masterAddress, describe(ex));
                break;
            }
        }
        final long remainingNs = deadlineNs - clock.nanoTime();
        if (unmounted == segments.size() && remainingNs > 0)
        {
            try
            {
                stub.withDeadlineAfter(remainingNs, TimeUnit.NANOSECONDS)
                    .deregisterNode(DeregisterNodeRequest.newBuilder().setNodeId(nodeId).build());
            }
            catch (final StatusRuntimeException ex)
            {
                // An older master without DeregisterNode expires the node after its TTL instead.
                LOG.debug("could not deregister from master {}: {}", masterAddress, describe(ex));
            }
        }
        state = LinkState.STARTING;
        LOG.info("node {} unmounted {} of {} segment(s) at master {}",
            nodeName, unmounted, segments.size(), masterAddress);
    }

    /** Status code, description and root cause message, without a stack trace. */
    private static String describe(final StatusRuntimeException ex)
    {
        final StringBuilder text = new StringBuilder(ex.getStatus().getCode().toString());
        if (ex.getStatus().getDescription() != null)
        {
            text.append(": ").append(ex.getStatus().getDescription());
        }
        Throwable cause = ex.getStatus().getCause();
        while (cause != null && cause.getCause() != null && cause.getCause() != cause)
        {
            cause = cause.getCause();
        }
        if (cause != null)
        {
            text.append(" (").append(cause.getMessage()).append(')');
        }
        return text.toString();
    }

    private static final class MountRefusedException extends RuntimeException
    {
        private final String segment;
        private final int code;

        MountRefusedException(final String segment, final int code)
        {
            super(null, null, false, false);
            this.segment = segment;
            this.code = code;
        }
    }
}
