package io.granary.client;

import java.util.List;
import java.util.Objects;

/**
 * A snapshot of the cluster as the master sees it: storage nodes, their segments and totals.
 * Immutable; the lists are unmodifiable.
 *
 * @param nodes          live storage nodes.
 * @param segments       mounted segments, with allocation figures.
 * @param objects        number of objects, all tenants.
 * @param capacityBytes  total segment bytes.
 * @param allocatedBytes bytes held by extents.
 * @param leaseTtlMs     read-lease TTL the master grants.
 * @param version        the master's version string.
 */
public record ClusterStatus(
    List<Node> nodes,
    List<Segment> segments,
    long objects,
    long capacityBytes,
    long allocatedBytes,
    long leaseTtlMs,
    String version)
{
    /** One storage node. */
    public record Node(String nodeId, String nodeName, String endpoint, long lastHeartbeatAgoMs, int segments)
    {
    }

    /** One mounted segment of a storage node. */
    public record Segment(
        String nodeId,
        String nodeName,
        String endpoint,
        int segmentId,
        String name,
        long sizeBytes,
        long allocatedBytes,
        long allocations,
        long largestFreeBytes)
    {
    }

    public ClusterStatus
    {
        nodes = List.copyOf(Objects.requireNonNull(nodes, "nodes"));
        segments = List.copyOf(Objects.requireNonNull(segments, "segments"));
        Objects.requireNonNull(version, "version");
    }
}
