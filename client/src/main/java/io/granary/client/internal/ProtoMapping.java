package io.granary.client.internal;

import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.PutOptions;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.LeaseMode;
import io.granary.proto.NodeStatus;
import io.granary.proto.SegmentStatus;

import java.util.ArrayList;
import java.util.List;

/** Translations between the public value classes and the control-plane messages. Stateless. */
final class ProtoMapping
{
    private ProtoMapping()
    {
    }

    static ErrorCode code(final int wire)
    {
        return ErrorCode.fromCode(wire);
    }

    /** "OBJECT_NOT_FOUND", or "INTERNAL_ERROR (unknown code -42)" for a number this client does not know. */
    static String describeCode(final int wire)
    {
        final ErrorCode code = ErrorCode.fromCode(wire);
        return code.code() == wire ? code.name() : code.name() + " (unknown code " + wire + ")";
    }

    static io.granary.proto.PutOptions toProto(final PutOptions options)
    {
        final io.granary.proto.PutOptions.Builder b = io.granary.proto.PutOptions.newBuilder()
            .setReplicas(options.replicas())
            .setSoftPin(toProto(options.softPinAction()))
            .setHardPin(options.hardPin());
        if (options.softPinTtl() != null)
        {
            b.setSoftPinTtlMs(options.softPinTtl().toMillis());
        }
        if (options.groupId() != null)
        {
            b.setGroupId(options.groupId());
        }
        if (options.preferredSegment() != null)
        {
            b.setPreferredSegment(options.preferredSegment());
        }
        if (options.parent() != null)
        {
            b.setParentKey(options.parent());
        }
        return b.build();
    }

    static io.granary.proto.SoftPinAction toProto(final io.granary.client.SoftPinAction action)
    {
        switch (action)
        {
            case ENABLE:
                return io.granary.proto.SoftPinAction.SOFT_PIN_ENABLE;
            case DISABLE:
                return io.granary.proto.SoftPinAction.SOFT_PIN_DISABLE;
            case PRESERVE:
            default:
                return io.granary.proto.SoftPinAction.SOFT_PIN_PRESERVE;
        }
    }

    static LeaseMode toProto(final LeasePolicy.Mode mode)
    {
        switch (mode)
        {
            case LAST_HIT_ONLY:
                return LeaseMode.LEASE_MODE_LAST_HIT_ONLY;
            case LONGEST_PREFIX:
                return LeaseMode.LEASE_MODE_LONGEST_PREFIX;
            case LONGEST_PREFIX_LAST_ONLY:
                return LeaseMode.LEASE_MODE_LONGEST_PREFIX_LAST_ONLY;
            case NONE:
            default:
                return LeaseMode.LEASE_MODE_NONE;
        }
    }

    static KeyInfo toKeyInfo(final io.granary.proto.KeyInfo info)
    {
        return new KeyInfo(
            info.getKey(),
            info.getValueLength(),
            toStatus(info.getStatus()),
            info.getReplicas(),
            info.getLeaseRemainingMs(),
            info.getHardPinned(),
            info.getSoftPinned(),
            info.getGroupId().isEmpty() ? null : info.getGroupId(),
            info.hasCrc32C() ? java.util.OptionalInt.of(info.getCrc32C()) : java.util.OptionalInt.empty());
    }

    static KeyInfo.Status toStatus(final io.granary.proto.ReplicaStatus status)
    {
        switch (status)
        {
            case REPLICA_STATUS_PROCESSING:
                return KeyInfo.Status.PROCESSING;
            case REPLICA_STATUS_COMPLETE:
                return KeyInfo.Status.COMPLETE;
            default:
                return KeyInfo.Status.UNKNOWN;
        }
    }

    static ClusterStatus toClusterStatus(final ClusterStatusResponse response)
    {
        final List<ClusterStatus.Node> nodes = new ArrayList<>(response.getNodesCount());
        for (final NodeStatus n : response.getNodesList())
        {
            nodes.add(new ClusterStatus.Node(
                n.getNodeId(), n.getNodeName(), n.getEndpoint(), n.getLastHeartbeatAgoMs(), n.getSegments()));
        }
        final List<ClusterStatus.Segment> segments = new ArrayList<>(response.getSegmentsCount());
        for (final SegmentStatus s : response.getSegmentsList())
        {
            segments.add(new ClusterStatus.Segment(
                s.getNodeId(), s.getNodeName(), s.getEndpoint(), s.getSegmentId(), s.getName(), s.getSizeBytes(),
                s.getAllocatedBytes(), s.getAllocations(), s.getLargestFreeBytes()));
        }
        final io.granary.proto.RebuildStatus r = response.getRebuild();
        final ClusterStatus.Rebuild rebuild = response.hasRebuild() ? new ClusterStatus.Rebuild(r.getMasterId(),
            r.getReady(), r.getLedgerReports(), r.getObjectsRebuilt(), r.getReplicasRebuilt(),
            r.getRejectedStale() + r.getRejectedOverlap() + r.getRejectedInvalid() + r.getRejectedRemoved() +
                r.getRejectedBudget(),
            r.getUptimeMs(), r.getParentsLinked(), r.getParentsAwaited()) : ClusterStatus.Rebuild.NONE;
        return new ClusterStatus(
            nodes, segments, response.getObjects(), response.getCapacityBytes(), response.getAllocatedBytes(),
            response.getLeaseTtlMs(), response.getVersion(), rebuild,
            response.getMaxObjects() < 0 ? Long.MAX_VALUE : response.getMaxObjects()); // a uint64 above 2^63 - 1
    }
}
