package io.granary.node.master;

import io.granary.common.Clock;
import io.granary.common.tls.GrpcTls;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.node.segment.SegmentRegistry;
import io.granary.proto.DeregisterNodeRequest;
import io.granary.proto.ErrorCode;
import io.granary.proto.FreedExtent;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.LedgerEntry;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.ReportLedgerRequest;
import io.granary.proto.ReportLedgerResponse;
import io.granary.proto.SegmentInfo;
import io.granary.proto.ServerInfoRequest;
import io.granary.proto.UnmountSegmentRequest;
import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.ssl.SslContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The storage node's control-plane link: registers with the master (mounts every segment, then reports
 * each segment's ledger so that a restarted master can rebuild what the node holds), heartbeats and
 * applies the frees the master sends back, registers again when the master forgot the node (giving the
 * segments fresh ids first, so extents of the forgotten registration are refused), and retries with
 * capped, jittered exponential backoff while the master is unreachable. All RPCs run on one scheduler
 * thread; {@link #close()} is called by the owner.
 */
public final class MasterLink implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterLink.class);
    /** Total time close() spends unmounting segments. */
    static final long UNMOUNT_BUDGET_MS = 2_000;
    /** How long past a call's deadline {@link #unmountAll} still waits for its answer. */
    static final long AWAIT_GRACE_MS = 250;
    /** Ledger entries per ReportLedger call (the master accepts up to 65,536). */
    static final int REPORT_CHUNK_ENTRIES = 4096;
    /** Rough bytes per ReportLedger call, well below gRPC's default 4 MiB message limit. */
    static final int REPORT_CHUNK_BYTES = 1 << 20;

    private enum LinkState
    {
        STARTING, REGISTERED, UNREACHABLE, REFUSED
    }

    private final String masterAddress;
    private final String nodeId;
    private final String nodeName;
    private final String endpoint;
    private final List<Segment> segments;
    private final SegmentRegistry registry;
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
    private final AtomicLong registrations = new AtomicLong();
    private final AtomicLong rekeys = new AtomicLong();
    private final AtomicLong entriesReported = new AtomicLong();
    private final AtomicLong entriesRejected = new AtomicLong();
    private final AtomicLong ledgersDiscarded = new AtomicLong();
    private final AtomicLong freesApplied = new AtomicLong();
    private volatile Consumer<byte[]> tokenKeyListener = key -> { };
    private volatile boolean closing;
    private volatile LinkState state = LinkState.STARTING;
    private volatile String masterId = "";

    // Scheduler-thread confined.
    private boolean mounted;
    private boolean everMounted;
    /** The master forgot this node: give the segments fresh ids before registering again. */
    private boolean rekeyBeforeMount;
    /**
     * The master that may have handed out extents of the segments under their current ids ("" if none): a
     * registration with any other master re-keys first, even when an earlier attempt failed half way.
     */
    private String exposedTo = "";
    private long effectiveHeartbeatMs;
    private long backoffMs;
    private long lostContactNs;
    private int lastHeartbeatCode;

    /**
     * @param registry          the node's segments; {@code segments} must be registered in it.
     * @param initialBackoffMs  first retry delay while the master is unreachable or refuses.
     * @param maxBackoffMs      cap of the doubling retry delay; each delay is drawn from [d/2, d].
     */
    public MasterLink(
        final String masterAddress,
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final SegmentRegistry registry,
        final List<Segment> segments,
        final long heartbeatIntervalMs,
        final long rpcTimeoutMs,
        final long initialBackoffMs,
        final long maxBackoffMs,
        final Clock clock)
    {
        this(masterAddress, nodeId, nodeName, endpoint, registry, segments, heartbeatIntervalMs, rpcTimeoutMs,
            initialBackoffMs, maxBackoffMs, clock, TlsSettings.DISABLED);
    }

    /** As above, with TLS towards the master: its certificate is verified, the node's own is presented. */
    public MasterLink(
        final String masterAddress,
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final SegmentRegistry registry,
        final List<Segment> segments,
        final long heartbeatIntervalMs,
        final long rpcTimeoutMs,
        final long initialBackoffMs,
        final long maxBackoffMs,
        final Clock clock,
        final TlsSettings tls)
    {
        this.masterAddress = masterAddress;
        this.nodeId = nodeId;
        this.nodeName = nodeName;
        this.endpoint = endpoint;
        this.registry = registry;
        this.segments = List.copyOf(segments);
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        this.rpcTimeoutMs = rpcTimeoutMs;
        this.initialBackoffMs = Math.max(1, initialBackoffMs);
        this.maxBackoffMs = Math.max(this.initialBackoffMs, maxBackoffMs);
        this.clock = clock;
        this.effectiveHeartbeatMs = heartbeatIntervalMs;
        this.backoffMs = this.initialBackoffMs;
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

    /** Registrations completed: every segment mounted and its ledger reported. */
    public long registrations()
    {
        return registrations.get();
    }

    /** Times the segments got fresh ids because the master had forgotten this node. */
    public long rekeys()
    {
        return rekeys.get();
    }

    /** Ledger entries sent in reports. */
    public long entriesReported()
    {
        return entriesReported.get();
    }

    /** Reported entries the master did not adopt (dropped from the ledger). */
    public long entriesRejected()
    {
        return entriesRejected.get();
    }

    /** Segment ledgers cleared because the master had expired this node. */
    public long ledgersDiscarded()
    {
        return ledgersDiscarded.get();
    }

    /** Ledger entries dropped because the master freed their extent. */
    public long freesApplied()
    {
        return freesApplied.get();
    }

    /** Id of the master incarnation this node last registered with ("" before the first registration). */
    public String masterId()
    {
        return masterId;
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
                register();
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
                LOG.warn("master {} refused {} of segment {}: code {}; retrying", masterAddress, ex.call, ex.segment,
                    ex.code);
            }
            delayMs = nextBackoff();
        }
        schedule(delayMs);
    }

    /**
     * Mounts every segment, then reports every segment's ledger; any failure leaves the node unregistered and
     * the next attempt starts over (mounting the same ids again is idempotent, and so is a repeated report).
     */
    private void register()
    {
        final String current = currentMasterId();
        if (rekeyBeforeMount || (!exposedTo.isEmpty() && !current.isEmpty() && !exposedTo.equals(current)))
        {
            for (final Segment segment : segments)
            {
                final int old = segment.id();
                registry.rekey(segment);
                LOG.debug("segment {} re-keyed {} -> {}", segment.name(), Integer.toUnsignedString(old),
                    Integer.toUnsignedString(segment.id()));
            }
            rekeys.incrementAndGet();
            rekeyBeforeMount = false;
            exposedTo = "";
        }
        mountAll();
        String reportedTo = masterId;
        int entries = 0;
        for (final Segment segment : segments)
        {
            final ReportOutcome outcome = reportLedger(segment);
            if (outcome == null)
            {
                break; // a master without ReportLedger: nothing to rebuild there
            }
            reportedTo = outcome.masterId;
            exposedTo = outcome.masterId; // the segment takes new extents from this master now
            entries += outcome.entries;
        }
        masterId = reportedTo;
        mounted = true;
        everMounted = true;
        state = LinkState.REGISTERED;
        registrations.incrementAndGet();
        LOG.info("node {} ({}) registered {} segment(s) with master {} ({}), transfer endpoint {}, {} ledger " +
            "entries reported", nodeName, nodeId, segments.size(), masterAddress, reportedTo, endpoint, entries);
    }

    private record ReportOutcome(String masterId, int entries)
    {
    }

    /** The id of the master answering now, or "" when it does not say (an older master). */
    private String currentMasterId()
    {
        try
        {
            return stub().getServerInfo(ServerInfoRequest.getDefaultInstance()).getMasterId();
        }
        catch (final StatusRuntimeException ex)
        {
            if (ex.getStatus().getCode() == Status.Code.UNIMPLEMENTED)
            {
                return "";
            }
            throw ex;
        }
    }

    /** Sends one segment's ledger in chunks; null when the master does not know ReportLedger. */
    private ReportOutcome reportLedger(final Segment segment)
    {
        final SegmentLedger ledger = segment.ledger();
        final List<SegmentLedger.Entry> entries = ledger.snapshot();
        final long nowMs = clock.epochMillis();
        String reportedTo = "";
        int from = 0;
        do
        {
            final ReportLedgerRequest.Builder request = ReportLedgerRequest.newBuilder()
                .setNodeId(nodeId)
                .setSegmentId(segment.id())
                .setPreviousMasterId(masterId);
            int bytes = 0;
            int to = from;
            while (to < entries.size() && to - from < REPORT_CHUNK_ENTRIES && bytes < REPORT_CHUNK_BYTES)
            {
                final LedgerEntry entry = toProto(entries.get(to), nowMs);
                bytes += entry.getSerializedSize();
                request.addEntries(entry);
                to++;
            }
            request.setLast(to == entries.size());
            final ReportLedgerResponse response;
            try
            {
                response = stub().reportLedger(request.build());
            }
            catch (final StatusRuntimeException ex)
            {
                if (ex.getStatus().getCode() == Status.Code.UNIMPLEMENTED)
                {
                    LOG.warn("master {} does not take ledger reports; it cannot rebuild from this node", masterAddress);
                    return null;
                }
                throw ex;
            }
            if (response.getCode() != ErrorCode.OK_VALUE)
            {
                throw new MountRefusedException("ReportLedger", segment.name(), response.getCode());
            }
            reportedTo = response.getMasterId();
            entriesReported.addAndGet(to - from);
            if (response.getDiscardAll())
            {
                final int cleared = ledger.clear();
                ledgersDiscarded.incrementAndGet();
                LOG.info("master {} had expired node {}: cleared {} ledger entries of segment {}",
                    masterAddress, nodeName, cleared, segment.name());
                if (!request.getLast())
                {
                    stub().reportLedger(ReportLedgerRequest.newBuilder().setNodeId(nodeId)
                        .setSegmentId(segment.id()).setPreviousMasterId(masterId).setLast(true).build());
                }
                return new ReportOutcome(reportedTo, 0);
            }
            if (response.getRejectedOffsetsCount() > 0)
            {
                entriesRejected.addAndGet(ledger.drop(response.getRejectedOffsetsList()));
            }
            from = to;
        }
        while (from < entries.size());
        return new ReportOutcome(reportedTo, entries.size());
    }

    private static LedgerEntry toProto(final SegmentLedger.Entry e, final long nowMs)
    {
        final LedgerEntry.Builder b = LedgerEntry.newBuilder()
            .setOffset(e.offset())
            .setValueLength(e.valueLength())
            .setTenant(e.tenant())
            .setKey(e.key())
            .setVersion(e.version())
            .setFlags(e.flags())
            .setSoftPinTtlMs(e.softPinTtlMs())
            .setAgeMs(Math.max(0, nowMs - e.committedAtMs()))
            .setGroupId(e.groupId())
            .setParentKey(e.parentKey())
            .setSequence(e.sequence());
        if (e.hasCrc32c())
        {
            b.setCrc32C(e.crc32c());
        }
        return b.build();
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
                    .setLedgerFollows(true)
                    .build());
            final int code = response.getCode();
            if (code != ErrorCode.OK_VALUE && code != ErrorCode.SEGMENT_ALREADY_EXISTS_VALUE)
            {
                throw new MountRefusedException("MountSegment", segment.name(), code);
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
        onReachable();
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
            throw new MountRefusedException("MountSegment", segment.name(), ErrorCode.INVALID_PARAMS_VALUE);
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
            LOG.info("master {} does not know node {} any more (restarted or expired); registering again",
                masterAddress, nodeName);
            mounted = false;
            rekeyBeforeMount = true;
            state = LinkState.STARTING;
            lastHeartbeatCode = code;
            return 0;
        }
        applyFrees(response.getFreedList());
        if (code != ErrorCode.OK_VALUE && code != lastHeartbeatCode)
        {
            LOG.warn("master {} answered a heartbeat with code {}", masterAddress, code);
        }
        lastHeartbeatCode = code;
        return response.getMoreFreed() ? 0 : effectiveHeartbeatMs;
    }

    /** Forgets the ledger entries of extents the master freed (when they still hold the freed version). */
    private void applyFrees(final List<FreedExtent> freed)
    {
        for (final FreedExtent f : freed)
        {
            final Segment segment = registry.get(f.getSegmentId());
            if (segment != null && segment.ledger().free(f.getOffset(), f.getVersion()))
            {
                freesApplied.incrementAndGet();
            }
        }
    }

    private void onReachable()
    {
        if (state == LinkState.UNREACHABLE)
        {
            LOG.info("master {} reachable again after {} ms", masterAddress,
                TimeUnit.NANOSECONDS.toMillis(clock.nanoTime() - lostContactNs));
            state = mounted ? LinkState.REGISTERED : LinkState.STARTING;
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

    /** The next retry delay, drawn from [d/2, d] ("equal jitter") so that nodes do not retry in step. */
    private long nextBackoff()
    {
        final long delayMs = backoffMs;
        backoffMs = Math.min(maxBackoffMs, backoffMs * 2);
        return delayMs / 2 + ThreadLocalRandom.current().nextLong(delayMs - delayMs / 2 + 1);
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

    /**
     * Tells the master that this node's segments and then the node itself leave, within {@link #UNMOUNT_BUDGET_MS} in
     * all. Each call also carries its share of the budget as a gRPC deadline, but the wait for it is this thread's own
     * timed wait: a node that stops must stop even if the channel never completes a call (a stop once hung for half
     * an hour in a blocking unmount whose deadline never fired, its master gone).
     */
    private void unmountAll() throws InterruptedException
    {
        final long deadlineNs = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(UNMOUNT_BUDGET_MS);
        final MasterServiceGrpc.MasterServiceFutureStub calls = MasterServiceGrpc.newFutureStub(channel);
        int unmounted = 0;
        for (final Segment segment : segments)
        {
            final long remainingNs = deadlineNs - clock.nanoTime();
            if (remainingNs <= 0)
            {
                break;
            }
            final String failure = await(calls.withDeadlineAfter(remainingNs, TimeUnit.NANOSECONDS)
                .unmountSegment(UnmountSegmentRequest.newBuilder()
                    .setNodeId(nodeId)
                    .setSegmentId(segment.id())
                    .build()), remainingNs);
            if (failure != null)
            {
                LOG.warn("could not unmount segment {} at master {}: {}", segment.name(), masterAddress, failure);
                break;
            }
            unmounted++;
        }
        final long remainingNs = deadlineNs - clock.nanoTime();
        if (unmounted == segments.size() && remainingNs > 0)
        {
            final String failure = await(calls.withDeadlineAfter(remainingNs, TimeUnit.NANOSECONDS)
                .deregisterNode(DeregisterNodeRequest.newBuilder().setNodeId(nodeId).build()), remainingNs);
            if (failure != null)
            {
                // An older master without DeregisterNode expires the node after its TTL instead.
                LOG.debug("could not deregister from master {}: {}", masterAddress, failure);
            }
        }
        state = LinkState.STARTING;
        LOG.info("node {} unmounted {} of {} segment(s) at master {}",
            nodeName, unmounted, segments.size(), masterAddress);
    }

    /**
     * Waits for {@code call} at most {@code timeoutNs} (its own deadline) and a little more, then gives up on it.
     * @return null when it succeeded, else what went wrong.
     */
    private static String await(final ListenableFuture<?> call, final long timeoutNs)
        throws InterruptedException
    {
        try
        {
            call.get(timeoutNs + TimeUnit.MILLISECONDS.toNanos(AWAIT_GRACE_MS), TimeUnit.NANOSECONDS);
            return null;
        }
        catch (final ExecutionException ex)
        {
            return ex.getCause() instanceof StatusRuntimeException ?
                describe((StatusRuntimeException)ex.getCause()) : String.valueOf(ex.getCause());
        }
        catch (final TimeoutException ex)
        {
            call.cancel(true);
            return "no answer within its deadline";
        }
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
        private final String call;
        private final String segment;
        private final int code;

        MountRefusedException(final String call, final String segment, final int code)
        {
            super(null, null, false, false);
            this.call = call;
            this.segment = segment;
            this.code = code;
        }
    }
}
