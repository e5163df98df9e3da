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
 * @param rebuild        what this master incarnation rebuilt from its nodes' ledgers.
 * @param maxObjects     the master's object budget ({@code --max-objects}, or derived from its heap): most objects it
 *                       holds before eviction makes room or puts of new keys are refused; 0 when the master reports
 *                       none (an older master).
 */
public record ClusterStatus(
    List<Node> nodes,
    List<Segment> segments,
    long objects,
    long capacityBytes,
    long allocatedBytes,
    long leaseTtlMs,
    String version,
    Rebuild rebuild,
    long maxObjects)
{
    /** A status without an object budget (an older master). */
    public ClusterStatus(
        final List<Node> nodes,
        final List<Segment> segments,
        final long objects,
        final long capacityBytes,
        final long allocatedBytes,
        final long leaseTtlMs,
        final String version,
        final Rebuild rebuild)
    {
        this(nodes, segments, objects, capacityBytes, allocatedBytes, leaseTtlMs, version, rebuild, 0);
    }

    /** A status without rebuild figures or object budget (an older master). */
    public ClusterStatus(
        final List<Node> nodes,
        final List<Segment> segments,
        final long objects,
        final long capacityBytes,
        final long allocatedBytes,
        final long leaseTtlMs,
        final String version)
    {
        this(nodes, segments, objects, capacityBytes, allocatedBytes, leaseTtlMs, version, Rebuild.NONE);
    }

    /**
     * What the master rebuilt from the ledgers its storage nodes reported when they registered (after a master
     * restart: every object that was complete on a node that came back).
     *
     * @param masterId         random id of the master process.
     * @param ready            the master's readiness ({@code --ready-after-nodes} reached).
     * @param ledgerReports    segment ledgers reported and adopted.
     * @param objectsRebuilt   objects created from reports.
     * @param replicasRebuilt  replicas adopted, the objects' first ones included.
     * @param entriesRejected  reported extents refused (older version, overlap, invalid, removed).
     * @param uptimeMs         milliseconds since the master started.
     * @param parentsLinked    rebuilt objects linked to the parent their put named (prefix chains kept).
     * @param parentsAwaited   rebuilt objects whose named parent the master does not hold (yet); 0 from an older
     *                         master, as is {@code parentsLinked}.
     */
    public record Rebuild(
        String masterId,
        boolean ready,
        long ledgerReports,
        long objectsRebuilt,
        long replicasRebuilt,
        long entriesRejected,
        long uptimeMs,
        long parentsLinked,
        long parentsAwaited)
    {
        public static final Rebuild NONE = new Rebuild("", true, 0, 0, 0, 0, 0, 0, 0);

        /** Without the parent-link counts (as before they existed): both 0. */
        public Rebuild(
            final String masterId,
            final boolean ready,
            final long ledgerReports,
            final long objectsRebuilt,
            final long replicasRebuilt,
            final long entriesRejected,
            final long uptimeMs)
        {
            this(masterId, ready, ledgerReports, objectsRebuilt, replicasRebuilt, entriesRejected, uptimeMs, 0, 0);
        }
    }

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
        Objects.requireNonNull(rebuild, "rebuild");
        if (maxObjects < 0)
        {
            throw new IllegalArgumentException("maxObjects must be >= 0, was " + maxObjects);
        }
    }
}
