package io.granary.master.events;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.granary.proto.EventBatch;
import io.granary.proto.EventBatchKind;
import io.granary.proto.KvEvent;
import io.granary.proto.KvEventType;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;

import java.util.ArrayList;
import java.util.List;

/**
 * One SubscribeEvents stream: a snapshot of the present keys when asked for or when the replay buffer no longer
 * holds the start sequence, then the journal's events from there, in sequence order, filtered by tenant. Sends only
 * while gRPC says the stream is ready, so what it buffers is bounded by gRPC's own window plus one batch; the
 * journal itself is its queue: a subscriber that stops taking batches while more than the lag limit behind the
 * journal's head is cut off with RESOURCE_EXHAUSTED. Pumped by the {@link EventDispatcher} thread only; {@link #cancel()} from any thread.
 */
final class EventSubscription
{
    enum State
    {
        SNAPSHOT, LIVE, CLOSED
    }

    private final EventDispatcher dispatcher;
    private final EventJournal journal;
    private final SnapshotSource snapshots;
    private final ServerCallStreamObserver<EventBatch> observer;
    /** Null = every tenant. */
    private final String tenant;
    private final String masterId;
    private volatile boolean cancelled;

    private State state;
    /** Next sequence to scan. */
    private long cursor;
    /** next_sequence of the last LIVE batch sent (where the next one starts). */
    private long sentSequence;
    private long lastSentNs;
    /** Where live events resume after the snapshot in progress. */
    private long snapshotSequence;
    private int snapshotShard;
    private boolean snapshotBegun;

    EventSubscription(
        final EventDispatcher dispatcher,
        final EventJournal journal,
        final SnapshotSource snapshots,
        final ServerCallStreamObserver<EventBatch> observer,
        final String tenantOrNull,
        final String masterId,
        final long startSequence,
        final boolean snapshot,
        final long nowNs)
    {
        this.dispatcher = dispatcher;
        this.journal = journal;
        this.snapshots = snapshots;
        this.observer = observer;
        this.tenant = tenantOrNull;
        this.masterId = masterId;
        this.lastSentNs = nowNs;
        if (snapshot)
        {
            beginSnapshot();
        }
        else
        {
            state = State.LIVE;
            cursor = startSequence;
            sentSequence = startSequence;
        }
    }

    /** The stream was cancelled or closed by the client: drop it at the next pump. */
    void cancel()
    {
        cancelled = true;
    }

    boolean isClosed()
    {
        return state == State.CLOSED;
    }

    State state()
    {
        return state;
    }

    private void beginSnapshot()
    {
        state = State.SNAPSHOT;
        snapshotSequence = journal.nextSequence();
        snapshotShard = 0;
        snapshotBegun = false;
        dispatcher.snapshots.increment();
    }

    /**
     * Sends what is ready to go, at most {@code maxBatches} batches.
     *
     * @return whether anything was sent (the dispatcher then comes back at once).
     */
    boolean pump(final long nowNs, final int maxBatches)
    {
        if (state == State.CLOSED)
        {
            return false;
        }
        if (cancelled)
        {
            state = State.CLOSED;
            return false;
        }
        if (!observer.isReady())
        {
            // The subscriber is not taking what it was sent: the events it has not read queue up in the journal.
            // Past the limit it is cut off (it resubscribes from its last sequence); one that reads is never
            // cut off, however far behind it started (if the journal laps it, it gets a snapshot).
            cutOffIfTooFarBehind();
            return false;
        }
        int sent = 0;
        while (sent < maxBatches && observer.isReady())
        {
            final boolean more = state == State.SNAPSHOT ? sendSnapshotChunk(nowNs) : sendLive(nowNs);
            if (!more)
            {
                break;
            }
            sent++;
            if (state == State.CLOSED)
            {
                break;
            }
        }
        return sent > 0;
    }

    private void cutOffIfTooFarBehind()
    {
        final long head = journal.nextSequence();
        final long behind = head - (state == State.SNAPSHOT ? snapshotSequence : cursor);
        if (behind > dispatcher.maxLagEvents)
        {
            final long resumeAt = state == State.SNAPSHOT ? -1 : sentSequence;
            close(Status.RESOURCE_EXHAUSTED.withDescription("event subscriber fell " + behind +
                " events behind the master (limit " + dispatcher.maxLagEvents + ", --events-subscriber-queue): " +
                (resumeAt < 0 ? "resubscribe (a new snapshot follows)" : "resubscribe from sequence " + resumeAt)));
            dispatcher.cutOffs.increment();
        }
    }

    /** Sends the next chunk of the snapshot. @return true (a chunk always goes). */
    private boolean sendSnapshotChunk(final long nowNs)
    {
        final EventBatch.Builder batch = EventBatch.newBuilder()
            .setEpoch(journal.epoch())
            .setKind(EventBatchKind.EVENT_BATCH_SNAPSHOT)
            .setFirstSequence(snapshotSequence)
            .setNextSequence(snapshotSequence)
            .setMasterId(masterId);
        final List<KvEvent> chunk = new ArrayList<>();
        final int shards = snapshots.shardCount();
        while (snapshotShard < shards && chunk.size() < dispatcher.snapshotChunkKeys)
        {
            snapshots.scanShard(snapshotShard++, tenant, (t, key, group, length, parent) -> chunk.add(KvEvent
                .newBuilder()
                .setType(KvEventType.KV_EVENT_STORED)
                .setTenant(t)
                .setKeyBytes(UnsafeByteOperations.unsafeWrap(key))
                .setGroupId(group == null ? "" : group)
                .setMedium(EventJournal.MEDIUM)
                .setValueLength(length)
                .setParentKeyBytes(parent == null ? ByteString.EMPTY : UnsafeByteOperations.unsafeWrap(parent))
                .build()));
        }
        final boolean end = snapshotShard >= shards;
        batch.addAllEvents(chunk).setSnapshotBegin(!snapshotBegun).setSnapshotEnd(end);
        snapshotBegun = true;
        send(batch, nowNs, chunk.size());
        if (end)
        {
            state = State.LIVE;
            cursor = snapshotSequence;
            sentSequence = snapshotSequence;
        }
        return true;
    }

    /** Sends the next live batch, if there is anything to send. @return whether a batch went. */
    private boolean sendLive(final long nowNs)
    {
        EventBatch.Builder batch = null;
        int events = 0;
        long scan = cursor;
        while (events < dispatcher.batchMaxEvents)
        {
            final KvEventRecord e = journal.read(scan);
            if (e == null)
            {
                break;
            }
            if (e == EventJournal.OVERWRITTEN)
            {
                // Lapped before it could read them (a race with the lag check): start again from a snapshot.
                cursor = scan;
                beginSnapshot();
                return true;
            }
            scan++;
            if (e.visibleTo(tenant))
            {
                if (batch == null)
                {
                    batch = EventBatch.newBuilder();
                }
                batch.addEvents(toProto(e));
                events++;
            }
        }
        cursor = scan;
        if (batch == null)
        {
            // Nothing of this scope: tell the subscriber how far it got now and then, so it resumes from there.
            if (cursor == sentSequence || nowNs - lastSentNs < dispatcher.heartbeatIntervalNs)
            {
                return false;
            }
            batch = EventBatch.newBuilder();
        }
        batch.setEpoch(journal.epoch())
            .setKind(EventBatchKind.EVENT_BATCH_LIVE)
            .setFirstSequence(sentSequence)
            .setNextSequence(cursor)
            .setMasterId(masterId);
        sentSequence = cursor;
        send(batch, nowNs, events);
        return events > 0;
    }

    private void send(final EventBatch.Builder batch, final long nowNs, final int events)
    {
        batch.setTimestampMs(dispatcher.clock.epochMillis());
        try
        {
            observer.onNext(batch.build());
        }
        catch (final RuntimeException ex)
        {
            // The call is gone (cancelled under us): nothing more to tell it.
            state = State.CLOSED;
            return;
        }
        lastSentNs = nowNs;
        dispatcher.batchesSent.increment();
        dispatcher.eventsSent.add(events);
    }

    static KvEvent toProto(final KvEventRecord e)
    {
        final KvEvent.Builder b = KvEvent.newBuilder()
            .setSequence(e.sequence)
            .setType(e.type)
            .setReason(e.reason)
            .setTenant(e.tenant)
            .setTimestampMs(e.timestampMs);
        if (e.type != KvEventType.KV_EVENT_CLEARED)
        {
            b.setKeyBytes(UnsafeByteOperations.unsafeWrap(e.keyBytes))
                .setMedium(EventJournal.MEDIUM)
                .setValueLength(e.valueLength)
                .setGroupComplete(e.groupComplete);
            if (e.groupId != null)
            {
                b.setGroupId(e.groupId);
            }
            if (e.parentKeyBytes != null)
            {
                b.setParentKeyBytes(UnsafeByteOperations.unsafeWrap(e.parentKeyBytes));
            }
        }
        return b.build();
    }

    /** Ends the stream with {@code status} (OK completes it). */
    void close(final Status status)
    {
        if (state == State.CLOSED)
        {
            return;
        }
        state = State.CLOSED;
        try
        {
            if (status.isOk())
            {
                observer.onCompleted();
            }
            else
            {
                observer.onError(status.asRuntimeException());
            }
        }
        catch (final RuntimeException ignored)
        {
            // already cancelled
        }
    }
}
