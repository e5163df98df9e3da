package io.granary.transfer.tcp;

import io.granary.protocol.FrameHeader;

/**
 * Small slices bound for one lane and sent as one vector frame (a {@link VectorRead}'s READV or a
 * {@link VectorWrite}'s WRITEV): the slices in entry order, and what both answers share (an echo of only the request
 * id; a refusal of the whole vector without payload; completing every slice not answered yet). Event-loop confined.
 */
abstract class VectorFrame extends InflightFrame
{
    final TransferSlice[] slices;
    int count;
    /** The slices' range bytes. */
    long bytes;
    boolean done;

    VectorFrame(final int maxEntries)
    {
        slices = new TransferSlice[maxEntries];
    }

    int size()
    {
        return count;
    }

    TransferSlice only()
    {
        return slices[0];
    }

    @Override
    boolean isDone()
    {
        return done;
    }

    @Override
    void complete(final int status)
    {
        if (done)
        {
            return;
        }
        done = true;
        cancelTimeout();
        for (int i = 0; i < count; i++)
        {
            slices[i].complete(status); // slices already answered ignore it
        }
    }

    /**
     * A vector's answer echoes only the request id: segment and offset are 0, and a refusal of the whole vector
     * carries no payload (length 0); the length of an answer with statuses is checked by {@link #acceptsPayload}.
     */
    @Override
    boolean echoedBy(final FrameHeader response)
    {
        return response.segmentId == 0 && response.offset == 0 && (response.status == 0 || response.length == 0);
    }
}
