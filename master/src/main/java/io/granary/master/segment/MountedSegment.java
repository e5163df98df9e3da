package io.granary.master.segment;

import io.granary.master.alloc.ExtentAllocator;

/**
 * A storage-node segment as the master sees it: where it lives and the allocator that carves its
 * offsets. The allocator is guarded by this object's monitor; {@link #alive} turns false once when
 * the segment is unmounted or its node expires, after which frees are ignored.
 */
public final class MountedSegment
{
    private final String nodeId;
    private final String nodeName;
    private final String endpoint;
    private final int segmentId;
    private final String name;
    private final long sizeBytes;
    private final ExtentAllocator allocator;
    private volatile boolean alive = true;

    public MountedSegment(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String name,
        final long sizeBytes,
        final ExtentAllocator allocator)
    {
        this.nodeId = nodeId;
        this.nodeName = nodeName;
        this.endpoint = endpoint;
        this.segmentId = segmentId;
        this.name = name;
        this.sizeBytes = sizeBytes;
        this.allocator = allocator;
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
    public synchronized long allocate(final long lengthBytes)
    {
        if (!alive)
        {
            return ExtentAllocator.NO_SPACE;
        }
        return allocator.allocate(Math.max(1, lengthBytes));
    }

    /** Returns an extent; ignored once the segment is gone (its allocator is discarded with it). */
    public synchronized void free(final long offset)
    {
        if (alive)
        {
            allocator.free(offset);
        }
    }

    synchronized void markDead()
    {
        alive = false;
    }

    public synchronized long allocatedBytes()
    {
        return allocator.allocatedBytes();
    }

    public synchronized long freeBytes()
    {
        return alive ? allocator.capacity() - allocator.allocatedBytes() : 0;
    }

    public synchronized int allocationCount()
    {
        return allocator.allocationCount();
    }

    public synchronized long largestFreeBlock()
    {
        return alive ? allocator.largestFreeBlock() : 0;
    }

    @Override
    public String toString()
    {
        return name + "@" + endpoint + "#" + Integer.toUnsignedString(segmentId);
    }
}
