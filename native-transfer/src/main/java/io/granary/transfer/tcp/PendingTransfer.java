package io.granary.transfer.tcp;

import io.granary.protocol.Opcode;
import io.granary.transfer.TransferRequest;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

import static io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One submitted transfer from submit to completion: it may wait in its peer's admission queue, and once
 * admitted it keeps at most a window of its slices on the lanes, sending the next slice as each one
 * completes, so that a big transfer leaves room for small ones on the same lanes. Slices complete on
 * different event loops, so the counters are atomic; the first non-OK slice status becomes the result
 * and the slices not sent yet are dropped. A WRITE with a commit record ends with a COMMIT frame: on the
 * same lane behind a single-slice WRITE (right behind it when the record is ready, else as soon as it is, on the
 * connection the WRITE took); for a sliced WRITE, once every slice but one succeeded and the record is ready, on the
 * lane of the slice still unanswered, behind it (or on the first lane if that one has been answered meanwhile), and
 * never if a slice failed first.
 */
final class PendingTransfer
{
    private static final AtomicIntegerFieldUpdater<PendingTransfer> NEXT =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "nextSlice");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> REMAINING =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "remainingSlices");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> STATUS =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "status");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> DATA_LEFT =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "dataSlicesLeft");
    private static final AtomicIntegerFieldUpdater<PendingTransfer> COMMIT_CLAIMED =
        AtomicIntegerFieldUpdater.newUpdater(PendingTransfer.class, "commitClaimed");

    private final PeerConnection peer;
    private final int opcode;
    private final int segmentId;
    private final long remoteOffset;
    private final ByteBuffer local;
    private final int base;
    private final int length;
    private final int sliceBytes;
    private final int sliceCount;
    private final CompletableFuture<byte[]> commit;
    private final boolean commitPipelined;
    private final int firstLane;
    private final FrameToken token;
    private final CompletableFuture<Integer> future = new CompletableFuture<>();
    /** A sliced WRITE with a COMMIT: the lane of each slice sent and not yet answered (null otherwise). */
    private final AtomicReferenceArray<Lane> sliceLanes;

    /** When a pending admission gives up; guarded by the peer's admission lock. */
    long admissionDeadlineNs;

    private volatile int nextSlice;
    private volatile int remainingSlices;
    private volatile int dataSlicesLeft;
    private volatile int status;
    /** 1 once a thread took on the sliced WRITE's COMMIT (sending it, or dropping it after a failure). */
    private volatile int commitClaimed;
    private final boolean writeCommits;

    PendingTransfer(
        final PeerConnection peer,
        final TransferRequest request,
        final int sliceBytes,
        final int firstLane,
        final FrameToken token,
        final boolean writeCommits)
    {
        this.peer = peer;
        this.writeCommits = writeCommits;
        this.opcode = request.op() == TransferRequest.Op.READ ? Opcode.READ : Opcode.WRITE;
        this.segmentId = request.segmentId();
        this.remoteOffset = request.remoteOffset();
        this.local = request.local();
        this.base = local.position();
        this.length = request.length();
        this.sliceBytes = sliceBytes;
        this.commit = request.commit();
        if (commit != null && length == 0)
        {
            this.sliceCount = 0; // the COMMIT alone
        }
        else
        {
            this.sliceCount = length <= sliceBytes ? 1 : (int)((length + (long)sliceBytes - 1) / sliceBytes);
        }
        this.commitPipelined = commit != null && sliceCount == 1;
        this.sliceLanes = commit != null && sliceCount > 1 ? new AtomicReferenceArray<>(sliceCount) : null;
        this.firstLane = firstLane;
        this.token = token;
        this.remainingSlices = frameCount();
        this.dataSlicesLeft = sliceCount;
    }

    private int frameCount()
    {
        return sliceCount + (commit != null ? 1 : 0);
    }

    /** Frames this transfer occupies in its peer's queue from admission to completion: one per slice and COMMIT. */
    int sliceCount()
    {
        return frameCount();
    }

    CompletableFuture<Integer> future()
    {
        return future;
    }

    /** Puts the first {@code window} slices on the lanes; called once, after admission. */
    void start(final int window)
    {
        if (commit != null && sliceCount == 0)
        {
            whenCommitReady(record -> peer.send(commitSlice(record), firstLane));
            return;
        }
        if (commitPipelined)
        {
            NEXT.set(this, 1);
            final byte[] ready = commit.isDone() && !commit.isCompletedExceptionally() ? commit.join() : null;
            if (ready != null && writeCommits)
            {
                // One WRITE_COMMIT frame for both (docs/protocol.md); it still counts as two frames of the queue.
                peer.send(slice(0, Opcode.WRITE_COMMIT, ByteBuffer.wrap(ready)), firstLane);
            }
            else if (ready != null)
            {
                peer.sendPair(dataSlice(0), commitSlice(ready), firstLane);
            }
            else
            {
                // The COMMIT follows on the connection the WRITE took, whenever its record is ready; if that
                // connection dies meanwhile, the COMMIT fails with it rather than moving to another one.
                final Lane lane = peer.sendPinned(dataSlice(0), firstLane);
                whenCommitReady(record -> peer.sendOn(lane, commitSlice(record)));
            }
            return;
        }
        final int first = Math.min(window, sliceCount);
        for (int i = 0; i < first && status == 0; i++)
        {
            sendNext();
        }
    }

    /**
     * Runs {@code send} with the commit record once it is ready, unless the transfer has failed by then (the
     * COMMIT is then dropped) or the record could not be made (the transfer fails with INTERNAL_ERROR).
     */
    private void whenCommitReady(final java.util.function.Consumer<byte[]> send)
    {
        commit.whenComplete((record, error) ->
        {
            if (error != null || record == null)
            {
                onSliceDone(INTERNAL_ERROR_VALUE, true, remoteOffset);
            }
            else if (status != 0)
            {
                onSliceDone(status, true, remoteOffset);
            }
            else
            {
                send.accept(record);
            }
        });
    }

    /** Completes a transfer that was never admitted (no slice was sent, the caller's buffer was never touched). */
    void reject(final int rejectStatus)
    {
        future.complete(rejectStatus);
    }

    /** A sent slice (at {@code sliceOffset}) completed: send the next one, or drop the unsent ones if it failed. */
    void onSliceDone(final int sliceStatus, final boolean commitSlice, final long sliceOffset)
    {
        if (sliceStatus != 0)
        {
            STATUS.compareAndSet(this, 0, sliceStatus);
        }
        int finished = 1;
        if (!commitSlice)
        {
            if (sliceLanes != null)
            {
                sliceLanes.set((int)((sliceOffset - remoteOffset) / sliceBytes), null);
            }
            int dropped = 0;
            if (status == 0)
            {
                sendNext();
            }
            else
            {
                while (NEXT.getAndIncrement(this) < sliceCount)
                {
                    dropped++;
                }
            }
            finished += dropped;
            final int left = DATA_LEFT.addAndGet(this, -(1 + dropped));
            if (left == 1 && sliceLanes != null && status == 0 && COMMIT_CLAIMED.compareAndSet(this, 0, 1))
            {
                // Every slice but one accepted (and all sent: a completion sends the next before it counts):
                // the COMMIT goes behind the unanswered one, on its lane, so the node reads it after that slice's
                // last byte (and refuses it if that slice was refused). If that slice was answered meanwhile (its
                // status is then visible, being set before its lane is cleared), the first lane, unless it failed.
                whenCommitReady(record ->
                {
                    final Lane lane = unansweredLane();
                    if (lane == null && status != 0)
                    {
                        onSliceDone(status, true, remoteOffset); // the last slice failed meanwhile: no COMMIT
                        return;
                    }
                    peer.sendOn(lane != null ? lane : peer.laneOf(firstLane), commitSlice(record));
                });
            }
            else if (left == 0 && commit != null && !commitPipelined && COMMIT_CLAIMED.compareAndSet(this, 0, 1))
            {
                // Every slice is in place (or one failed): now the COMMIT, or nothing.
                if (status == 0)
                {
                    whenCommitReady(record -> peer.send(commitSlice(record), firstLane));
                }
                else
                {
                    finished++;
                }
            }
        }
        peer.release(finished);
        if (REMAINING.addAndGet(this, -finished) == 0)
        {
            future.complete(status);
        }
    }

    /** The WRITE_COMMIT carrying the one data slice and its COMMIT finished: both of its frames at once. */
    void onWriteCommitDone(final int frameStatus)
    {
        if (frameStatus != 0)
        {
            STATUS.compareAndSet(this, 0, frameStatus);
        }
        DATA_LEFT.addAndGet(this, -1);
        peer.release(2);
        if (REMAINING.addAndGet(this, -2) == 0)
        {
            future.complete(status);
        }
    }

    /** The lane of the slice still unanswered, or null if none is left. */
    private Lane unansweredLane()
    {
        for (int i = 0; i < sliceCount; i++)
        {
            final Lane lane = sliceLanes.get(i);
            if (lane != null)
            {
                return lane;
            }
        }
        return null;
    }

    private void sendNext()
    {
        final int index = NEXT.getAndIncrement(this);
        if (index >= sliceCount)
        {
            return;
        }
        if (sliceLanes == null)
        {
            peer.send(dataSlice(index), firstLane + index);
            return;
        }
        // The lane is noted before the slice can complete, so a completion always finds it to clear.
        final Lane lane = peer.laneOf(firstLane + index);
        sliceLanes.set(index, lane);
        peer.sendOn(lane, dataSlice(index));
    }

    private TransferSlice dataSlice(final int index)
    {
        return slice(index, opcode, null);
    }

    /** The frame of slice {@code index} with {@code frameOpcode}; a WRITE_COMMIT's {@code record}, else null. */
    private TransferSlice slice(final int index, final int frameOpcode, final ByteBuffer record)
    {
        final int offset = index * sliceBytes;
        final int sliceLength = Math.min(sliceBytes, length - offset);
        final ByteBuffer view = local.duplicate();
        view.limit(base + offset + sliceLength).position(base + offset);
        return new TransferSlice(this, frameOpcode, segmentId, remoteOffset + offset, view, sliceLength, token, record);
    }

    /** The COMMIT frame: the extent's offset, the record as payload, and the WRITE's token (the node checks it). */
    private TransferSlice commitSlice(final byte[] record)
    {
        return new TransferSlice(this, Opcode.COMMIT, segmentId, remoteOffset, ByteBuffer.wrap(record), record.length,
            token, null);
    }
}
