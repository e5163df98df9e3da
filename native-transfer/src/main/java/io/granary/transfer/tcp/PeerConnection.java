package io.granary.transfer.tcp;

import io.granary.protocol.Opcode;
import io.granary.transfer.TransferRequest;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.EventLoopGroup;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;

import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;

/**
 * Everything the engine keeps for one storage node: a fixed number of lane slots (filled lazily and
 * refilled when a lane dies), round-robin slice placement, and the bound on frames outstanding to the
 * node. Thread safe.
 */
final class PeerConnection
{
    private final String endpoint;
    private final InetSocketAddress address;
    private final EventLoopGroup group;
    private final Bootstrap bootstrap;
    private final int sliceBytes;
    private final int maxOutstandingFrames;
    private final long timeoutMs;
    private final AtomicReferenceArray<Lane> lanes;
    private final AtomicInteger nextLane = new AtomicInteger();
    private final AtomicInteger outstandingFrames = new AtomicInteger();

    PeerConnection(
        final String endpoint,
        final InetSocketAddress address,
        final EventLoopGroup group,
        final Bootstrap bootstrap,
        final int lanesPerPeer,
        final int sliceBytes,
        final int maxOutstandingFrames,
        final long timeoutMs)
    {
        this.endpoint = endpoint;
        this.address = address;
        this.group = group;
        this.bootstrap = bootstrap;
        this.sliceBytes = sliceBytes;
        this.maxOutstandingFrames = maxOutstandingFrames;
        this.timeoutMs = timeoutMs;
        this.lanes = new AtomicReferenceArray<>(lanesPerPeer);
    }

    String endpoint()
    {
        return endpoint;
    }

    /** Frames sent or queued to this peer and not yet completed. */
    int outstandingFrames()
    {
        return outstandingFrames.get();
    }

    CompletableFuture<Integer> submit(final TransferRequest request, final long tokenExpiryMs, final byte[] tokenMac)
    {
        final int length = request.length();
        final int sliceCount = length <= sliceBytes ? 1 : (int)((length + (long)sliceBytes - 1) / sliceBytes);
        if (!tryAcquire(sliceCount))
        {
            return CompletableFuture.completedFuture(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        }

        final PendingTransfer transfer = new PendingTransfer(sliceCount);
        final int opcode = request.op() == TransferRequest.Op.READ ? Opcode.READ : Opcode.WRITE;
        final ByteBuffer local = request.local();
        final int base = local.position();
        final int firstLane = nextLane.getAndIncrement();
        for (int i = 0; i < sliceCount; i++)
        {
            final int sliceOffset = i * sliceBytes;
            final int sliceLength = Math.min(sliceBytes, length - sliceOffset);
            final ByteBuffer view = local.duplicate();
            view.limit(base + sliceOffset + sliceLength).position(base + sliceOffset);
            final TransferSlice slice = new TransferSlice(
                transfer, this, opcode, request.segmentId(), request.remoteOffset() + sliceOffset, view, sliceLength,
                tokenExpiryMs, tokenMac);
            lane(firstLane + i).enqueue(slice);
        }
        return transfer.future();
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

    void release(final int frames)
    {
        outstandingFrames.addAndGet(-frames);
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
            final Lane fresh = new Lane(this, group.next(), bootstrap, address, timeoutMs);
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

    /** Fails everything pending on every lane; later submits open new lanes unless the engine refuses them. */
    void close()
    {
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
