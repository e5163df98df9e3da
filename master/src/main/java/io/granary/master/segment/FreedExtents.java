package io.granary.master.segment;

import io.granary.proto.FreedExtent;

import java.util.ArrayList;
import java.util.List;

/**
 * The extents of one node the master freed since its last heartbeat (removals, evictions, revoked and
 * abandoned puts), waiting to go out in the next heartbeat answers so that the node's ledger forgets them.
 * Bounded: beyond {@link #MAX_QUEUED} the oldest notices are dropped and counted (the cost is that a
 * master restart may bring those objects back, with their right bytes). Thread safe.
 *
 * <p>The notices live in a ring of primitive fields (segment id, offset, version per notice) that grows by doubling up
 * to the bound and goes back to its first size once drained: a master freeing extents at the rate it stores new
 * values (eviction under a full pool) allocates nothing per notice, so none of them survives into the old generation.
 */
public final class FreedExtents
{
    /** Most notices kept per node between heartbeats. */
    public static final int MAX_QUEUED = 1 << 20;
    /** Most notices per heartbeat answer; the node asks again at once when more are waiting. */
    public static final int MAX_PER_HEARTBEAT = 16_384;
    private static final int INITIAL_CAPACITY = 1024;

    private long[] offsets = new long[INITIAL_CAPACITY];
    private long[] versions = new long[INITIAL_CAPACITY];
    private int[] segmentIds = new int[INITIAL_CAPACITY];
    /** Slot of the oldest notice; notices are at head, head + 1, ... (mod capacity). */
    private int head;
    private int size;
    private long dropped;

    synchronized void add(final int segmentId, final long offset, final long version)
    {
        if (size == MAX_QUEUED)
        {
            head = (head + 1) & (offsets.length - 1); // the oldest goes
            size--;
            dropped++;
        }
        else if (size == offsets.length)
        {
            resize(offsets.length * 2);
        }
        final int slot = (head + size) & (offsets.length - 1);
        segmentIds[slot] = segmentId;
        offsets[slot] = offset;
        versions[slot] = version;
        size++;
    }

    /** Takes up to {@code max} notices, oldest first. */
    public synchronized List<FreedExtent> drain(final int max)
    {
        final int n = Math.min(max, size);
        final List<FreedExtent> out = new ArrayList<>(n);
        final int mask = offsets.length - 1;
        for (int i = 0; i < n; i++)
        {
            final int slot = (head + i) & mask;
            out.add(FreedExtent.newBuilder().setSegmentId(segmentIds[slot]).setOffset(offsets[slot])
                .setVersion(versions[slot]).build());
        }
        head = (head + n) & mask;
        size -= n;
        if (size == 0 && offsets.length > INITIAL_CAPACITY)
        {
            resize(INITIAL_CAPACITY); // a burst's ring is not kept
        }
        return out;
    }

    private void resize(final int capacity)
    {
        final long[] newOffsets = new long[capacity];
        final long[] newVersions = new long[capacity];
        final int[] newSegmentIds = new int[capacity];
        final int mask = offsets.length - 1;
        for (int i = 0; i < size; i++)
        {
            final int slot = (head + i) & mask;
            newOffsets[i] = offsets[slot];
            newVersions[i] = versions[slot];
            newSegmentIds[i] = segmentIds[slot];
        }
        offsets = newOffsets;
        versions = newVersions;
        segmentIds = newSegmentIds;
        head = 0;
    }

    public synchronized int size()
    {
        return size;
    }

    /** Notices dropped because the queue was full. */
    public synchronized long dropped()
    {
        return dropped;
    }
}
