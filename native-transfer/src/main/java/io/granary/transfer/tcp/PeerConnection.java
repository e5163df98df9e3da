package io.granary.transfer.tcp;

import io.granary.common.tls.TlsContexts;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.handler.ssl.SslContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Everything the engine keeps for one storage node: a fixed number of lane slots (filled lazily and
 * refilled when a lane dies), round-robin slice placement, a window of slices in flight per transfer,
 * and the node's bounded queue with its pending admissions ({@link AdmissionControl}). Thread safe.
 */
final class PeerConnection
{
    private static final Logger LOG = LoggerFactory.getLogger(PeerConnection.class);
    /** Bytes of one transfer kept in flight per lane: enough to keep a lane busy, small enough to let others in. */
    static final int WINDOW_BYTES_PER_LANE = 4 << 20;
    static final int MIN_WINDOW_SLICES_PER_LANE = 2;
    static final int MAX_WINDOW_SLICES_PER_LANE = 16;

    private final String endpoint;
    private final InetSocketAddress address;
    private final EventLoopGroup group;
    private final Bootstrap bootstrap;
    private final int sliceBytes;
    private final boolean writeCommits;
    private final int sliceWindow;
    private final long timeoutMs;
    private final int maxVectorEntries;
    private final AtomicReferenceArray<Lane> lanes;
    private final AtomicInteger nextLane = new AtomicInteger();
    private final AdmissionControl admission;
    private final SslContext sslContext;

    PeerConnection(
        final String endpoint,
        final InetSocketAddress address,
        final EventLoopGroup group,
        final Bootstrap bootstrap,
        final TransferConfig config,
        final AdmissionCounters counters,
        final SslContext sslContext)
    {
        this.endpoint = endpoint;
        this.sslContext = sslContext;
        this.address = address;
        this.group = group;
        this.bootstrap = bootstrap;
        this.sliceBytes = config.sliceBytes();
        this.writeCommits = config.writeCommits();
        this.sliceWindow = sliceWindow(config.lanesPerPeer(), config.sliceBytes());
        this.timeoutMs = config.transferTimeoutMs();
        this.maxVectorEntries = config.maxVectorEntries();
        this.lanes = new AtomicReferenceArray<>(config.lanesPerPeer());
        this.admission = new AdmissionControl(
            endpoint, config.maxQueuedTransfersPerPeer(), config.maxPendingAdmissionsPerPeer(),
            config.admissionTimeoutMs(), group.next(), counters, this::start);
    }

    /** Slices of one transfer in flight at a time: a few per lane, about {@link #WINDOW_BYTES_PER_LANE} each. */
    static int sliceWindow(final int lanesPerPeer, final int sliceBytes)
    {
        final int perLane = (int)Math.min(MAX_WINDOW_SLICES_PER_LANE, Math.max(
            MIN_WINDOW_SLICES_PER_LANE, (WINDOW_BYTES_PER_LANE + (long)sliceBytes - 1) / sliceBytes));
        return lanesPerPeer * perLane;
    }

    String endpoint()
    {
        return endpoint;
    }

    /** True when this peer's lanes speak TLS. */
    boolean tlsEnabled()
    {
        return sslContext != null;
    }

    /**
     * The pipeline of a new lane: the response decoder, behind a TLS handler when TLS is on (the server's
     * certificate must name the endpoint's host). Only plain lanes receive READ payloads in place: with TLS the
     * socket bytes are ciphertext, and the SslHandler decrypts into its own buffers.
     */
    ChannelHandler laneHandler(final Lane lane)
    {
        if (!tlsEnabled())
        {
            return new ResponseDecoder(lane, true);
        }
        return new ChannelInitializer<>()
        {
            @Override
            protected void initChannel(final Channel ch)
            {
                ch.pipeline().addLast(new ResponseDecoder(lane, !tlsEnabled()));
                TlsContexts.addClientHandler(ch, sslContext, address.getHostString(), address.getPort(), LOG,
                    "storage node");
            }
        };
    }

    /** Frames admitted to this peer and not yet completed (sent, queued on a lane or waiting for the window). */
    int outstandingFrames()
    {
        return admission.outstandingFrames();
    }

    /** Transfers waiting for room in this peer's queue. */
    int pendingAdmissions()
    {
        return admission.pendingAdmissions();
    }

    CompletableFuture<Integer> submit(final TransferRequest request, final FrameToken token)
    {
        final PendingTransfer transfer = new PendingTransfer(
            this, request, sliceBytes, nextLane.getAndIncrement(), token, writeCommits);
        admission.submit(transfer);
        return transfer.future();
    }

    /** An admitted transfer: put its first slices on the lanes. */
    private void start(final PendingTransfer transfer)
    {
        transfer.start(sliceWindow);
    }

    /** Hands one slice to the lane its ticket picks (round robin over the lane slots). */
    void send(final TransferSlice slice, final int laneTicket)
    {
        if (admission.isClosed())
        {
            slice.complete(TRANSFER_FAIL_VALUE);
            return;
        }
        lane(laneTicket).enqueue(slice);
    }

    /**
     * Hands two slices to one lane, in order: the second goes out on the same connection right behind the
     * first, or fails with it if that lane dies (it never moves to another connection).
     */
    void sendPair(final TransferSlice first, final TransferSlice second, final int laneTicket)
    {
        if (admission.isClosed())
        {
            first.complete(TRANSFER_FAIL_VALUE);
            second.complete(TRANSFER_FAIL_VALUE);
            return;
        }
        final Lane lane = lane(laneTicket);
        lane.enqueue(first);
        lane.enqueue(second);
    }

    /** Hands a slice to the lane its ticket picks and returns that lane, for a later {@link #sendOn}. */
    Lane sendPinned(final TransferSlice slice, final int laneTicket)
    {
        if (admission.isClosed())
        {
            slice.complete(TRANSFER_FAIL_VALUE);
            return null;
        }
        final Lane lane = lane(laneTicket);
        lane.enqueue(slice);
        return lane;
    }

    /**
     * Hands a slice to a lane picked earlier by {@link #sendPinned}: it goes out on that connection behind what was
     * sent there before, or fails if the lane has died (a dead lane fails whatever it is given).
     */
    void sendOn(final Lane lane, final TransferSlice slice)
    {
        if (lane == null || admission.isClosed())
        {
            slice.complete(TRANSFER_FAIL_VALUE);
            return;
        }
        lane.enqueue(slice);
    }

    /** The lane a ticket maps to (a fresh one if it died), for a slice to be sent on with {@link #sendOn}. */
    Lane laneOf(final int laneTicket)
    {
        return admission.isClosed() ? null : lane(laneTicket);
    }

    void release(final int frames)
    {
        admission.release(frames);
    }

    private Lane lane(final int ticket)
    {
        final int index = Math.floorMod(ticket, lanes.length());
        while (true)
        {
            final Lane lane = lanes.get(index);
            if (lane != null && !lane.isDead())
            {
                return lane;
            }
            final Lane fresh = new Lane(this, group.next(), bootstrap, address, timeoutMs, maxVectorEntries);
            if (lanes.compareAndSet(index, lane, fresh))
            {
                fresh.start();
                return fresh;
            }
        }
    }

    void onLaneDead(final Lane lane)
    {
        for (int i = 0; i < lanes.length(); i++)
        {
            lanes.compareAndSet(i, lane, null);
        }
    }

    /** Fails pending admissions and everything on every lane with TRANSFER_FAIL; later submits fail too. */
    void close()
    {
        admission.close();
        for (int i = 0; i < lanes.length(); i++)
        {
            final Lane lane = lanes.getAndSet(i, null);
            if (lane != null)
            {
                lane.close();
            }
        }
    }
}
