package io.granary.master.alloc;

import java.util.Objects;

/**
 * The allocation state of one mounted segment: its identity and the {@link ExtentAllocator} that carves its
 * extents. This is what the master's segment registry holds per segment.
 *
 * <p>Thread safe: every call is serialised on this object's private lock, so the wrapped allocator must not be
 * touched by anyone else.
 */
public final class SegmentAllocation
{
    private final Object lock = new Object();
    private final int segmentId;
    private final String segmentName;
    private final ExtentAllocator allocator;
    /** Capacity minus allocated bytes as of the last change (written under the lock, read without it). */
    private volatile long free;

    /**
     * @param segmentId   node-local segment id as carried in transfer frames (the protocol's uint32 bits).
     * @param segmentName cluster-unique segment name, e.g. "node-1/seg0".
     * @param allocator   a fresh allocator owned from now on by this object.
     */
    public SegmentAllocation(final int segmentId, final String segmentName, final ExtentAllocator allocator)
    {
        if (segmentName == null || segmentName.isBlank())
        {
            throw new IllegalArgumentException("segment name must not be blank");
        }
        this.segmentId = segmentId;
        this.segmentName = segmentName;
        this.allocator = Objects.requireNonNull(allocator, "allocator");
        noteFree();
    }

    /** A segment of {@code capacityBytes} carved by a {@link TlsfExtentAllocator} with the default granularity. */
    public static SegmentAllocation tlsf(final int segmentId, final String segmentName, final long capacityBytes)
    {
        return new SegmentAllocation(segmentId, segmentName, new TlsfExtentAllocator(capacityBytes));
    }

    public int segmentId()
    {
        return segmentId;
    }

    public String segmentName()
    {
        return segmentName;
    }

    /** Usable capacity in bytes (the segment size rounded down to the allocator's granularity). */
    public long capacity()
    {
        synchronized (lock)
        {
            return allocator.capacity();
        }
    }

    /** @see ExtentAllocator#allocate(long) */
    public long allocate(final long sizeBytes)
    {
        synchronized (lock)
        {
            final long offset = allocator.allocate(sizeBytes);
            noteFree();
            return offset;
        }
    }

    /** @see ExtentAllocator#allocateAt(long, long) */
    public boolean allocateAt(final long offset, final long sizeBytes)
    {
        synchronized (lock)
        {
            final boolean allocated = allocator.allocateAt(offset, sizeBytes);
            noteFree();
            return allocated;
        }
    }

    /** @see ExtentAllocator#free(long) */
    public void free(final long offset)
    {
        synchronized (lock)
        {
            try
            {
                allocator.free(offset);
            }
            finally
            {
                noteFree();
            }
        }
    }

    /** @see ExtentAllocator#allocationSize(long) */
    public long allocationSize(final long offset)
    {
        synchronized (lock)
        {
            return allocator.allocationSize(offset);
        }
    }

    /** Publishes the free bytes after a change (under the lock, or before the object is shared). */
    private void noteFree()
    {
        free = allocator.capacity() - allocator.allocatedBytes();
    }

    /**
     * Bytes not allocated (capacity minus allocated) as of the last allocation or free, read without the lock: what
     * placement compares per put (an allocation re-checks under the lock), without the snapshot {@link #stats()} takes.
     */
    public long freeBytes()
    {
        return free;
    }

    /** A consistent snapshot of the segment's usage, taken under the lock. */
    public Stats stats()
    {
        synchronized (lock)
        {
            return new Stats(
                segmentId,
                segmentName,
                allocator.capacity(),
                allocator.allocatedBytes(),
                allocator.allocationCount(),
                allocator.largestFreeBlock());
        }
    }

    @Override
    public String toString()
    {
        return "SegmentAllocation{" + segmentId + ", " + segmentName + "}";
    }

    /** Usage of one segment at one moment; maps onto the control plane's SegmentStatus. */
    public record Stats(
        int segmentId,
        String segmentName,
        long capacityBytes,
        long allocatedBytes,
        int allocationCount,
        long largestFreeBytes)
    {
        public long freeBytes()
        {
            return capacityBytes - allocatedBytes;
        }

        /** Allocated fraction of the capacity, in [0, 1]. */
        public double utilisation()
        {
            return (double)allocatedBytes / capacityBytes;
        }
    }
}
