package io.granary.master.segment;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Registry of storage nodes and their mounted segments, and the node-TTL liveness rule.
 *
 * <p>Mutations are serialised by this object's monitor; {@link #heartbeat} and
 * {@link #liveSegments()} are lock-free reads (a copy-on-write snapshot array). The registry never
 * touches object metadata: callers purge replicas of the segments it reports as removed.
 */
public final class SegmentRegistry
{
    private static final Logger LOG = LoggerFactory.getLogger(SegmentRegistry.class);

    /** Outcome of a mount: a code (ErrorCode number) and segments of a replaced node incarnation. */
    public static final class MountResult
    {
        public final int code;
        public final List<MountedSegment> replaced;

        MountResult(final int code, final List<MountedSegment> replaced)
        {
            this.code = code;
            this.replaced = replaced;
        }
    }

    private final Clock clock;
    private final AllocationFactory allocationFactory;
    private final Map<String, NodeRecord> nodes = new ConcurrentHashMap<>();
    private volatile MountedSegment[] live = new MountedSegment[0];
    private final LongAdder nodesJoined = new LongAdder();
    private final LongAdder nodesExpired = new LongAdder();
    private final LongAdder nodesLeft = new LongAdder();

    /** Creates the allocator of a newly mounted segment. */
    @FunctionalInterface
    public interface AllocationFactory
    {
        SegmentAllocation create(int segmentId, String segmentName, long sizeBytes);
    }

    public SegmentRegistry(final Clock clock, final AllocationFactory allocationFactory)
    {
        this.clock = clock;
        this.allocationFactory = allocationFactory;
    }

    /**
     * Mounts a segment for a node, registering the node on its first segment. Mounting the same
     * (node, segment id) again is idempotent. A different node id on the same endpoint is a restarted
     * node: the old incarnation's segments are removed at once and returned in {@link MountResult#replaced}.
     */
    public MountResult mount(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String segmentName,
        final long sizeBytes)
    {
        return mount(nodeId, nodeName, endpoint, segmentId, segmentName, sizeBytes, false);
    }

    /**
     * {@link #mount(String, String, String, int, String, long)}; with {@code ledgerFollows} a new segment takes
     * no new extents until {@link #markPlaceable} (the node's ledger report is still to come).
     */
    public synchronized MountResult mount(
        final String nodeId,
        final String nodeName,
        final String endpoint,
        final int segmentId,
        final String segmentName,
        final long sizeBytes,
        final boolean ledgerFollows)
    {
        final long now = clock.nanoTime();
        final List<MountedSegment> replaced = new ArrayList<>();
        for (final NodeRecord other : new ArrayList<>(nodes.values()))
        {
            if (!other.nodeId().equals(nodeId) && other.endpoint().equals(endpoint))
            {
                LOG.info("node {} ({}) re-registered at {} as {}: dropping the old incarnation",
                    other.name(), other.nodeId(), endpoint, nodeId);
                replaced.addAll(removeNodeLocked(other));
            }
        }

        NodeRecord node = nodes.get(nodeId);
        if (node == null)
        {
            node = new NodeRecord(nodeId, nodeName, endpoint, now);
            nodes.put(nodeId, node);
            nodesJoined.increment();
            LOG.info("node joined: {} id={} endpoint={}", nodeName, nodeId, endpoint);
        }
        else if (!node.endpoint().equals(endpoint))
        {
            return new MountResult(io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE, replaced);
        }
        node.touch(now);

        synchronized (node)
        {
            final MountedSegment existing = node.segmentMap().get(segmentId);
            if (existing != null)
            {
                if (existing.sizeBytes() != sizeBytes || !existing.name().equals(segmentName))
                {
                    return new MountResult(io.granary.proto.ErrorCode.SEGMENT_ALREADY_EXISTS_VALUE, replaced);
                }
                return new MountResult(io.granary.proto.ErrorCode.OK_VALUE, replaced);
            }
            final MountedSegment segment = new MountedSegment(
                nodeId, nodeName, endpoint, segmentId, segmentName, sizeBytes,
                allocationFactory.create(segmentId, segmentName, sizeBytes), node.freed(), !ledgerFollows);
            node.segmentMap().put(segmentId, segment);
            LOG.info("segment mounted: {} ({} bytes) on {}", segment, sizeBytes, nodeName);
        }
        rebuildSnapshot();
        return new MountResult(io.granary.proto.ErrorCode.OK_VALUE, replaced);
    }

    /** The segment's ledger report ended: it takes new extents from now on. */
    public synchronized void markPlaceable(final MountedSegment segment)
    {
        if (segment.isAlive() && !segment.isPlaceable())
        {
            segment.markPlaceable();
            rebuildSnapshot();
        }
    }

    /** The mounted segment {@code segmentId} of node {@code nodeId}, or null. */
    public MountedSegment segment(final String nodeId, final int segmentId)
    {
        final NodeRecord node = nodes.get(nodeId);
        if (node == null)
        {
            return null;
        }
        synchronized (node)
        {
            return node.segmentMap().get(segmentId);
        }
    }

    /** The registered node {@code nodeId}, or null. */
    public NodeRecord node(final String nodeId)
    {
        return nodes.get(nodeId);
    }

    /** @return true when the node is known (its liveness refreshed), false when it must mount again. */
    public boolean heartbeat(final String nodeId)
    {
        final NodeRecord node = nodes.get(nodeId);
        if (node == null)
        {
            return false;
        }
        node.touch(clock.nanoTime());
        return true;
    }

    /** Unmounts one segment; the node stays registered. @return the removed segment, or null. */
    public synchronized MountedSegment unmount(final String nodeId, final int segmentId)
    {
        final NodeRecord node = nodes.get(nodeId);
        if (node == null)
        {
            return null;
        }
        final MountedSegment segment;
        synchronized (node)
        {
            segment = node.segmentMap().remove(segmentId);
        }
        if (segment == null)
        {
            return null;
        }
        segment.markDead();
        rebuildSnapshot();
        LOG.info("segment unmounted: {}", segment);
        return segment;
    }

    /**
     * A node leaving cleanly: forgets it and any segment it still had mounted.
     *
     * @return the segments removed, or null when the node is unknown.
     */
    public synchronized List<MountedSegment> deregister(final String nodeId)
    {
        final NodeRecord node = nodes.get(nodeId);
        if (node == null)
        {
            return null;
        }
        LOG.info("node left: {} id={} endpoint={}", node.name(), node.nodeId(), node.endpoint());
        nodesLeft.increment();
        return removeNodeLocked(node);
    }

    /** Expires nodes silent for longer than {@code nodeTtlNs}. @return the segments they held. */
    public synchronized List<MountedSegment> expire(final long nodeTtlNs)
    {
        final long now = clock.nanoTime();
        List<MountedSegment> removed = null;
        for (final NodeRecord node : new ArrayList<>(nodes.values()))
        {
            if (now - node.lastHeartbeatNs() > nodeTtlNs)
            {
                LOG.warn("node expired: {} id={} endpoint={} (no heartbeat for {} ms)",
                    node.name(), node.nodeId(), node.endpoint(), (now - node.lastHeartbeatNs()) / 1_000_000L);
                nodesExpired.increment();
                if (removed == null)
                {
                    removed = new ArrayList<>();
                }
                removed.addAll(removeNodeLocked(node));
            }
        }
        return removed == null ? List.of() : removed;
    }

    private List<MountedSegment> removeNodeLocked(final NodeRecord node)
    {
        nodes.remove(node.nodeId());
        final List<MountedSegment> segments;
        synchronized (node)
        {
            segments = new ArrayList<>(node.segmentMap().values());
            node.segmentMap().clear();
        }
        for (final MountedSegment s : segments)
        {
            s.markDead();
        }
        rebuildSnapshot();
        return segments;
    }

    private void rebuildSnapshot()
    {
        final List<MountedSegment> all = new ArrayList<>();
        for (final NodeRecord node : nodes.values())
        {
            synchronized (node)
            {
                for (final MountedSegment s : node.segmentMap().values())
                {
                    if (s.isPlaceable())
                    {
                        all.add(s);
                    }
                }
            }
        }
        live = all.toArray(new MountedSegment[0]);
    }

    /** Placeable segments of live nodes; an immutable snapshot, do not modify. */
    public MountedSegment[] liveSegments()
    {
        return live;
    }

    public Collection<NodeRecord> nodes()
    {
        return new ArrayList<>(nodes.values());
    }

    public int nodeCount()
    {
        return nodes.size();
    }

    /** Node incarnations registered since start. */
    public long nodesJoined()
    {
        return nodesJoined.sum();
    }

    /** Nodes dropped for missing heartbeats longer than the node TTL. */
    public long nodesExpired()
    {
        return nodesExpired.sum();
    }

    /** Nodes that deregistered cleanly. */
    public long nodesLeft()
    {
        return nodesLeft.sum();
    }
}
