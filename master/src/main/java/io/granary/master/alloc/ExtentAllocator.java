package io.granary.master.alloc;

/**
 * Carves extents (offset, length) out of one segment's address space. The master holds one per
 * mounted segment; it never touches the segment's memory, only its offsets.
 *
 * <p>Not thread safe: the owning {@code SegmentAllocation} serialises calls.
 */
public interface ExtentAllocator
{
    /** Sentinel returned by {@link #allocate(long)} when no free block fits. */
    long NO_SPACE = -1L;

    /**
     * Allocates at least {@code size} bytes (rounded up to the allocator's granularity).
     *
     * @return the extent's offset, aligned to {@link #granularity()}, or {@link #NO_SPACE}.
     * @throws IllegalArgumentException if size is not positive.
     */
    long allocate(long size);

    /**
     * Takes exactly the extent at {@code offset} of at least {@code size} bytes (rounded up to the granularity),
     * if every byte of it is free: how a master rebuilding from storage-node ledgers marks the extents that
     * already hold data. Cheapest when called in increasing offset order.
     *
     * @return true when the extent is now allocated (free it with {@link #free(long)}); false when the offset is
     *         misaligned, the range leaves the segment or overlaps an allocation. Nothing changes then.
     * @throws IllegalArgumentException if size is not positive.
     */
    boolean allocateAt(long offset, long size);

    /**
     * Returns an extent previously returned by {@link #allocate(long)}.
     *
     * @throws IllegalArgumentException if {@code offset} is not the start of a live allocation
     *         (double free or a wrong offset); the allocator state is left unchanged.
     */
    void free(long offset);

    /** Bytes actually reserved for the allocation at {@code offset} (size rounded up), or -1 if none. */
    long allocationSize(long offset);

    long capacity();

    /** Sum of the rounded sizes of live allocations. */
    long allocatedBytes();

    int allocationCount();

    /** Size of the largest single free block: the largest allocation that would succeed now. */
    long largestFreeBlock();

    /** Alignment and size rounding unit, a power of two. */
    int granularity();
}
