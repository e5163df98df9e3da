package io.granary.transfer.tcp;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One submitted transfer: its future and the count of slices still in flight. Slices may complete on
 * different event loops, so the counters are atomic; the first non-OK slice status becomes the result.
 */
final class PendingTransfer
{
    private static final AtomicIntegerFieldUpdater<PendingTransfer> REMAINING =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "remainingSlices");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> STATUS =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "status");

    private final CompletableFuture<Integer> future = new CompletableFuture<>();
    private volatile int remainingSlices;
    private volatile int status;

    PendingTransfer(final int sliceCount)
    {
        this.remainingSlices = sliceCount;
    }

    CompletableFuture<Integer> future()
    {
        return future;
    }

    void onSliceDone(final int sliceStatus)
    {
        if (sliceStatus != 0)
        {
            STATUS.compareAndSet(this, 0, sliceStatus);
        }
        if (REMAINING.decrementAndGet(this) == 0)
        {
            future.complete(status);
        }
    }
}
