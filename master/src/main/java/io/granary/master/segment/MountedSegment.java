package io.granary.master.segment;

import io.granary.master.alloc.ExtentAllocator;
import io.granary.master.alloc.SegmentAllocation;

/**
 * A storage-node segment as the master sees it: where it lives and the allocator that carves its
 * offsets (a thread-safe {@link SegmentAllocation}). {@link #isAlive()} turns false once, when the
 * segment is unmounted or its node expires; after that allocations fail and frees are ignored.
 */
public final class MountedSegment
{
    private final String nodeId;
    private final String nodeName;
    private final String endpoint;
    private final int segmentId;
    private final String name;
    private final long sizeBytes;
    private final SegmentAllocation allocation;
    private volatile boolean alive = true;

    public MountedSegment(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String name,
        final long sizeBytes,
        final SegmentAllocation allocation)
    {
        this.nodeId = nodeId;
        this.nodeName = nodeName;
        this.endpoint = endpoint;
        this.segmentId = segmentId;
        this.name = name;
        this.sizeBytes = sizeBytes;
        this.allocation = allocation;
    }

    public String nodeId()
    {
        return nodeId;
    }

    public String nodeName()
    {
        return nodeName;
    }

    public String endpoint()
    {
        return endpoint;
    }

    public int segmentId()
    {
        return segmentId;
    }

    public String name()
    {
        return name;
    }

    public long sizeBytes()
    {
        return sizeBytes;
    }

    public boolean isAlive()
    {
        return alive;
    }

    /** @return the offset, or {@link ExtentAllocator#NO_SPACE}. */
    public long allocate(final long lengthBytes)
    {
        return alive ? allocation.allocate(Math.max(1, lengthBytes)) : ExtentAllocator.NO_SPACE;
    }

    /** Returns an extent; ignored once the segment is gone (its allocator is discarded with it). */
    public void free(final long offset)
    {
        if (alive)
        {
            allocation.free(offset);
        }
    }

    void markDead()
    {
        alive = false;
    }

    public SegmentAllocation.Stats stats()
    {
        return allocation.stats();
    }

    public long allocatedBytes()
    {
        return allocation.stats().allocatedBytes();
    }

    /** Bytes a new allocation could still take (0 once dead). */
    public long freeBytes()
    {
        return alive ? allocation.stats().freeBytes() : 0;
    }

    @Override
    public String toString()
    {
        return name + "@" + endpoint + "#" + Integer.toUnsignedString(segmentId);
    }
}
