package io.granary.master.segment;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A registered storage node: identity, transfer endpoint, liveness and its mounted segments. */
public final class NodeRecord
{
    private final String nodeId;
    private final String name;
    private final String endpoint;
    private final long registeredNs;
    private volatile long lastHeartbeatNs;
    private final Map<Integer, MountedSegment> segments = new LinkedHashMap<>(); // guarded by the registry
    private final FreedExtents freed = new FreedExtents();

    NodeRecord(final String nodeId, final String name, final String endpoint, final long nowNs)
    {
        this.nodeId = nodeId;
        this.name = name;
        this.endpoint = endpoint;
        this.registeredNs = nowNs;
        this.lastHeartbeatNs = nowNs;
    }

    public String nodeId()
    {
        return nodeId;
    }

    public String name()
    {
        return name;
    }

    public String endpoint()
    {
        return endpoint;
    }

    public long registeredNs()
    {
        return registeredNs;
    }

    public long lastHeartbeatNs()
    {
        return lastHeartbeatNs;
    }

    /** Frees waiting to be told to this node in heartbeat answers. */
    public FreedExtents freed()
    {
        return freed;
    }

    void touch(final long nowNs)
    {
        lastHeartbeatNs = nowNs;
    }

    Map<Integer, MountedSegment> segmentMap()
    {
        return segments;
    }

    public synchronized List<MountedSegment> segments()
    {
        return new ArrayList<>(segments.values());
    }
}
