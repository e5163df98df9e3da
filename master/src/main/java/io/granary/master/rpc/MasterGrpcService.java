package io.granary.master.rpc;

import com.google.protobuf.ProtocolStringList;
import io.granary.master.MasterServer;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.NodeRecord;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.ClusterStatusRequest;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.CountResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.KeyRequest;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.NodeStatus;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.Replica;
import io.granary.proto.SegmentStatus;
import io.granary.proto.UnmountSegmentRequest;
import io.granary.protocol.Limits;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import static io.granary.proto.ErrorCode.*;

/**
 * gRPC adapter of the master: validates request envelopes (tenant, batch sizes, node fields),
 * calls the {@link MetadataStore} / {@link SegmentRegistry}, and builds replies. Store outcomes
 * travel as codes in the reply; a gRPC error status means an unexpected server fault.
 * Stateless; handlers run on gRPC event loops and never block.
 */
public final class MasterGrpcService extends MasterServiceGrpc.MasterServiceImplBase
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterGrpcService.class);
    private static final int MAX_ID_LENGTH = 256;
    private static final long MAX_SEGMENT_BYTES = 1L << 48;

    private final MasterServer server;
    private final MetadataStore store;
    private final BatchProbe probe;
    private final SegmentRegistry registry;

    public MasterGrpcService(
        final MasterServer server, final MetadataStore store, final BatchProbe probe, final SegmentRegistry registry)
    {
        this.server = server;
        this.store = store;
        this.probe = probe;
        this.registry = registry;
    }

    private static <T> void reply(final StreamObserver<T> observer, final String rpc, final Supplier<T> handler)
    {
        final T response;
        try
        {
            response = handler.get();
        }
        catch (final RuntimeException ex)
        {
            LOG.error("{} failed unexpectedly", rpc, ex);
            observer.onError(Status.INTERNAL.withDescription(rpc + ": " + ex).asRuntimeException());
            return;
        }
        observer.onNext(response);
        observer.onCompleted();
    }

    private static String tenant(final String tenant)
    {
        return Limits.tenantOrDefault(tenant);
    }

    private static boolean badTenant(final String tenant)
    {
        return MetadataStore.checkTenant(tenant) != OK_VALUE;
    }

    private static boolean badBatch(final int size)
    {
        return size > Limits.MAX_BATCH_KEYS;
    }

    // ------------------------------------------------------------------------------------ nodes

    @Override
    public void mountSegment(final MountSegmentRequest req, final StreamObserver<MountSegmentResponse> observer)
    {
        reply(observer, "MountSegment", () ->
        {
            final MountSegmentResponse.Builder b = MountSegmentResponse.newBuilder()
                .setHeartbeatIntervalMs(server.context().heartbeatInterval().toMillis())
                .setNodeTtlMs(server.context().nodeTtl().toMillis());
            if (!validId(req.getNodeId()) || !validId(req.getNodeName()) || !validEndpoint(req.getEndpoint()) ||
                !req.hasSegment() || !validId(req.getSegment().getName()) || req.getSegment().getSegmentId() == 0 ||
                req.getSegment().getSizeBytes() <= 0 || req.getSegment().getSizeBytes() > MAX_SEGMENT_BYTES)
            {
                return b.setCode(INVALID_PARAMS_VALUE).build();
            }
            final SegmentRegistry.MountResult result = registry.mount(
                req.getNodeId(), req.getNodeName(), req.getEndpoint(), req.getSegment().getSegmentId(),
                req.getSegment().getName(), req.getSegment().getSizeBytes());
            if (!result.replaced.isEmpty())
            {
                store.purgeSegments(new HashSet<>(result.replaced));
            }
            return b.setCode(result.code).build();
        });
    }

    @Override
    public void unmountSegment(final UnmountSegmentRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "UnmountSegment", () ->
        {
            final MountedSegment removed = registry.unmount(req.getNodeId(), req.getSegmentId());
            if (removed == null)
            {
                return code(SEGMENT_NOT_FOUND_VALUE);
            }
            store.purgeSegments(Set.of(removed));
            return code(OK_VALUE);
        });
    }

    @Override
    public void heartbeat(final HeartbeatRequest req, final StreamObserver<HeartbeatResponse> observer)
    {
        reply(observer, "Heartbeat", () -> HeartbeatResponse.newBuilder()
            .setCode(registry.heartbeat(req.getNodeId()) ? OK_VALUE : SEGMENT_NOT_FOUND_VALUE)
            .build());
    }

    private static boolean validId(final String id)
    {
        if (id.isEmpty() || id.length() > MAX_ID_LENGTH)
        {
            return false;
        }
        for (int i = 0; i < id.length(); i++)
        {
            if (Character.isISOControl(id.charAt(i)))
            {
                return false;
            }
        }
        return true;
    }

    static boolean validEndpoint(final String endpoint)
    {
        final int colon = endpoint.lastIndexOf(':');
        if (colon <= 0 || colon == endpoint.length() - 1 || endpoint.length() > MAX_ID_LENGTH)
        {
            return false;
        }
        try
        {
            final int port = Integer.parseInt(endpoint.substring(colon + 1));
            return port > 0 && port <= 65535 && validId(endpoint.substring(0, colon));
        }
        catch (final NumberFormatException ex)
        {
            return false;
        }
    }

    // ------------------------------------------------------------------------------------ puts

    @Override
    public void putStart(final PutStartRequest req, final StreamObserver<PutStartResponse> observer)
    {
        reply(observer, "PutStart", () ->
        {
            if (badTenant(req.getTenant()))
            {
                return PutStartResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            final List<Replica> replicas = new ArrayList<>(2);
            final int code = store.putStart(
                tenant(req.getTenant()), req.getClientId(), req.getKey(), req.getValueLength(), req.getOptions(), replicas);
            return PutStartResponse.newBuilder().setCode(code).addAllReplicas(replicas).build();
        });
    }

    @Override
    public void putEnd(final PutEndRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "PutEnd", () -> badTenant(req.getTenant()) ? code(INVALID_PARAMS_VALUE) :
            code(store.putEnd(tenant(req.getTenant()), req.getClientId(), req.getKey())));
    }

    @Override
    public void putRevoke(final PutRevokeRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "PutRevoke", () -> badTenant(req.getTenant()) ? code(INVALID_PARAMS_VALUE) :
            code(store.putRevoke(tenant(req.getTenant()), req.getClientId(), req.getKey())));
    }

    @Override
    public void batchPutStart(final BatchPutStartRequest req, final StreamObserver<BatchPutStartResponse> observer)
    {
        reply(observer, "BatchPutStart", () ->
        {
            final BatchPutStartResponse.Builder b = BatchPutStartResponse.newBuilder();
            if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()) ||
                req.getKeysCount() != req.getValueLengthsCount())
            {
                return b.setCode(INVALID_PARAMS_VALUE).build();
            }
            final String tenant = tenant(req.getTenant());
            final List<Replica> replicas = new ArrayList<>(2);
            for (int i = 0; i < req.getKeysCount(); i++)
            {
                replicas.clear();
                final int code = store.putStart(
                    tenant, req.getClientId(), req.getKeys(i), req.getValueLengths(i), req.getOptions(), replicas);
                b.addResults(PutStartResponse.newBuilder().setCode(code).addAllReplicas(replicas));
            }
            return b.setCode(OK_VALUE).build();
        });
    }

    @Override
    public void batchPutEnd(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, "BatchPutEnd", () -> perKey(req, key -> store.putEnd(tenant(req.getTenant()), req.getClientId(), key)));
    }

    @Override
    public void batchPutRevoke(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, "BatchPutRevoke", () ->
            perKey(req, key -> store.putRevoke(tenant(req.getTenant()), req.getClientId(), key)));
    }

    private interface KeyOp
    {
        int apply(String key);
    }

    private static BatchCodeResponse perKey(final BatchKeysRequest req, final KeyOp op)
    {
        final BatchCodeResponse.Builder b = BatchCodeResponse.newBuilder();
        if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final ProtocolStringList keys = req.getKeysList();
        for (int i = 0; i < keys.size(); i++)
        {
            b.addCodes(op.apply(keys.get(i)));
        }
        return b.setCode(OK_VALUE).build();
    }

    // ------------------------------------------------------------------------------------ reads

    @Override
    public void getReplicaList(final KeyRequest req, final StreamObserver<GetReplicaListResponse> observer)
    {
        reply(observer, "GetReplicaList", () ->
        {
            if (badTenant(req.getTenant()))
            {
                return GetReplicaListResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            return lookup(tenant(req.getTenant()), req.getKey(), new MetadataStore.Lookup()).build();
        });
    }

    private GetReplicaListResponse.Builder lookup(final String tenant, final String key, final MetadataStore.Lookup out)
    {
        store.getReplicaList(tenant, key, out);
        final GetReplicaListResponse.Builder b = GetReplicaListResponse.newBuilder().setCode(out.code);
        if (out.code == OK_VALUE)
        {
            b.setValueLength(out.sizeBytes)
                .addAllReplicas(out.replicas)
                .setLeaseTtlMs(store.settings().leaseTtlNs / 1_000_000L);
        }
        return b;
    }

    @Override
    public void batchGetReplicaList(final BatchKeysRequest req, final StreamObserver<BatchGetReplicaListResponse> observer)
    {
        reply(observer, "BatchGetReplicaList", () ->
        {
            final BatchGetReplicaListResponse.Builder b = BatchGetReplicaListResponse.newBuilder();
            if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()))
            {
                return b.setCode(INVALID_PARAMS_VALUE).build();
            }
            final String tenant = tenant(req.getTenant());
            final MetadataStore.Lookup out = new MetadataStore.Lookup();
            for (final String key : req.getKeysList())
            {
                b.addResults(lookup(tenant, key, out));
            }
            return b.setCode(OK_VALUE).build();
        });
    }

    @Override
    public void existKey(final KeyRequest req, final StreamObserver<ExistKeyResponse> observer)
    {
        reply(observer, "ExistKey", () ->
        {
            if (badTenant(req.getTenant()))
            {
                return ExistKeyResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            final int r = store.exists(tenant(req.getTenant()), req.getKey(), true);
            return ExistKeyResponse.newBuilder().setCode(r < 0 ? r : OK_VALUE).setExists(r == 1).build();
        });
    }

    @Override
    public void batchExistKey(final BatchKeysRequest req, final StreamObserver<BatchExistKeyResponse> observer)
    {
        reply(observer, "BatchExistKey", () ->
        {
            final BatchExistKeyResponse.Builder b = BatchExistKeyResponse.newBuilder();
            if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()))
            {
                return b.setCode(INVALID_PARAMS_VALUE).build();
            }
            final String tenant = tenant(req.getTenant());
            final ProtocolStringList keys = req.getKeysList();
            for (int i = 0; i < keys.size(); i++)
            {
                final int r = store.exists(tenant, keys.get(i), true);
                b.addExists(r == 1).addCodes(r < 0 ? r : OK_VALUE);
            }
            return b.setCode(OK_VALUE).build();
        });
    }

    @Override
    public void batchProbeKey(final BatchProbeKeyRequest req, final StreamObserver<BatchProbeKeyResponse> observer)
    {
        reply(observer, "BatchProbeKey", () ->
        {
            final BatchProbeKeyResponse.Builder b = BatchProbeKeyResponse.newBuilder();
            if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()))
            {
                return b.setCode(INVALID_PARAMS_VALUE).build();
            }
            final int n = req.getKeysCount();
            final boolean[] mask = new boolean[n];
            final int[] codes = new int[n];
            final int code = probe.probe(
                tenant(req.getTenant()), req.getMode(), req.getCandidateSize(), req.getKeysList(), mask, codes);
            if (code != OK_VALUE)
            {
                return b.setCode(code).build();
            }
            for (int i = 0; i < n; i++)
            {
                b.addMask(mask[i]).addCodes(codes[i]);
            }
            return b.setCode(OK_VALUE).build();
        });
    }

    // ------------------------------------------------------------------------------------ removal

    @Override
    public void remove(final RemoveRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "Remove", () -> badTenant(req.getTenant()) ? code(INVALID_PARAMS_VALUE) :
            code(store.remove(tenant(req.getTenant()), req.getKey(), req.getForce())));
    }

    @Override
    public void removeByRegex(final RemoveByRegexRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, "RemoveByRegex", () ->
        {
            final Predicate<String> filter = keyFilter(req.getRegex(), false);
            if (badTenant(req.getTenant()) || filter == null)
            {
                return CountResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            final long n = store.removeMatching(tenant(req.getTenant()), filter, req.getForce());
            return CountResponse.newBuilder().setCode(OK_VALUE).setCount(n).build();
        });
    }

    @Override
    public void removeAll(final RemoveAllRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, "RemoveAll", () ->
        {
            if (badTenant(req.getTenant()))
            {
                return CountResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            final long n = store.removeMatching(tenant(req.getTenant()), null, req.getForce());
            return CountResponse.newBuilder().setCode(OK_VALUE).setCount(n).build();
        });
    }

    /**
     * Compiles a key regex (full match); null when it is invalid or too long. With
     * {@code emptyMeansAll}, an empty regex matches every key.
     */
    static Predicate<String> keyFilter(final String regex, final boolean emptyMeansAll)
    {
        if (regex.isEmpty())
        {
            return emptyMeansAll ? key -> true : null;
        }
        if (regex.length() > Limits.MAX_REGEX_LENGTH)
        {
            return null;
        }
        try
        {
            final Pattern pattern = Pattern.compile(regex);
            return key -> pattern.matcher(key).matches();
        }
        catch (final PatternSyntaxException ex)
        {
            return null;
        }
    }

    // ------------------------------------------------------------------------------------ inspection

    @Override
    public void listKeys(final ListKeysRequest req, final StreamObserver<ListKeysResponse> observer)
    {
        reply(observer, "ListKeys", () ->
        {
            final Predicate<String> filter = keyFilter(req.getRegex(), true);
            if (badTenant(req.getTenant()) || filter == null)
            {
                return ListKeysResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
            final boolean[] truncated = new boolean[1];
            final List<KeyInfo> keys = store.listKeys(tenant(req.getTenant()), filter, req.getLimit(), truncated);
            return ListKeysResponse.newBuilder().setCode(OK_VALUE).addAllKeys(keys).setTruncated(truncated[0]).build();
        });
    }

    @Override
    public void getClusterStatus(final ClusterStatusRequest req, final StreamObserver<ClusterStatusResponse> observer)
    {
        reply(observer, "GetClusterStatus", () -> clusterStatus(server, store, registry));
    }

    /** The cluster summary served by GetClusterStatus and the admin port. */
    public static ClusterStatusResponse clusterStatus(
        final MasterServer server, final MetadataStore store, final SegmentRegistry registry)
    {
        final ClusterStatusResponse.Builder b = ClusterStatusResponse.newBuilder().setCode(OK_VALUE);
        final long now = store.clock().nanoTime();
        long capacity = 0;
        long allocated = 0;
        for (final NodeRecord node : registry.nodes())
        {
            final List<MountedSegment> segments = node.segments();
            b.addNodes(NodeStatus.newBuilder()
                .setNodeId(node.nodeId())
                .setNodeName(node.name())
                .setEndpoint(node.endpoint())
                .setLastHeartbeatAgoMs((now - node.lastHeartbeatNs()) / 1_000_000L)
                .setSegments(segments.size()));
            for (final MountedSegment s : segments)
            {
                final SegmentAllocation.Stats stats = s.stats();
                capacity += s.sizeBytes();
                allocated += stats.allocatedBytes();
                b.addSegments(SegmentStatus.newBuilder()
                    .setNodeId(s.nodeId())
                    .setNodeName(s.nodeName())
                    .setEndpoint(s.endpoint())
                    .setSegmentId(s.segmentId())
                    .setName(s.name())
                    .setSizeBytes(s.sizeBytes())
                    .setAllocatedBytes(stats.allocatedBytes())
                    .setAllocations(stats.allocationCount())
                    .setLargestFreeBytes(stats.largestFreeBytes()));
            }
        }
        return b.setObjects(store.objectCount())
            .setCapacityBytes(capacity)
            .setAllocatedBytes(allocated)
            .setLeaseTtlMs(store.settings().leaseTtlNs / 1_000_000L)
            .setVersion(MasterServer.VERSION)
            .build();
    }

    private static CodeResponse code(final int code)
    {
        return CodeResponse.newBuilder().setCode(code).build();
    }
}
