package io.granary.transfer.tcp;

import io.granary.protocol.Opcode;
import io.granary.transfer.TransferRequest;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

import static io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE;

/**
 * One submitted transfer of a {@link CallerLoop}: its slices (frames of at most the slice size, on the connections
 * {@link CallerLoop#laneFor} picks), the COMMIT that may follow a WRITE, and the outcome: OK, or the first
 * non-OK frame status. Confined to the loop's thread; the commit record may complete on any thread and is handed
 * to the loop.
 */
final class DirectTransfer
{
    final CompletableFuture<Integer> future = new CompletableFuture<>();
    final int opcode;
    final int segmentId;
    final long remoteOffset;
    final int length;
    final FrameToken token;

    private final CallerLoop loop;
    private final DirectConnection connection;
    private final ByteBuffer local;
    private final int base;
    private final int sliceBytes;
    private final CompletableFuture<byte[]> commit;
    private final boolean writeCommits;
    /**
     * Where the COMMIT goes: behind the one slice of the WRITE still unanswered once the others succeeded (a one-frame
     * WRITE: that frame), on that slice's connection; on the first for an empty value or a record that came late.
     */
    private DirectConnection commitConnection;
    /** A sliced WRITE with a COMMIT: the connection of each slice still unanswered (null once answered). */
    private DirectConnection[] sliceLanes;
    private int framesLeft;
    private int dataLeft;
    private int status;
    private boolean committing;
    private boolean finished;

    DirectTransfer(
        final CallerLoop loop,
        final DirectConnection connection,
        final TransferRequest request,
        final FrameToken token,
        final int sliceBytes,
        final boolean writeCommits)
    {
        this.loop = loop;
        this.writeCommits = writeCommits;
        this.connection = connection;
        this.opcode = request.op() == TransferRequest.Op.READ ? Opcode.READ : Opcode.WRITE;
        this.segmentId = request.segmentId();
        this.remoteOffset = request.remoteOffset();
        this.length = request.length();
        this.token = token;
        this.local = request.local();
        this.base = local.position();
        this.sliceBytes = sliceBytes;
        this.commit = request.commit();
        final int slices = commit != null && length == 0 ? 0 :
            length <= sliceBytes ? 1 : (int)((length + (long)sliceBytes - 1) / sliceBytes);
        this.dataLeft = slices;
        this.framesLeft = slices + (commit != null ? 1 : 0);
    }

    /**
     * Queues every data slice on the connection, and the COMMIT once it may go; a one-frame WRITE whose record is
     * ready goes with it as one WRITE_COMMIT (docs/protocol.md), when {@code writeCommits}.
     */
    void start()
    {
        final int slices = dataLeft;
        final byte[] ready = writeCommits && slices == 1 && commit != null && commit.isDone() &&
            !commit.isCompletedExceptionally() ? commit.getNow(null) : null;
        if (ready != null)
        {
            committing = true;
            framesLeft = 1; // the COMMIT travels in the WRITE's frame
            loop.laneFor(connection, length).enqueue(new DirectFrame.Slice(this, Opcode.WRITE_COMMIT, remoteOffset,
                view(0, length), length, ByteBuffer.wrap(ready)));
            return;
        }
        commitConnection = connection;
        if (commit != null && slices > 1)
        {
            sliceLanes = new DirectConnection[slices];
        }
        for (int i = 0; i < slices; i++)
        {
            final int offset = i * sliceBytes;
            final int sliceLength = Math.min(sliceBytes, length - offset);
            final DirectConnection lane = loop.laneFor(connection, sliceLength);
            if (slices == 1)
            {
                commitConnection = lane;
            }
            else if (sliceLanes != null)
            {
                sliceLanes[i] = lane;
            }
            lane.enqueue(new DirectFrame.Slice(this, opcode, remoteOffset + offset, view(offset, sliceLength),
                sliceLength));
        }
        if (commit != null && slices <= 1)
        {
            // Behind the one WRITE frame on the same connection (or alone for an empty value): the node reads the
            // COMMIT only after the WRITE's last byte, and refuses it if the WRITE was refused.
            whenCommitReady();
        }
    }

    /** The caller's bytes {@code [offset, offset + sliceLength)} of this transfer's range. */
    private ByteBuffer view(final int offset, final int sliceLength)
    {
        final ByteBuffer view = local.duplicate();
        view.limit(base + offset + sliceLength).position(base + offset);
        return view;
    }

    /** A frame of this transfer finished with {@code frameStatus}. */
    void onFrameDone(final DirectFrame.Slice frame, final int frameStatus)
    {
        if (frameStatus != 0 && status == 0)
        {
            status = frameStatus;
        }
        framesLeft--;
        if (frame.opcode != Opcode.COMMIT)
        {
            dataLeft--; // a WRITE_COMMIT is the transfer's one data frame and its COMMIT: committing is set
            if (sliceLanes != null)
            {
                sliceLanes[(int)((frame.remoteOffset - remoteOffset) / sliceBytes)] = null;
                if (dataLeft == 1 && status == 0 && !committing)
                {
                    // Every slice of a sliced WRITE accepted but one: the COMMIT goes behind that one, on its
                    // connection, where the node reads it only after the slice's last byte; no round trip of its own.
                    for (final DirectConnection lane : sliceLanes)
                    {
                        commitConnection = lane != null ? lane : commitConnection;
                    }
                    whenCommitReady();
                }
            }
            if (dataLeft == 0 && commit != null && !committing)
            {
                if (status == 0)
                {
                    whenCommitReady(); // every slice of a sliced WRITE is in place
                }
                else
                {
                    framesLeft--; // no COMMIT for bytes that did not all arrive
                }
            }
        }
        if (framesLeft == 0)
        {
            finish();
        }
    }

    /** Ends the transfer now with {@code failure} (unless it already ended): its loop is letting go of it. */
    void abandon(final int failure)
    {
        if (status == 0)
        {
            status = failure;
        }
        finish();
    }

    private void finish()
    {
        if (finished)
        {
            return;
        }
        finished = true;
        loop.forget(this);
        loop.complete(future, status);
    }

    private void whenCommitReady()
    {
        committing = true;
        if (commit.isDone())
        {
            onCommitRecord(commit.getNow(null), commit.isCompletedExceptionally());
            return;
        }
        commit.whenComplete((record, error) -> loop.execute(() -> onCommitRecord(record, error != null)));
    }

    private void onCommitRecord(final byte[] record, final boolean failed)
    {
        if (finished)
        {
            return; // abandoned while the record was being made
        }
        final DirectFrame.Slice frame = new DirectFrame.Slice(this, Opcode.COMMIT, remoteOffset,
            record == null || failed ? ByteBuffer.allocate(0) : ByteBuffer.wrap(record),
            record == null || failed ? 0 : record.length);
        if (failed || record == null)
        {
            onFrameDone(frame, INTERNAL_ERROR_VALUE);
        }
        else if (status != 0)
        {
            onFrameDone(frame, status); // the WRITE failed meanwhile: no COMMIT
        }
        else
        {
            commitConnection.enqueue(frame);
        }
    }
}
