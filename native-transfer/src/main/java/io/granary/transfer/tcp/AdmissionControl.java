package io.granary.transfer.tcp;

import io.netty.channel.EventLoop;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;

/**
 * The bounded queue of one peer: at most {@code maxOutstandingFrames} frames admitted and not completed,
 * and behind it at most {@code maxPending} transfers waiting in FIFO order for room, each for at most the
 * admission timeout. Nothing blocks: waiting transfers are admitted when frames complete and expired by a
 * timer on one event loop. Thread safe; the uncontended path (room, nobody waiting) takes no lock.
 */
final class AdmissionControl
{
    private static final Logger LOG = LoggerFactory.getLogger(AdmissionControl.class);

    private final String endpoint;
    private final int maxOutstandingFrames;
    private final int maxPending;
    private final long admissionTimeoutNs;
    private final EventLoop timerLoop;
    private final AdmissionCounters counters;
    private final Consumer<PendingTransfer> dispatcher;
    private final Runnable timerTask = this::onAdmissionTimer;

    // Outstanding frames and the pending count are read without the lock. Submitters publish the pending
    // count before they look at the frames, releasers release frames before they look at the pending
    // count: so at least one of them sees the other and no pending transfer is stranded.
    private final AtomicInteger outstandingFrames = new AtomicInteger();
    private final AtomicInteger pendingCount = new AtomicInteger();
    private volatile boolean closed;

    // Guarded by lock.
    private final Object lock = new Object();
    private final ArrayDeque<PendingTransfer> pending = new ArrayDeque<>();
    private ScheduledFuture<?> timer;

    AdmissionControl(
        final String endpoint,
        final int maxOutstandingFrames,
        final int maxPending,
        final long admissionTimeoutMs,
        final EventLoop timerLoop,
        final AdmissionCounters counters,
        final Consumer<PendingTransfer> dispatcher)
    {
        this.endpoint = endpoint;
        this.maxOutstandingFrames = maxOutstandingFrames;
        this.maxPending = maxPending;
        this.admissionTimeoutNs = TimeUnit.MILLISECONDS.toNanos(admissionTimeoutMs);
        this.timerLoop = timerLoop;
        this.counters = counters;
        this.dispatcher = dispatcher;
    }

    int outstandingFrames()
    {
        return outstandingFrames.get();
    }

    int pendingAdmissions()
    {
        return pendingCount.get();
    }

    boolean isClosed()
    {
        return closed;
    }

    /** Admits {@code transfer} (hands it to the dispatcher), queues it, or completes it with a refusal. */
    void submit(final PendingTransfer transfer)
    {
        if (pendingCount.get() == 0 && !closed && tryAcquire(transfer.sliceCount()))
        {
            counters.admitted.increment();
            dispatcher.accept(transfer);
            return;
        }
        admitLater(transfer);
    }

    /** {@code frames} admitted frames completed: room for pending admissions, oldest first. */
    void release(final int frames)
    {
        outstandingFrames.addAndGet(-frames);
        if (pendingCount.get() > 0)
        {
            final ArrayList<PendingTransfer> admitted;
            synchronized (lock)
            {
                admitted = promoteLocked(null);
            }
            dispatch(admitted);
        }
    }

    /** Fails every pending admission with TRANSFER_FAIL; later submits fail the same way. */
    void close()
    {
        final ArrayList<PendingTransfer> failed;
        synchronized (lock)
        {
            closed = true;
            failed = new ArrayList<>(pending);
            pending.clear();
            pendingCount.set(0);
            if (timer != null)
            {
                timer.cancel(false);
                timer = null;
            }
        }
        for (final PendingTransfer transfer : failed)
        {
            transfer.reject(TRANSFER_FAIL_VALUE);
        }
    }

    private void admitLater(final PendingTransfer transfer)
    {
        ArrayList<PendingTransfer> admitted = null;
        ArrayList<PendingTransfer> failed = null;
        int refusal = 0;
        int pendingNow = 0;
        synchronized (lock)
        {
            if (closed)
            {
                refusal = TRANSFER_FAIL_VALUE;
            }
            else
            {
                admitted = promoteLocked(null);
                if (pending.isEmpty() && tryAcquire(transfer.sliceCount()))
                {
                    admitted = add(admitted, transfer);
                }
                else if (pending.size() >= maxPending)
                {
                    refusal = UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
                    pendingNow = pending.size();
                }
                else
                {
                    transfer.admissionDeadlineNs = System.nanoTime() + admissionTimeoutNs;
                    pending.addLast(transfer);
                    pendingCount.set(pending.size());
                    admitted = promoteLocked(admitted); // frames released since the check above saw no one waiting
                    failed = armTimerLocked();
                }
            }
        }
        // Whatever happens to this transfer, the ones admitted above go out: a refusal never stalls the queue.
        dispatch(admitted);
        fail(failed);
        if (refusal == UNAVAILABLE_IN_CURRENT_STATUS_VALUE)
        {
            counters.rejectedQueueFull.increment();
            if (LOG.isDebugEnabled())
            {
                LOG.debug("transfer to {} refused with UNAVAILABLE_IN_CURRENT_STATUS: {} frames outstanding " +
                    "(max {}), {} pending admissions (max {})",
                    endpoint, outstandingFrames.get(), maxOutstandingFrames, pendingNow, maxPending);
            }
        }
        if (refusal != 0)
        {
            transfer.reject(refusal);
        }
    }

    private void onAdmissionTimer()
    {
        ArrayList<PendingTransfer> expired = null;
        final ArrayList<PendingTransfer> admitted;
        final ArrayList<PendingTransfer> failed;
        synchronized (lock)
        {
            timer = null;
            if (closed)
            {
                return;
            }
            final long nowNs = System.nanoTime();
            PendingTransfer head;
            while ((head = pending.peekFirst()) != null && head.admissionDeadlineNs - nowNs <= 0)
            {
                expired = add(expired, pending.pollFirst());
            }
            // The expired head may have been a big transfer that held back smaller ones that fit.
            admitted = promoteLocked(null);
            failed = armTimerLocked();
        }
        dispatch(admitted);
        fail(failed);
        if (expired != null)
        {
            counters.rejectedAdmissionTimeout.add(expired.size());
            LOG.debug("{} transfers to {} waited {} ms for admission and failed with UNAVAILABLE_IN_CURRENT_STATUS " +
                "({} frames outstanding, max {}; {} still pending)", expired.size(), endpoint,
                TimeUnit.NANOSECONDS.toMillis(admissionTimeoutNs), outstandingFrames.get(), maxOutstandingFrames,
                pendingCount.get());
            for (final PendingTransfer transfer : expired)
            {
                transfer.reject(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
            }
        }
    }

    /** Admits pending transfers from the head while they fit; a head that does not fit holds back the rest. */
    private ArrayList<PendingTransfer> promoteLocked(ArrayList<PendingTransfer> admitted)
    {
        PendingTransfer head;
        while (!closed && (head = pending.peekFirst()) != null && tryAcquire(head.sliceCount()))
        {
            admitted = add(admitted, pending.pollFirst());
        }
        pendingCount.set(pending.size());
        return admitted;
    }

    /**
     * Keeps a timer armed for the oldest pending admission (deadlines grow in queue order, so one timer
     * suffices). Returns the pending transfers to fail when the event loops are shutting down, else null.
     */
    private ArrayList<PendingTransfer> armTimerLocked()
    {
        if (timer != null || pending.isEmpty())
        {
            return null;
        }
        final long delayNs = Math.max(0, pending.peekFirst().admissionDeadlineNs - System.nanoTime());
        try
        {
            timer = timerLoop.schedule(timerTask, delayNs, TimeUnit.NANOSECONDS);
            return null;
        }
        catch (final RejectedExecutionException ex)
        {
            final ArrayList<PendingTransfer> failed = new ArrayList<>(pending);
            pending.clear();
            pendingCount.set(0);
            return failed;
        }
    }

    /**
     * Reserves {@code frames} outstanding frames. A transfer with more slices than the bound is admitted
     * alone when nothing else is outstanding, so that no request is refused forever.
     */
    private boolean tryAcquire(final int frames)
    {
        while (true)
        {
            final int current = outstandingFrames.get();
            if (current > 0 && (long)current + frames > maxOutstandingFrames)
            {
                return false;
            }
            if (outstandingFrames.compareAndSet(current, current + frames))
            {
                return true;
            }
        }
    }

    private void dispatch(final ArrayList<PendingTransfer> admitted)
    {
        if (admitted != null)
        {
            counters.admitted.add(admitted.size());
            for (final PendingTransfer transfer : admitted)
            {
                dispatcher.accept(transfer);
            }
        }
    }

    private static void fail(final ArrayList<PendingTransfer> failed)
    {
        if (failed != null)
        {
            for (final PendingTransfer transfer : failed)
            {
                transfer.reject(TRANSFER_FAIL_VALUE);
            }
        }
    }

    private static ArrayList<PendingTransfer> add(final ArrayList<PendingTransfer> list, final PendingTransfer transfer)
    {
        final ArrayList<PendingTransfer> result = list == null ? new ArrayList<>() : list;
        result.add(transfer);
        return result;
    }
}
