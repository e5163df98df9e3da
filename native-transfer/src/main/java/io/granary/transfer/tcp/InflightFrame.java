package io.granary.transfer.tcp;

import io.granary.protocol.FrameHeader;
import io.netty.buffer.ByteBuf;

import java.util.concurrent.ScheduledFuture;

/**
 * A request frame a lane has sent and waits an answer for: a single slice of a transfer, or a vector of small
 * READs or of small WRITE_COMMITs. Owned by the lane's event loop from send to completion; {@link #run()} is its
 * timeout.
 */
abstract class InflightFrame implements Runnable
{
    // Event-loop confined once handed to a lane.
    long requestId;
    Lane lane;
    ScheduledFuture<?> timeout;

    /** The request opcode; the answer must carry it with the response bit. */
    abstract int opcode();

    abstract boolean isDone();

    /** Completes the frame (every transfer part it carries) once; later calls are ignored. */
    abstract void complete(int status);

    /**
     * False when {@code response} (its opcode already matched) does not echo this request's addressing fields: the
     * stream is then out of sync. Called before {@link #acceptsPayload}.
     */
    abstract boolean echoedBy(FrameHeader response);

    /**
     * The response header announced {@code payloadBytes} payload bytes: false when that cannot be the answer to
     * this request (the stream is then out of sync).
     */
    abstract boolean acceptsPayload(long payloadBytes);

    /** Takes {@code count} payload bytes from {@code in} at its reader index (which it leaves untouched). */
    abstract void receive(ByteBuf in, int count);

    /** A buffer over where the next payload bytes go, for the socket to read into directly, or null. */
    abstract ByteBuf inPlaceView(int maxBytes);

    /** {@code count} payload bytes landed through {@link #inPlaceView}. */
    abstract void receivedInPlace(int count);

    /** The whole payload arrived. */
    abstract void payloadComplete();

    /**
     * Why the payload received so far cannot be the answer to this request (the stream is then out of sync and the
     * lane is closed), or null while it can.
     */
    String mismatch()
    {
        return null;
    }

    /** True for a WRITE whose payload may still sit in the outbound buffer (a timeout must then drop the lane). */
    boolean payloadPending()
    {
        return false;
    }

    final void cancelTimeout()
    {
        final ScheduledFuture<?> t = timeout;
        if (t != null)
        {
            timeout = null;
            t.cancel(false);
        }
    }

    /** The timeout, run on the lane's event loop. */
    @Override
    public final void run()
    {
        timeout = null;
        if (!isDone())
        {
            lane.onTimeout(this);
        }
    }
}
