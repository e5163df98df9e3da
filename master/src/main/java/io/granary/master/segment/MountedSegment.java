package io.granary.master.segment;

import com.google.protobuf.ByteString;
import io.granary.master.alloc.ExtentAllocator;
import io.granary.master.alloc.SegmentAllocation;

/**
 * A storage-node segment as the master sees it: where it lives and the allocator that carves its
 * offsets (a thread-safe {@link SegmentAllocation}). {@link #isAlive()} turns false once, when the
 * segment is unmounted or its node expires; after that allocations fail and frees are ignored.
 * A segment mounted with its ledger to follow is not {@link #isPlaceable() placeable} until the
 * ledger report ends, so new extents never land on reported data. Frees of versioned extents are
 * queued for the node ({@link FreedExtents}).
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
    private final FreedExtents freed;
    /** UTF-8 of the node id, endpoint and name, encoded once: every lookup answer carries them per replica. */
    private final ByteString nodeIdUtf8;
    private final ByteString endpointUtf8;
    private final ByteString nameUtf8;
    private volatile boolean alive = true;
    private volatile boolean placeable;

    public MountedSegment(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String name,
        final long sizeBytes,
        final SegmentAllocation allocation)
    {
        this(nodeId, nodeName, endpoint, segmentId, name, sizeBytes, allocation, null, true);
    }

    /**
     * @param freed     where frees of versioned extents are queued for the node, or null.
     * @param placeable false while the node's ledger report for this segment is still to come.
     */
    public MountedSegment(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String name,
        final long sizeBytes,
        final SegmentAllocation allocation,
        final FreedExtents freed,
        final boolean placeable)
    {
        this.freed = freed;
        this.placeable = placeable;
        this.nodeId = nodeId;
        this.nodeName = nodeName;
        this.endpoint = endpoint;
        this.segmentId = segmentId;
        this.name = name;
        this.sizeBytes = sizeBytes;
        this.allocation = allocation;
        this.nodeIdUtf8 = ByteString.copyFromUtf8(nodeId);
        this.endpointUtf8 = ByteString.copyFromUtf8(endpoint);
        this.nameUtf8 = ByteString.copyFromUtf8(name);
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

    /** {@link #nodeId()} in UTF-8, for protobuf messages. */
    public ByteString nodeIdUtf8()
    {
        return nodeIdUtf8;
    }

    /** {@link #endpoint()} in UTF-8, for protobuf messages. */
    public ByteString endpointUtf8()
    {
        return endpointUtf8;
    }

    /** {@link #name()} in UTF-8, for protobuf messages. */
    public ByteString nameUtf8()
    {
        return nameUtf8;
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

    /** True once new extents may be placed here: alive, and no ledger report still to come. */
    public boolean isPlaceable()
    {
        return placeable && alive;
    }

    void markPlaceable()
    {
        placeable = true;
    }

    /** @return the offset, or {@link ExtentAllocator#NO_SPACE}. */
    public long allocate(final long lengthBytes)
    {
        return alive ? allocation.allocate(Math.max(1, lengthBytes)) : ExtentAllocator.NO_SPACE;
    }

    /** Takes the extent at {@code offset} a node reported as holding data; false if any of it is taken. */
    public boolean reserve(final long offset, final long lengthBytes)
    {
        return alive && allocation.allocateAt(offset, Math.max(1, lengthBytes));
    }

    /** Returns an extent; ignored once the segment is gone (its allocator is discarded with it). */
    public void free(final long offset)
    {
        free(offset, 0);
    }

    /**
     * Returns an extent that held {@code version} of an object, and queues the free for the node (version 0:
     * the extent never held a committed object, nothing to tell).
     */
    public void free(final long offset, final long version)
    {
        if (alive)
        {
            allocation.free(offset);
            if (version != 0 && freed != null)
            {
                freed.add(segmentId, offset, version);
            }
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
        return alive ? allocation.freeBytes() : 0;
    }

    @Override
    public String toString()
    {
        return name + "@" + endpoint + "#" + Integer.toUnsignedString(segmentId);
    }
}
