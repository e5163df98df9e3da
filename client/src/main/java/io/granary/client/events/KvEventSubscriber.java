package io.granary.client.events;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.client.internal.Backoff;
import io.granary.common.tls.GrpcTls;
import io.granary.proto.EventBatch;
import io.granary.proto.EventBatchKind;
import io.granary.proto.KvEventReason;
import io.granary.proto.KvEventType;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.SubscribeEventsRequest;
import io.granary.protocol.Limits;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.netty.handler.ssl.SslContext;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A router's subscription to the master's KV events (docs/events.md): follows the SubscribeEvents stream, checks
 * that it has no gap, and reconnects by itself (with capped, jittered backoff) from the last sequence it saw, so that
 * the master replays what was missed, or sends a snapshot when its buffer no longer holds it, or starts the new
 * epoch after a master restart. A gap or a malformed stream makes it resubscribe with a snapshot. The listener is
 * called on the subscriber's one thread, in order; {@link #close()} from any thread.
 */
public final class KvEventSubscriber implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(KvEventSubscriber.class);
    private static final int MAX_INBOUND_MESSAGE_BYTES = 64 << 20;

    /** Where to start and which tenants to follow. */
    public static final class Options
    {
        private boolean allTenants;
        private String tenant;
        private long fromSequence;
        private long epoch;
        private boolean snapshot;

        /** Every tenant's events (default: the client config's tenant only). */
        public Options allTenants(final boolean allTenants)
        {
            this.allTenants = allTenants;
            return this;
        }

        /** One tenant's events (default: the client config's tenant). */
        public Options tenant(final String tenant)
        {
            this.tenant = tenant;
            return this;
        }

        /**
         * First sequence wanted: 0 (default) = everything the master knows (the whole epoch, or a snapshot), -1 =
         * changes from now on only (the view is then never complete), N = resume (with {@link #epoch(long)}).
         */
        public Options fromSequence(final long fromSequence)
        {
            this.fromSequence = fromSequence;
            return this;
        }

        /** The epoch {@link #fromSequence(long)} belongs to (0 = the master's current one). */
        public Options epoch(final long epoch)
        {
            this.epoch = epoch;
            return this;
        }

        /** Start with a snapshot of the present keys even if the master could replay. */
        public Options snapshot(final boolean snapshot)
        {
            this.snapshot = snapshot;
            return this;
        }
    }

    private final ClientConfig config;
    private final KvEventListener listener;
    private final boolean allTenants;
    private final String tenant;
    private final ManagedChannel channel;
    private final ScheduledExecutorService executor;
    private final Backoff backoff;

    // Touched on the executor thread only.
    private long epoch;
    /** Next sequence expected; -1 = accept whatever comes first. */
    private long nextSequence;
    /** The position is anchored (from a snapshot, the start of an epoch, or a continued stream). */
    private boolean anchored;
    private boolean forceSnapshot;
    private boolean inSnapshot;
    private boolean syncedThisConnection;
    private int generation;
    private ClientCallStreamObserver<SubscribeEventsRequest> call;

    private volatile boolean closed;
    private volatile long lastSequence = -1;
    private volatile long lastEpoch;
    private volatile long connections;
    private volatile long snapshots;
    private volatile long gaps;
    private volatile GranaryException failure;

    private KvEventSubscriber(final ClientConfig config, final Options options, final KvEventListener listener)
    {
        this.config = config;
        this.listener = listener;
        this.allTenants = options.allTenants;
        this.tenant = options.tenant != null ? options.tenant : config.tenant();
        if (!allTenants && Limits.checkTenant(tenant) != null)
        {
            throw new IllegalArgumentException("tenant " + Limits.checkTenant(tenant));
        }
        if (options.fromSequence < -1)
        {
            throw new IllegalArgumentException("fromSequence must be >= -1, was " + options.fromSequence);
        }
        this.epoch = options.epoch;
        this.nextSequence = options.fromSequence;
        this.anchored = options.fromSequence >= 0;
        this.forceSnapshot = options.snapshot;
        this.backoff = new Backoff(config.reconnectBackoff().toNanos(), config.reconnectBackoffMax().toNanos());
        this.executor = Executors.newSingleThreadScheduledExecutor(new DefaultThreadFactory("granary-events", true));
        final SslContext tls = GrpcTls.clientContext(config.tls());
        final NettyChannelBuilder builder = NettyChannelBuilder.forTarget(config.masterAddress())
            .executor(executor)
            .maxInboundMessageSize(MAX_INBOUND_MESSAGE_BYTES)
            .keepAliveTime(20, TimeUnit.SECONDS);
        if (tls == null)
        {
            builder.usePlaintext();
        }
        else
        {
            builder.sslContext(tls);
        }
        this.channel = builder.build();
    }

    /**
     * Subscribes to the master of {@code config} (its address, tenant, TLS and reconnect backoff are used).
     *
     * @throws IllegalArgumentException for a bad tenant or start sequence.
     */
    public static KvEventSubscriber start(
        final ClientConfig config, final Options options, final KvEventListener listener)
    {
        final KvEventSubscriber subscriber = new KvEventSubscriber(config, options, listener);
        subscriber.executor.execute(subscriber::connect);
        return subscriber;
    }

    private void connect()
    {
        if (closed)
        {
            return;
        }
        final SubscribeEventsRequest.Builder req = SubscribeEventsRequest.newBuilder()
            .setAllTenants(allTenants)
            .setTenant(allTenants ? "" : tenant)
            .setFromSequence(nextSequence < 0 ? (anchored ? 0 : -1) : nextSequence)
            .setEpoch(epoch)
            .setSnapshot(forceSnapshot);
        forceSnapshot = false;
        inSnapshot = false;
        syncedThisConnection = false;
        connections++;
        final int mine = ++generation;
        MasterServiceGrpc.newStub(channel).subscribeEvents(req.build(), new Stream(mine));
    }

    /** One SubscribeEvents call; callbacks of an abandoned call are ignored. */
    private final class Stream implements ClientResponseObserver<SubscribeEventsRequest, EventBatch>
    {
        private final int mine;

        Stream(final int mine)
        {
            this.mine = mine;
        }

        @Override
        public void beforeStart(final ClientCallStreamObserver<SubscribeEventsRequest> requestStream)
        {
            call = requestStream;
        }

        @Override
        public void onNext(final EventBatch batch)
        {
            if (mine == generation && !closed)
            {
                onBatch(batch);
            }
        }

        @Override
        public void onError(final Throwable t)
        {
            if (mine == generation)
            {
                onClosed(Status.fromThrowable(t));
            }
        }

        @Override
        public void onCompleted()
        {
            if (mine == generation)
            {
                onClosed(Status.UNAVAILABLE.withDescription("the master ended the event stream"));
            }
        }
    }

    private void onBatch(final EventBatch batch)
    {
        if (epoch != 0 && batch.getEpoch() != epoch)
        {
            notifyReset(KvEventListener.ResetCause.EPOCH_CHANGED, batch.getEpoch());
            nextSequence = -1;
            anchored = true; // the master restarts us at its sequence 0 (CLEARED) or with a snapshot
        }
        epoch = batch.getEpoch();
        lastEpoch = epoch;
        if (batch.getKind() == EventBatchKind.EVENT_BATCH_SNAPSHOT)
        {
            if (batch.getSnapshotBegin())
            {
                inSnapshot = true;
                snapshots++;
                notifyReset(KvEventListener.ResetCause.SNAPSHOT, epoch);
            }
            else if (!inSnapshot)
            {
                resync("snapshot chunk without its beginning");
                return;
            }
            for (final io.granary.proto.KvEvent e : batch.getEventsList())
            {
                deliver(convert(e, true));
            }
            if (batch.getSnapshotEnd())
            {
                inSnapshot = false;
                anchored = true;
                nextSequence = batch.getNextSequence();
                lastSequence = nextSequence;
                synced();
            }
            return;
        }
        if (inSnapshot)
        {
            resync("live events inside a snapshot");
            return;
        }
        if (nextSequence >= 0 && batch.getFirstSequence() != nextSequence)
        {
            gaps++;
            resync("gap: expected sequence " + nextSequence + ", the batch starts at " + batch.getFirstSequence());
            return;
        }
        long previous = batch.getFirstSequence() - 1;
        for (final io.granary.proto.KvEvent e : batch.getEventsList())
        {
            if (e.getSequence() <= previous || e.getSequence() >= batch.getNextSequence())
            {
                gaps++;
                resync("event " + e.getSequence() + " out of order in batch [" + batch.getFirstSequence() + ", " +
                    batch.getNextSequence() + ")");
                return;
            }
            previous = e.getSequence();
            deliver(convert(e, false));
        }
        nextSequence = batch.getNextSequence();
        lastSequence = nextSequence;
        if (anchored && !syncedThisConnection)
        {
            synced();
        }
    }

    private void synced()
    {
        syncedThisConnection = true;
        backoff.reset();
        try
        {
            listener.onSynced(epoch, nextSequence);
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("event listener failed in onSynced", ex);
        }
    }

    /** Drops the stream and subscribes again from a snapshot, at once. */
    private void resync(final String why)
    {
        LOG.warn("event stream from {} is inconsistent ({}): resubscribing with a snapshot", config.masterAddress(),
            why);
        abandonCall("resync");
        forceSnapshot = true;
        connect();
    }

    private void abandonCall(final String why)
    {
        generation++;
        final ClientCallStreamObserver<SubscribeEventsRequest> c = call;
        if (c != null)
        {
            c.cancel(why, null);
        }
    }

    private void onClosed(final Status status)
    {
        generation++;
        if (closed)
        {
            return;
        }
        final boolean permanent = status.getCode() == Status.Code.INVALID_ARGUMENT;
        final GranaryException cause = new GranaryException(
            status.getCode() == Status.Code.DEADLINE_EXCEEDED ? ErrorCode.RPC_TIMEOUT : ErrorCode.RPC_FAIL,
            "event stream from " + config.masterAddress() + " ended: " + status.getCode() +
                (status.getDescription() == null ? "" : ": " + status.getDescription()), status.asRuntimeException());
        if (status.getCode() == Status.Code.OUT_OF_RANGE)
        {
            forceSnapshot = true; // our position is ahead of the master's: start over from what it holds
        }
        try
        {
            listener.onDisconnected(cause, !permanent);
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("event listener failed in onDisconnected", ex);
        }
        if (permanent)
        {
            failure = cause;
            LOG.warn("{}; not retrying", cause.getMessage());
            return;
        }
        final long delayNs = status.getCode() == Status.Code.RESOURCE_EXHAUSTED && syncedThisConnection ? 0 :
            backoff.nextDelayNs();
        LOG.debug("{}; resubscribing from sequence {} in {} ms", cause.getMessage(), nextSequence,
            TimeUnit.NANOSECONDS.toMillis(delayNs));
        executor.schedule(this::connect, delayNs, TimeUnit.NANOSECONDS);
    }

    private void notifyReset(final KvEventListener.ResetCause cause, final long newEpoch)
    {
        try
        {
            listener.onReset(cause, newEpoch);
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("event listener failed in onReset", ex);
        }
    }

    private void deliver(final KvEvent event)
    {
        try
        {
            listener.onEvent(event);
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("event listener failed on {}", event, ex);
        }
    }

    static KvEvent convert(final io.granary.proto.KvEvent e, final boolean fromSnapshot)
    {
        return new KvEvent(e.getSequence(), type(e.getType()), reason(e.getReason()), e.getTenant(), e.getKey(),
            e.getGroupId().isEmpty() ? null : e.getGroupId(), e.getMedium(), e.getValueLength(), e.getGroupComplete(),
            e.getTimestampMs(), fromSnapshot, e.getParentKey().isEmpty() ? null : e.getParentKey());
    }

    private static KvEvent.Type type(final KvEventType type)
    {
        switch (type)
        {
            case KV_EVENT_STORED: return KvEvent.Type.STORED;
            case KV_EVENT_REMOVED: return KvEvent.Type.REMOVED;
            case KV_EVENT_CLEARED: return KvEvent.Type.CLEARED;
            default: throw new IllegalStateException("unknown event type " + type);
        }
    }

    private static KvEvent.Reason reason(final KvEventReason reason)
    {
        switch (reason)
        {
            case KV_REASON_REMOVED: return KvEvent.Reason.REMOVED;
            case KV_REASON_EVICTED: return KvEvent.Reason.EVICTED;
            case KV_REASON_NODE_LOST: return KvEvent.Reason.NODE_LOST;
            case KV_REASON_REPLACED: return KvEvent.Reason.REPLACED;
            case KV_REASON_MASTER_START: return KvEvent.Reason.MASTER_START;
            case KV_REASON_REMOVE_ALL: return KvEvent.Reason.REMOVE_ALL;
            default: return KvEvent.Reason.NONE;
        }
    }

    /** The epoch of the last batch received (0 before any). */
    public long epoch()
    {
        return lastEpoch;
    }

    /** The sequence to resume from: the next_sequence of the last batch received (-1 before any). */
    public long nextSequence()
    {
        return lastSequence;
    }

    /** Streams opened (the first one and every reconnection). */
    public long connections()
    {
        return connections;
    }

    /** Snapshots received. */
    public long snapshots()
    {
        return snapshots;
    }

    /** Gaps or disorder detected in the stream (each answered by a resubscription with a snapshot). */
    public long gaps()
    {
        return gaps;
    }

    /** The permanent failure that stopped the subscriber (a refused request), or null while it runs. */
    public GranaryException failure()
    {
        return failure;
    }

    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        executor.execute(() -> abandonCall("closed"));
        executor.shutdown();
        try
        {
            executor.awaitTermination(2, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        channel.shutdownNow();
        try
        {
            channel.awaitTermination(2, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
