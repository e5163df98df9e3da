package io.granary.master.meta;

import io.granary.master.segment.MountedSegment;

/**
 * One copy of an object: an extent of a mounted segment, and the version of the object it holds (set once,
 * under the owner shard lock, before the object is published).
 */
public final class ReplicaRecord
{
    private final MountedSegment segment;
    private final long offset;
    private final long length;
    /** Version of the object in this extent; the node's ledger entry is freed by it. 0 until set. */
    long version;
    /** The COMPLETE-status wire form, built on first read; guarded by the owner shard lock. */
    io.granary.proto.Replica completeProto;
    /**
     * The READ token of the second {@link #readTokenExpirySec}, overwritten in place when that second changes (an
     * array allocated once, so that refreshing it stores no new object into this long-lived record); owner shard
     * lock. Null until the first read with tokens on.
     */
    byte[] readToken;
    long readTokenExpirySec;

    public ReplicaRecord(final MountedSegment segment, final long offset, final long length)
    {
        this.segment = segment;
        this.offset = offset;
        this.length = length;
    }

    ReplicaRecord(final MountedSegment segment, final long offset, final long length, final long version)
    {
        this(segment, offset, length);
        this.version = version;
    }

    public long version()
    {
        return version;
    }

    public MountedSegment segment()
    {
        return segment;
    }

    public long offset()
    {
        return offset;
    }

    public long length()
    {
        return length;
    }

    /**
     * Gives the extent back to its segment's allocator and tells its node, so that the node's ledger forgets
     * the object (ignored if the segment is gone).
     */
    public void release()
    {
        segment.free(offset, version);
    }
}
