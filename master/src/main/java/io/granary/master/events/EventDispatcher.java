package io.granary.master.events;

import io.granary.common.Clock;
import io.granary.proto.EventBatch;
import io.granary.proto.SubscribeEventsRequest;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * Serves the SubscribeEvents streams: one thread ("granary-master-events") walks the {@link EventJournal} for every
 * subscription and sends batches while gRPC says a stream is ready. The metadata hot path never waits for it:
 * producers only append to the journal, and this thread polls the journal (every millisecond while anybody
 * subscribes), so events reach subscribers about a millisecond after the change. {@link #subscribe} and the gRPC
 * callbacks run on gRPC threads and only register, flag and wake.
 */
public final class EventDispatcher implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(EventDispatcher.class);
    /** Poll interval while somebody subscribes. */
    static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(1);
    /** Poll interval with no subscriber (a new one wakes the thread at once). */
    static final long IDLE_POLL_NS = TimeUnit.MILLISECONDS.toNanos(200);
    /** Most batches one subscription sends before the others get their turn. */
    static final int BATCHES_PER_TURN = 16;

    final EventJournal journal;
    final SnapshotSource snapshotSource;
    final Clock clock;
    final String masterId;
    final int maxSubscribers;
    final long maxLagEvents;
    final int batchMaxEvents;
    final int snapshotChunkKeys;
    final long heartbeatIntervalNs;

    final LongAdder cutOffs = new LongAdder();
    final LongAdder snapshots = new LongAdder();
    final LongAdder batchesSent = new LongAdder();
    final LongAdder eventsSent = new LongAdder();
    final LongAdder subscriptions = new LongAdder();

    private final CopyOnWriteArrayList<EventSubscription> subscribers = new CopyOnWriteArrayList<>();
    private final Thread thread;
    private volatile boolean running = true;

    /** Limits of the dispatcher; see docs/events.md. */
    public static final class Settings
    {
        public int maxSubscribers = 64;
        /** A subscriber this many events behind the journal's head is cut off; at most the buffer's capacity. */
        public long maxLagEvents = 32_768;
        public int batchMaxEvents = 512;
        public int snapshotChunkKeys = 1024;
        public long heartbeatIntervalNs = TimeUnit.SECONDS.toNanos(1);
    }

    public EventDispatcher(
        final EventJournal journal,
        final SnapshotSource snapshotSource,
        final Settings settings,
        final String masterId,
        final Clock clock)
    {
        if (settings.maxLagEvents < 1 || settings.maxLagEvents > journal.capacity())
        {
            throw new IllegalArgumentException("subscriber lag limit must be in [1, " + journal.capacity() +
                "] (the event buffer), was " + settings.maxLagEvents);
        }
        this.journal = journal;
        this.snapshotSource = snapshotSource;
        this.clock = clock;
        this.masterId = masterId;
        this.maxSubscribers = settings.maxSubscribers;
        this.maxLagEvents = settings.maxLagEvents;
        this.batchMaxEvents = settings.batchMaxEvents;
        this.snapshotChunkKeys = settings.snapshotChunkKeys;
        this.heartbeatIntervalNs = settings.heartbeatIntervalNs;
        this.thread = new Thread(this::run, "granary-master-events");
        thread.setDaemon(true);
        thread.start();
    }

    public EventJournal journal()
    {
        return journal;
    }

    /**
     * Starts a stream for a validated request; answers the call with an error status instead when it cannot.
     * Synchronized so that the subscriber limit is exact (subscriptions are rare; the dispatcher never takes it).
     *
     * @param tenantOrNull the subscriber's scope, null for every tenant.
     */
    public synchronized void subscribe(
        final SubscribeEventsRequest req, final String tenantOrNull, final ServerCallStreamObserver<EventBatch> observer)
    {
        if (!running)
        {
            observer.onError(Status.UNAVAILABLE.withDescription("the master is shutting down").asRuntimeException());
            return;
        }
        if (subscribers.size() >= maxSubscribers)
        {
            observer.onError(Status.RESOURCE_EXHAUSTED.withDescription("the master already serves " +
                subscribers.size() + " event subscribers (--events-max-subscribers " + maxSubscribers + ")")
                .asRuntimeException());
            return;
        }
        final long next = journal.nextSequence();
        long from = req.getFromSequence();
        if (req.getEpoch() != 0 && req.getEpoch() != journal.epoch())
        {
            from = 0; // another master's numbers: this epoch from its start (its sequence 0 clears everything)
        }
        else if (from < -1)
        {
            observer.onError(Status.INVALID_ARGUMENT.withDescription("from_sequence must be >= -1, was " + from)
                .asRuntimeException());
            return;
        }
        else if (from == -1)
        {
            from = next;
        }
        else if (from > next)
        {
            if (req.getEpoch() == journal.epoch())
            {
                observer.onError(Status.OUT_OF_RANGE.withDescription("from_sequence " + from +
                    " is ahead of this master's next sequence " + next).asRuntimeException());
                return;
            }
            from = -2; // numbers of an unknown epoch: start from a snapshot
        }
        final boolean snapshot = req.getSnapshot() || from < 0 || from < journal.oldestRetained() ||
            journal.read(from) == EventJournal.OVERWRITTEN;
        final EventSubscription sub = new EventSubscription(this, journal, snapshotSource, observer, tenantOrNull,
            masterId, Math.max(0, from), snapshot, clock.nanoTime());
        observer.setOnCancelHandler(() ->
        {
            sub.cancel();
            LockSupport.unpark(thread);
        });
        observer.setOnReadyHandler(() -> LockSupport.unpark(thread));
        subscribers.add(sub);
        subscriptions.increment();
        LOG.debug("event subscriber for {} from sequence {}{}", tenantOrNull == null ? "every tenant" : tenantOrNull,
            from, snapshot ? " (snapshot first)" : "");
        LockSupport.unpark(thread);
    }

    private void run()
    {
        while (running)
        {
            boolean busy = false;
            try
            {
                final long nowNs = clock.nanoTime();
                for (final EventSubscription sub : subscribers)
                {
                    busy |= sub.pump(nowNs, BATCHES_PER_TURN);
                    if (sub.isClosed())
                    {
                        subscribers.remove(sub);
                    }
                }
            }
            catch (final Throwable t)
            {
                LOG.error("event dispatch failed; will retry", t);
            }
            if (!busy && running)
            {
                LockSupport.parkNanos(this, subscribers.isEmpty() ? IDLE_POLL_NS : POLL_NS);
            }
        }
    }

    /** Streams open now. */
    public int subscriberCount()
    {
        return subscribers.size();
    }

    /** Subscriptions started since the master started. */
    public long subscriptions()
    {
        return subscriptions.sum();
    }

    /** Subscribers cut off for falling too far behind. */
    public long cutOffs()
    {
        return cutOffs.sum();
    }

    /** Snapshots started (asked for, or because the buffer no longer held the start sequence). */
    public long snapshots()
    {
        return snapshots.sum();
    }

    public long batchesSent()
    {
        return batchesSent.sum();
    }

    public long eventsSent()
    {
        return eventsSent.sum();
    }

    /** Ends every stream with UNAVAILABLE (subscribers reconnect) and stops the thread. */
    @Override
    public void close()
    {
        if (!running)
        {
            return;
        }
        running = false;
        LockSupport.unpark(thread);
        try
        {
            thread.join(TimeUnit.SECONDS.toMillis(2));
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        for (final EventSubscription sub : subscribers)
        {
            sub.close(Status.UNAVAILABLE.withDescription("the master is shutting down"));
        }
        subscribers.clear();
    }
}
