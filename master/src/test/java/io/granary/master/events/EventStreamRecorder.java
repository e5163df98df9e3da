package io.granary.master.events;

import io.granary.proto.EventBatch;
import io.granary.proto.EventBatchKind;
import io.granary.proto.KvEvent;
import io.granary.proto.KvEventType;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.SubscribeEventsRequest;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A test consumer of SubscribeEvents over a real gRPC channel: keeps every batch, applies them to a view of the
 * present keys ("tenant/key") the way a router would, and checks that LIVE batches are contiguous. Flow control
 * is manual, so a test can stop reading (and make the master cut it off). Thread safe (synchronized).
 */
final class EventStreamRecorder implements ClientResponseObserver<SubscribeEventsRequest, EventBatch>
{
    private final List<EventBatch> batches = new ArrayList<>();
    private final Set<String> view = new HashSet<>();
    private final List<String> problems = new ArrayList<>();
    private ClientCallStreamObserver<SubscribeEventsRequest> call;
    private Status closedWith;
    private long epoch;
    private long nextSequence = -1;
    private boolean inSnapshot;
    private int snapshots;
    private final boolean autoRead;

    private EventStreamRecorder(final boolean autoRead)
    {
        this.autoRead = autoRead;
    }

    /** Subscribes on {@code channel}, reading everything as it comes. */
    static EventStreamRecorder subscribe(final ManagedChannel channel, final SubscribeEventsRequest request)
    {
        return subscribe(channel, request, true);
    }

    /** Subscribes; with {@code autoRead} false the stream takes no message until {@link #request(int)}. */
    static EventStreamRecorder subscribe(
        final ManagedChannel channel, final SubscribeEventsRequest request, final boolean autoRead)
    {
        final EventStreamRecorder r = new EventStreamRecorder(autoRead);
        MasterServiceGrpc.newStub(channel).subscribeEvents(request, r);
        return r;
    }

    /** Resubscribes with the view, epoch and sequence of {@code previous}, as a reconnecting router does. */
    static EventStreamRecorder resume(final ManagedChannel channel, final EventStreamRecorder previous,
        final SubscribeEventsRequest.Builder scope)
    {
        final EventStreamRecorder r = new EventStreamRecorder(true);
        synchronized (previous)
        {
            r.view.addAll(previous.view);
            r.epoch = previous.epoch;
            r.nextSequence = previous.nextSequence;
        }
        MasterServiceGrpc.newStub(channel).subscribeEvents(
            scope.setEpoch(r.epoch).setFromSequence(r.nextSequence).build(), r);
        return r;
    }

    @Override
    public void beforeStart(final ClientCallStreamObserver<SubscribeEventsRequest> requestStream)
    {
        this.call = requestStream;
        if (!autoRead)
        {
            requestStream.disableAutoRequestWithInitial(0);
        }
    }

    void request(final int messages)
    {
        call.request(messages);
    }

    void cancel()
    {
        call.cancel("test disconnects", null);
    }

    @Override
    public synchronized void onNext(final EventBatch batch)
    {
        batches.add(batch);
        if (epoch != 0 && batch.getEpoch() != epoch)
        {
            view.clear(); // another master incarnation: nothing known holds
            nextSequence = -1;
        }
        epoch = batch.getEpoch();
        if (batch.getKind() == EventBatchKind.EVENT_BATCH_SNAPSHOT)
        {
            if (batch.getSnapshotBegin())
            {
                view.clear(); // the tests subscribe to one scope at a time
                inSnapshot = true;
                snapshots++;
            }
            else if (!inSnapshot)
            {
                problems.add("snapshot chunk without a begin: " + batch.getFirstSequence());
            }
            for (final KvEvent e : batch.getEventsList())
            {
                view.add(e.getTenant() + "/" + e.getKey());
            }
            if (batch.getSnapshotEnd())
            {
                inSnapshot = false;
                nextSequence = batch.getNextSequence();
            }
            notifyAll();
            return;
        }
        if (inSnapshot)
        {
            problems.add("live batch inside a snapshot");
        }
        if (nextSequence >= 0 && batch.getFirstSequence() != nextSequence)
        {
            problems.add("gap: expected " + nextSequence + ", batch starts at " + batch.getFirstSequence());
        }
        long last = batch.getFirstSequence() - 1;
        for (final KvEvent e : batch.getEventsList())
        {
            if (e.getSequence() <= last || e.getSequence() >= batch.getNextSequence())
            {
                problems.add("event " + e.getSequence() + " out of order or outside its batch");
            }
            last = e.getSequence();
            apply(e);
        }
        nextSequence = batch.getNextSequence();
        notifyAll();
    }

    private void apply(final KvEvent e)
    {
        if (e.getType() == KvEventType.KV_EVENT_STORED)
        {
            view.add(e.getTenant() + "/" + e.getKey());
        }
        else if (e.getType() == KvEventType.KV_EVENT_REMOVED)
        {
            view.remove(e.getTenant() + "/" + e.getKey());
        }
        else if (e.getType() == KvEventType.KV_EVENT_CLEARED)
        {
            view.removeIf(k -> e.getTenant().isEmpty() || k.startsWith(e.getTenant() + "/"));
        }
    }

    @Override
    public synchronized void onError(final Throwable t)
    {
        closedWith = Status.fromThrowable(t);
        notifyAll();
    }

    @Override
    public synchronized void onCompleted()
    {
        closedWith = Status.OK;
        notifyAll();
    }

    synchronized Set<String> view()
    {
        return new HashSet<>(view);
    }

    synchronized List<EventBatch> batches()
    {
        return new ArrayList<>(batches);
    }

    /** Every LIVE event received so far, in order. */
    synchronized List<KvEvent> liveEvents()
    {
        final List<KvEvent> events = new ArrayList<>();
        for (final EventBatch b : batches)
        {
            if (b.getKind() == EventBatchKind.EVENT_BATCH_LIVE)
            {
                events.addAll(b.getEventsList());
            }
        }
        return events;
    }

    synchronized List<String> problems()
    {
        return new ArrayList<>(problems);
    }

    synchronized long nextSequence()
    {
        return nextSequence;
    }

    synchronized long epoch()
    {
        return epoch;
    }

    synchronized int snapshots()
    {
        return snapshots;
    }

    synchronized Status closedWith()
    {
        return closedWith;
    }

    /** Waits until {@code condition} holds (checked under this recorder's lock), failing after {@code timeout}. */
    synchronized void await(final String what, final BooleanSupplier condition, final Duration timeout)
        throws InterruptedException
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean())
        {
            final long left = deadline - System.nanoTime();
            if (left <= 0)
            {
                throw new AssertionError("timed out waiting for " + what + "; next sequence " + nextSequence +
                    ", closed " + closedWith + ", problems " + problems + ", view " + view.size() + " keys");
            }
            wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        }
    }

    /** Waits until the stream has delivered every sequence below {@code sequence}. */
    void awaitSequence(final long sequence) throws InterruptedException
    {
        await("sequence " + sequence, () -> nextSequence >= sequence, Duration.ofSeconds(20));
    }
}
