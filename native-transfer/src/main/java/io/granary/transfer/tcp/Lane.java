package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.EventLoop;
import io.netty.util.collection.LongObjectHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * One persistent connection to a peer on which frames are pipelined, each with a request id unique
 * on this lane. Any thread may {@link #enqueue} slices; everything else runs on the lane's single event
 * loop, which writes queued frames in batches with one flush per batch (a batch's small READs as READVs, its small
 * WRITE_COMMITs as WRITEVs). A lane that fails is dead for good: its pending slices complete with TRANSFER_FAIL and
 * the peer replaces it on the next submit.
 */
final class Lane
{
    private static final Logger LOG = LoggerFactory.getLogger(Lane.class);

    private enum State
    {
        CONNECTING, ACTIVE, CLOSED
    }

    private final PeerConnection peer;
    private final EventLoop eventLoop;
    private final Bootstrap bootstrap;
    private final InetSocketAddress address;
    private final long timeoutMs;
    private final int maxVectorEntries;
    private final Queue<TransferSlice> submitted = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final Runnable drainTask = this::drain;
    private volatile boolean dead;

    // Event-loop confined.
    private final LongObjectHashMap<InflightFrame> inflight = new LongObjectHashMap<>();
    private State state = State.CONNECTING;
    private Channel channel;
    private long nextRequestId = 1;

    Lane(
        final PeerConnection peer,
        final EventLoop eventLoop,
        final Bootstrap bootstrap,
        final InetSocketAddress address,
        final long timeoutMs,
        final int maxVectorEntries)
    {
        this.peer = peer;
        this.eventLoop = eventLoop;
        this.bootstrap = bootstrap;
        this.address = address;
        this.timeoutMs = timeoutMs;
        this.maxVectorEntries = maxVectorEntries;
    }

    /** True once the lane failed or closed; it accepts no more work and is replaced. */
    boolean isDead()
    {
        return dead;
    }

    /** Starts connecting; called once by the peer right after creating the lane. */
    void start()
    {
        try
        {
            eventLoop.execute(this::connect);
        }
        catch (final RejectedExecutionException ex)
        {
            onEventLoopGone();
        }
    }

    /** Queues a slice for sending; safe from any thread. */
    void enqueue(final TransferSlice slice)
    {
        submitted.offer(slice);
        if (drainScheduled.compareAndSet(false, true))
        {
            try
            {
                eventLoop.execute(drainTask);
            }
            catch (final RejectedExecutionException ex)
            {
                onEventLoopGone();
            }
        }
    }

    /** Fails everything and closes the connection; safe from any thread. */
    void close()
    {
        try
        {
            eventLoop.execute(() -> fail(TRANSFER_FAIL_VALUE, "transfer engine closed"));
        }
        catch (final RejectedExecutionException ex)
        {
            onEventLoopGone();
        }
    }

    private void onEventLoopGone()
    {
        dead = true;
        peer.onLaneDead(this);
        failSubmitted(TRANSFER_FAIL_VALUE);
    }

    private void connect()
    {
        if (state != State.CONNECTING)
        {
            return;
        }
        final ChannelFuture connectFuture = bootstrap.clone(eventLoop)
            .handler(peer.laneHandler(this))
            .connect(address);
        channel = connectFuture.channel();
        connectFuture.addListener((ChannelFuture f) -> onConnectComplete(f));
    }

    private void onConnectComplete(final ChannelFuture f)
    {
        if (state != State.CONNECTING)
        {
            f.channel().close();
            return;
        }
        if (!f.isSuccess())
        {
            fail(TRANSFER_FAIL_VALUE, "connect to " + peer.endpoint() + " failed: " + f.cause());
            return;
        }
        state = State.ACTIVE;
        drain();
    }

    private void drain()
    {
        drainScheduled.set(false);
        if (state == State.CONNECTING)
        {
            return; // onConnectComplete drains
        }
        if (state == State.CLOSED)
        {
            failSubmitted(TRANSFER_FAIL_VALUE);
            return;
        }

        final Channel ch = channel;
        int frames = 0;
        VectorRead vector = null;
        VectorWrite writes = null;
        TransferSlice slice;
        while ((slice = submitted.poll()) != null)
        {
            if (slice.isDone())
            {
                continue;
            }
            if (maxVectorEntries > 1 && VectorRead.fits(slice))
            {
                // Small READs queued together travel as one READV frame.
                if (vector == null)
                {
                    vector = new VectorRead(maxVectorEntries);
                }
                if (vector.add(slice))
                {
                    continue;
                }
                sendVector(ch, vector);
                frames++;
                vector = new VectorRead(maxVectorEntries);
                vector.add(slice);
                continue;
            }
            if (maxVectorEntries > 1 && VectorWrite.fits(slice))
            {
                // Small WRITE_COMMITs queued together travel as one WRITEV frame.
                if (writes == null)
                {
                    writes = new VectorWrite(maxVectorEntries);
                }
                if (writes.add(slice))
                {
                    continue;
                }
                sendWrites(ch, writes);
                frames++;
                writes = new VectorWrite(maxVectorEntries);
                writes.add(slice);
                continue;
            }
            if (writes != null)
            {
                // Whatever else was queued behind them leaves behind them, as it was queued.
                sendWrites(ch, writes);
                frames++;
                writes = null;
            }
            send(ch, slice);
            frames++;
        }
        if (vector != null)
        {
            sendVector(ch, vector);
            frames++;
        }
        if (writes != null)
        {
            sendWrites(ch, writes);
            frames++;
        }
        if (frames > 0)
        {
            ch.flush();
        }
    }

    private void sendVector(final Channel ch, final VectorRead vector)
    {
        if (vector.size() == 1)
        {
            send(ch, vector.only());
            return;
        }
        final long requestId = track(vector);
        final int bytes = FrameDescriptor.HEADER_LENGTH * (1 + vector.size());
        final ByteBuf frame = ch.alloc().directBuffer(bytes, bytes);
        vector.encode(frame, requestId);
        ch.write(frame, ch.voidPromise());
    }

    /**
     * Sends queued small WRITE_COMMITs: one alone as it is, more as one WRITEV whose header and table leave in one
     * buffer and whose values follow as zero-copy views of the callers' buffers.
     */
    private void sendWrites(final Channel ch, final VectorWrite vector)
    {
        if (vector.size() == 1)
        {
            send(ch, vector.only());
            return;
        }
        final long requestId = track(vector);
        final int bytes = vector.headerBytes();
        final ByteBuf frame = ch.alloc().directBuffer(bytes, bytes);
        vector.encode(frame, requestId);
        ch.write(frame, ch.voidPromise());
        final int last = vector.size() - 1;
        for (int i = 0; i < last; i++)
        {
            ch.write(vector.entry(i).payload(), ch.voidPromise());
        }
        ch.write(vector.entry(last).payload(), ch.newPromise().addListener(vector));
    }

    /** Gives {@code frame} the next request id, registers it as waiting for an answer and starts its timeout. */
    private long track(final InflightFrame frame)
    {
        final long requestId = nextRequestId++;
        frame.requestId = requestId;
        frame.lane = this;
        inflight.put(requestId, frame);
        frame.timeout = eventLoop.schedule(frame, timeoutMs, TimeUnit.MILLISECONDS);
        return requestId;
    }

    private void send(final Channel ch, final TransferSlice slice)
    {
        final long requestId = track(slice);

        final ByteBuf header = ch.alloc().directBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
        slice.encodeHeader(header, requestId);
        if ((slice.opcode == Opcode.WRITE || slice.opcode == Opcode.COMMIT || slice.opcode == Opcode.WRITE_COMMIT) &&
            slice.length > 0)
        {
            ch.write(header, ch.voidPromise());
            final ByteBuf record = slice.record();
            if (record != null)
            {
                ch.write(record, ch.voidPromise());
            }
            ch.write(slice.payload(), ch.newPromise().addListener(slice));
        }
        else
        {
            slice.payloadWritten = true;
            ch.write(header, ch.voidPromise());
        }
    }

    /** True when this lane sent a request with this id (answered, pending or timed out). */
    boolean wasIssued(final long requestId)
    {
        return requestId > 0 && requestId < nextRequestId;
    }

    /** Takes the frame waiting for {@code requestId}, or null if it is unknown (e.g. timed out). */
    InflightFrame takeInflight(final long requestId)
    {
        return inflight.remove(requestId);
    }

    /** True if request {@code requestId} is an outstanding READ of at least {@code minBytes} (event loop only). */
    boolean expectsLargeRead(final long requestId, final int minBytes)
    {
        final InflightFrame frame = inflight.get(requestId);
        return frame instanceof TransferSlice && frame.opcode() == Opcode.READ &&
            ((TransferSlice)frame).length >= minBytes;
    }

    void onTimeout(final InflightFrame frame)
    {
        inflight.remove(frame.requestId);
        if (frame.payloadPending())
        {
            // The caller's buffer still sits in the outbound queue: drop the connection so that the
            // engine lets go of it before the caller gets the buffer back.
            fail(TRANSFER_FAIL_VALUE, "write to " + peer.endpoint() + " stalled for " + timeoutMs + " ms");
        }
        frame.complete(RPC_TIMEOUT_VALUE);
    }

    /** The connection broke, closed or spoke nonsense: everything pending fails and the lane is dropped. */
    void fail(final int status, final String reason)
    {
        if (state == State.CLOSED)
        {
            failSubmitted(status);
            return;
        }
        state = State.CLOSED;
        dead = true;
        peer.onLaneDead(this);
        final int pending = inflight.size() + submitted.size();
        if (pending > 0)
        {
            LOG.debug("lane to {} failed with {} pending: {}", peer.endpoint(), pending, reason);
        }
        if (channel != null)
        {
            channel.close();
        }
        final ArrayList<InflightFrame> frames = new ArrayList<>(inflight.values());
        inflight.clear();
        for (final InflightFrame frame : frames)
        {
            frame.complete(status);
        }
        failSubmitted(status);
    }

    private void failSubmitted(final int status)
    {
        TransferSlice slice;
        while ((slice = submitted.poll()) != null)
        {
            slice.complete(status);
        }
    }

    String endpoint()
    {
        return peer.endpoint();
    }
}
