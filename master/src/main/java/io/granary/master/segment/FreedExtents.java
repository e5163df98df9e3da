package io.granary.master.segment;

import io.granary.proto.FreedExtent;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The extents of one node the master freed since its last heartbeat (removals, evictions, revoked and
 * abandoned puts), waiting to go out in the next heartbeat answers so that the node's ledger forgets them.
 * Bounded: beyond {@link #MAX_QUEUED} the oldest notices are dropped and counted (the cost is that a
 * master restart may bring those objects back, with their right bytes). Thread safe.
 */
public final class FreedExtents
{
    /** Most notices kept per node between heartbeats. */
    public static final int MAX_QUEUED = 1 << 20;
    /** Most notices per heartbeat answer; the node asks again at once when more are waiting. */
    public static final int MAX_PER_HEARTBEAT = 16_384;

    private final ArrayDeque<long[]> queue = new ArrayDeque<>();
    private long dropped;

    synchronized void add(final int segmentId, final long offset, final long version)
    {
        if (queue.size() >= MAX_QUEUED)
        {
            queue.pollFirst();
            dropped++;
        }
        queue.addLast(new long[] {segmentId, offset, version});
    }

    /** Takes up to {@code max} notices, oldest first. */
    public synchronized List<FreedExtent> drain(final int max)
    {
        final int n = Math.min(max, queue.size());
        final List<FreedExtent> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            final long[] f = queue.pollFirst();
            out.add(FreedExtent.newBuilder().setSegmentId((int)f[0]).setOffset(f[1]).setVersion(f[2]).build());
        }
        return out;
    }

    public synchronized int size()
    {
        return queue.size();
    }

    /** Notices dropped because the queue was full. */
    public synchronized long dropped()
    {
        return dropped;
    }
}
