package io.granary.transfer.tcp;

import io.granary.protocol.Opcode;
import io.granary.transfer.TransferRequest;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One submitted transfer from submit to completion: it may wait in its peer's admission queue, and once
 * admitted it keeps at most a window of its slices on the lanes, sending the next slice as each one
 * completes, so that a big transfer leaves room for small ones on the same lanes. Slices complete on
 * different event loops, so the counters are atomic; the first non-OK slice status becomes the result
 * and the slices not sent yet are dropped.
 */
final class PendingTransfer
{
    private static final AtomicIntegerFieldUpdater<PendingTransfer> NEXT =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "nextSlice");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> REMAINING =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "remainingSlices");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> STATUS =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "status");

    private final PeerConnection peer;
    private final int opcode;
    private final int segmentId;
    private final long remoteOffset;
    private final ByteBuffer local;
    private final int base;
    private final int length;
    private final int sliceBytes;
    private final int sliceCount;
    private final int firstLane;
    private final FrameToken token;
    private final CompletableFuture<Integer> future = new CompletableFuture<>();

    /** When a pending admission gives up; guarded by the peer's admission lock. */
    long admissionDeadlineNs;

    private volatile int nextSlice;
    private volatile int remainingSlices;
    private volatile int status;

    PendingTransfer(
        final PeerConnection peer,
        final TransferRequest request,
        final int sliceBytes,
        final int firstLane,
        final FrameToken token)
    {
        this.peer = peer;
        this.opcode = request.op() == TransferRequest.Op.READ ? Opcode.READ : Opcode.WRITE;
        this.segmentId = request.segmentId();
        this.remoteOffset = request.remoteOffset();
        this.local = request.local();
        this.base = local.position();
        this.length = request.length();
        this.sliceBytes = sliceBytes;
        this.sliceCount = length <= sliceBytes ? 1 : (int)((length + (long)sliceBytes - 1) / sliceBytes);
        this.firstLane = firstLane;
        this.token = token;
        this.remainingSlices = sliceCount;
    }

    /** Frames this transfer occupies in its peer's queue from admission to completion: one per slice. */
    int sliceCount()
    {
        return sliceCount;
    }

    CompletableFuture<Integer> future()
    {
        return future;
    }

    /** Puts the first {@code window} slices on the lanes; called once, after admission. */
    void start(final int window)
    {
        final int first = Math.min(window, sliceCount);
        for (int i = 0; i < first && status == 0; i++)
        {
            sendNext();
        }
    }

    /** Completes a transfer that was never admitted (no slice was sent, the caller's buffer was never touched). */
    void reject(final int rejectStatus)
    {
        future.complete(rejectStatus);
    }

    /** A sent slice completed: send the next one, or drop the unsent ones if the transfer failed. */
    void onSliceDone(final int sliceStatus)
    {
        if (sliceStatus != 0)
        {
            STATUS.compareAndSet(this, 0, sliceStatus);
        }
        int finished = 1;
        if (status == 0)
        {
            sendNext();
        }
        else
        {
            while (NEXT.getAndIncrement(this) < sliceCount)
            {
                finished++;
            }
        }
        peer.release(finished);
        if (REMAINING.addAndGet(this, -finished) == 0)
        {
            future.complete(status);
        }
    }

    private void sendNext()
    {
        final int index = NEXT.getAndIncrement(this);
        if (index >= sliceCount)
        {
            return;
        }
        final int offset = index * sliceBytes;
        final int sliceLength = Math.min(sliceBytes, length - offset);
        final ByteBuffer view = local.duplicate();
        view.limit(base + offset + sliceLength).position(base + offset);
        final TransferSlice slice = new TransferSlice(
            this, opcode, segmentId, remoteOffset + offset, view, sliceLength, token);
        peer.send(slice, firstLane + index);
    }
}
