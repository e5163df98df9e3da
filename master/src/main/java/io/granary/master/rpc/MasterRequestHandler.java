package io.granary.master.rpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.ProtocolStringList;
import io.granary.master.MasterServer;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.KeyBatch;
import io.granary.master.meta.MetadataStore;
import io.granary.master.meta.SharedGrants;
import io.granary.master.segment.FreedExtents;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.NodeRecord;
import io.granary.master.segment.SegmentRegistry;
import io.granary.master.token.TokenIssuer;
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
import io.granary.proto.DeregisterNodeRequest;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.KeyRequest;
import io.granary.proto.LeaseMode;
import io.granary.proto.LedgerEntry;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.NodeStatus;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RebuildStatus;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.Replica;
import io.granary.proto.ReportLedgerRequest;
import io.granary.proto.ReportLedgerResponse;
import io.granary.proto.SegmentStatus;
import io.granary.proto.ServerInfoRequest;
import io.granary.proto.ServerInfoResponse;
import io.granary.proto.UnmountSegmentRequest;
import io.granary.protocol.Limits;
import io.granary.protocol.Opcode;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.IntConsumer;
import java.util.function.Predicate;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import static io.granary.proto.ErrorCode.*;

/**
 * Every control-plane call of the master, transport-agnostic: validates request envelopes
 * (tenant, batch sizes, node fields), calls the {@link MetadataStore} / {@link SegmentRegistry}
 * and builds the reply. Store outcomes travel as codes in the reply. Served over gRPC by
 * {@link MasterGrpcService} and, for the hot lookups, over the framed lookup port by
 * {@link LookupServer}. Stateless and thread safe; never blocks.
 */
public final class MasterRequestHandler
{
    private static final int MAX_ID_LENGTH = 256;
    private static final long MAX_SEGMENT_BYTES = 1L << 48;
    /** Most node ids a PutStart may ask to avoid. */
    static final int MAX_AVOID_NODES = 64;

    private final MasterServer server;
    private final MetadataStore store;
    private final BatchProbe probe;
    private final SegmentRegistry registry;

    public MasterRequestHandler(
        final MasterServer server, final MetadataStore store, final BatchProbe probe, final SegmentRegistry registry)
    {
        this.server = server;
        this.store = store;
        this.probe = probe;
        this.registry = registry;
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

    /** Puts name their client: 1..256 characters without control characters (the store keeps it per object). */
    private static boolean badClientId(final String clientId)
    {
        return Limits.checkClientId(clientId) != null;
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

    private interface KeyOp
    {
        int apply(int index, String key);
    }

    /**
     * Applies {@code op} to every key of a valid request, after touching the keys' index memory (the keys of a
     * BatchPutEnd or BatchPutRevoke exist: their slots, objects and key bytes are cold, so the misses overlap).
     */
    private BatchCodeResponse perKey(final BatchKeysRequest req, final KeyOp op)
    {
        final BatchCodeResponse.Builder b = BatchCodeResponse.newBuilder();
        if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()) || badClientId(req.getClientId()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final ProtocolStringList keys = req.getKeysList();
        store.touch(tenant(req.getTenant()), keys);
        for (int i = 0; i < keys.size(); i++)
        {
            b.addCodes(op.apply(i, keys.get(i)));
        }
        return b.setCode(OK_VALUE).build();
    }

    private GetReplicaListResponse.Builder lookup(final String tenant, final String key, final MetadataStore.Lookup out)
    {
        store.getReplicaList(tenant, key, out);
        return answer(out);
    }

    /** A GetReplicaList answer from what the store looked up. */
    private GetReplicaListResponse.Builder answer(final MetadataStore.Lookup out)
    {
        final GetReplicaListResponse.Builder b = GetReplicaListResponse.newBuilder().setCode(out.code);
        if (out.code == OK_VALUE)
        {
            b.setValueLength(out.sizeBytes).setLeaseTtlMs(store.settings().leaseTtlNs / 1_000_000L);
            for (int i = 0; i < out.replicas.size(); i++) // cheaper than addAll's null-checking copy
            {
                b.addReplicas(out.replicas.get(i));
            }
            if (out.hasCrc)
            {
                b.setCrc32C(out.crc32c);
            }
        }
        return b;
    }

    /**
     * Compiles a key regex (full match); null when it is invalid or too long. With
     * {@code emptyMeansAll}, an empty regex matches every key.
     */
    public static Predicate<String> keyFilter(final String regex, final boolean emptyMeansAll)
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
            // A pathological pattern ((a+)+b) backtracks exponentially: bound the work per key so that one request
            // cannot hold an event loop; a key that runs out of budget counts as not matching.
            return key -> BoundedCharSequence.matches(pattern, key);
        }
        catch (final PatternSyntaxException ex)
        {
            return null;
        }
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
        final MetadataStore.RebuildCounters r = store.rebuildCounters();
        final long maxObjects = store.settings().maxObjects;
        return b.setObjects(store.objectCount())
            .setMaxObjects(maxObjects == Long.MAX_VALUE ? 0 : maxObjects)
            .setCapacityBytes(capacity)
            .setAllocatedBytes(allocated)
            .setLeaseTtlMs(store.settings().leaseTtlNs / 1_000_000L)
            .setVersion(MasterServer.VERSION)
            .setRebuild(RebuildStatus.newBuilder()
                .setMasterId(server.masterId())
                .setReady(server.isReady())
                .setLedgerReports(server.ledgerReports())
                .setEntriesReported(r.entriesReported())
                .setObjectsRebuilt(r.objects())
                .setReplicasRebuilt(r.replicas())
                .setRejectedStale(r.rejectedStale())
                .setRejectedOverlap(r.rejectedOverlap())
                .setRejectedInvalid(r.rejectedInvalid())
                .setRejectedRemoved(r.rejectedRemoved())
                .setRejectedBudget(r.rejectedBudget())
                .setReplacedOlder(r.replacedOlder())
                .setParentsLinked(r.parentsLinked())
                .setParentsAwaited(store.rebuiltAwaitingParents())
                .setDiscardedReports(server.discardedReports())
                .setUptimeMs(server.uptimeMs()))
            .build();
    }

    // ------------------------------------------------------------------------------------ calls

    public MountSegmentResponse mountSegment(final MountSegmentRequest req)
    {
        final MountSegmentResponse.Builder b = MountSegmentResponse.newBuilder()
            .setHeartbeatIntervalMs(server.context().heartbeatInterval().toMillis())
            .setNodeTtlMs(server.context().nodeTtl().toMillis());
        if (!validId(req.getNodeId()) || !validId(req.getNodeName()) || !validEndpoint(req.getEndpoint()) ||
            !req.hasSegment() || !validId(req.getSegment().getName()) || req.getSegment().getSegmentId() == 0 ||
            req.getSegment().getSizeBytes() < server.context().allocationGranularity() ||
            req.getSegment().getSizeBytes() > MAX_SEGMENT_BYTES)
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final SegmentRegistry.MountResult result = registry.mount(
            req.getNodeId(), req.getNodeName(), req.getEndpoint(), req.getSegment().getSegmentId(),
            req.getSegment().getName(), req.getSegment().getSizeBytes(), req.getLedgerFollows());
        if (!result.replaced.isEmpty())
        {
            store.purgeSegments(new HashSet<>(result.replaced));
        }
        final TokenIssuer tokens = server.tokenIssuer();
        if (tokens != null && (result.code == OK_VALUE || result.code == SEGMENT_ALREADY_EXISTS_VALUE))
        {
            b.setDataTokenKey(ByteString.copyFrom(tokens.nodeKey(req.getNodeId())));
        }
        return b.setCode(result.code).build();
    }

    public CodeResponse unmountSegment(final UnmountSegmentRequest req)
    {
        if (!validId(req.getNodeId()))
        {
            return code(INVALID_PARAMS_VALUE);
        }
        final MountedSegment removed = registry.unmount(req.getNodeId(), req.getSegmentId());
        if (removed == null)
        {
            return code(SEGMENT_NOT_FOUND_VALUE);
        }
        store.purgeSegments(Set.of(removed));
        return code(OK_VALUE);
    }

    public CodeResponse deregisterNode(final DeregisterNodeRequest req)
    {
        if (!validId(req.getNodeId()))
        {
            return code(INVALID_PARAMS_VALUE);
        }
        final List<MountedSegment> removed = registry.deregister(req.getNodeId());
        if (removed == null)
        {
            return code(SEGMENT_NOT_FOUND_VALUE);
        }
        if (!removed.isEmpty())
        {
            store.purgeSegments(new HashSet<>(removed));
        }
        return code(OK_VALUE);
    }

    /** Refreshes the node's liveness and hands it the frees queued since its last heartbeat. */
    public HeartbeatResponse heartbeat(final HeartbeatRequest req)
    {
        final HeartbeatResponse.Builder b = HeartbeatResponse.newBuilder().setMasterId(server.masterId());
        if (!validId(req.getNodeId()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final NodeRecord node = registry.node(req.getNodeId());
        if (node == null || !registry.heartbeat(req.getNodeId()))
        {
            return b.setCode(SEGMENT_NOT_FOUND_VALUE).build();
        }
        final FreedExtents freed = node.freed();
        if (freed.size() > 0)
        {
            b.addAllFreed(freed.drain(FreedExtents.MAX_PER_HEARTBEAT)).setMoreFreed(freed.size() > 0);
        }
        return b.setCode(OK_VALUE).build();
    }

    /**
     * One chunk of a node's ledger for one segment: every entry is adopted or refused (refused offsets go back
     * so the node drops them); the last chunk opens the segment to new extents. A node this master expired
     * earlier (it names this master's id as its previous one) is told to discard its ledger instead, so that
     * objects purged when it expired do not come back.
     */
    public ReportLedgerResponse reportLedger(final ReportLedgerRequest req)
    {
        final ReportLedgerResponse.Builder b = ReportLedgerResponse.newBuilder().setMasterId(server.masterId());
        if (!validId(req.getNodeId()) || req.getEntriesCount() > Limits.MAX_BATCH_KEYS)
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final MountedSegment segment = registry.segment(req.getNodeId(), req.getSegmentId());
        if (segment == null)
        {
            return b.setCode(SEGMENT_NOT_FOUND_VALUE).build();
        }
        registry.heartbeat(req.getNodeId());
        if (server.masterId().equals(req.getPreviousMasterId()))
        {
            if (req.getLast())
            {
                registry.markPlaceable(segment);
                server.onLedgerReported(req.getNodeId(), true);
            }
            return b.setCode(OK_VALUE).setDiscardAll(true).build();
        }
        int adopted = 0;
        for (final LedgerEntry entry : req.getEntriesList())
        {
            if (store.adopt(segment, entry).rejected())
            {
                b.addRejectedOffsets(entry.getOffset());
            }
            else
            {
                adopted++;
            }
        }
        if (req.getLast())
        {
            registry.markPlaceable(segment);
            server.onLedgerReported(req.getNodeId(), false);
        }
        return b.setCode(OK_VALUE).setAdopted(adopted).build();
    }

    public PutStartResponse putStart(final PutStartRequest req)
    {
        if (badTenant(req.getTenant()) || badClientId(req.getClientId()))
        {
            return PutStartResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        if (req.getAvoidNodeIdsCount() > MAX_AVOID_NODES)
        {
            return PutStartResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final List<Replica> replicas = new ArrayList<>(2);
        final long[] version = new long[1];
        final int code = store.putStart(tenant(req.getTenant()), req.getClientId(), req.getKey(), req.getValueLength(),
            req.getOptions(), avoid(req.getAvoidNodeIdsList()), replicas, version);
        return PutStartResponse.newBuilder().setCode(code).addAllReplicas(replicas).setVersion(version[0]).build();
    }

    private static Set<String> avoid(final List<String> nodeIds)
    {
        return nodeIds.isEmpty() ? Set.of() : new HashSet<>(nodeIds);
    }

    public CodeResponse putEnd(final PutEndRequest req)
    {
        return badTenant(req.getTenant()) || badClientId(req.getClientId()) ? code(INVALID_PARAMS_VALUE) :
            code(store.putEnd(tenant(req.getTenant()), req.getClientId(), req.getKey(), req.hasCrc32C(),
                req.getCrc32C()));
    }

    public CodeResponse putRevoke(final PutRevokeRequest req)
    {
        return badTenant(req.getTenant()) || badClientId(req.getClientId()) ||
            req.getSettledCount() > Limits.MAX_REPLICAS ? code(INVALID_PARAMS_VALUE) :
            code(store.putRevoke(tenant(req.getTenant()), req.getClientId(), req.getKey(), req.getSettledList()));
    }

    public BatchPutStartResponse batchPutStart(final BatchPutStartRequest req)
    {
        return (BatchPutStartResponse)batchPutStart(req, null);
    }

    /**
     * BatchPutStart. With {@code wire} and shared grants asked for (the lookup port), the answer is written into
     * {@code wire}, which is returned, instead of being built as a message; otherwise the BatchPutStartResponse.
     */
    public Object batchPutStart(final BatchPutStartRequest req, final BatchReplicaAnswer wire)
    {
        if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()) || badClientId(req.getClientId()) ||
            req.getKeysCount() != req.getValueLengthsCount() || req.getAvoidNodeIdsCount() > MAX_AVOID_NODES ||
            (req.getPerKeyOptionsCount() != 0 && req.getPerKeyOptionsCount() != req.getKeysCount()))
        {
            return BatchPutStartResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final boolean perKey = req.getPerKeyOptionsCount() != 0;
        final String tenant = store.canonical(tenant(req.getTenant()));
        final String clientId = store.canonical(req.getClientId());
        store.touch(tenant, req.getKeysList()); // a batch of new keys still probes cold index slots
        final Set<String> avoid = avoid(req.getAvoidNodeIdsList());
        return startBatch(req.getKeysCount(), req.getSharedGrants(), wire, (i, replicas, version, grants) ->
            store.putStart(tenant, clientId, req.getKeys(i), req.getValueLengths(i),
                perKey ? req.getPerKeyOptions(i) : req.getOptions(), avoid, replicas, version, grants));
    }

    /**
     * {@link #batchPutStart(BatchPutStartRequest, BatchReplicaAnswer)} over a request the lookup port decoded: keys
     * as bytes, {@code lengthCount} value lengths, the batch's options, per-key options (none, or one per key) and
     * the nodes to avoid.
     */
    public Object batchPutStart(
        final String tenant, final String clientId, final KeyBatch keys, final long[] lengths, final int lengthCount,
        final PutOptions options, final List<PutOptions> perKeyOptions, final List<String> avoidNodeIds,
        final boolean sharedGrants, final BatchReplicaAnswer wire)
    {
        final int n = keys.size();
        if (badTenant(tenant) || badBatch(n) || badClientId(clientId) || n != lengthCount ||
            avoidNodeIds.size() > MAX_AVOID_NODES || (!perKeyOptions.isEmpty() && perKeyOptions.size() != n))
        {
            return BatchPutStartResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final boolean perKey = !perKeyOptions.isEmpty();
        final String t = store.canonical(tenant(tenant));
        final String c = store.canonical(clientId);
        final long tenantMix = MetadataStore.tenantMix(t);
        store.touch(t, tenantMix, keys);
        final Set<String> avoid = avoid(avoidNodeIds);
        final MetadataStore.Now now = store.now(); // the batch's keys share one reading of the clocks
        return startBatch(n, sharedGrants, wire, (i, replicas, version, grants) ->
            store.putStart(t, tenantMix, c, keys, i, lengths[i], perKey ? perKeyOptions.get(i) : options, avoid,
                replicas, version, grants, now));
    }

    /** The PutStart of key {@code i} of a batch (see {@link MetadataStore#putStart}). */
    @FunctionalInterface
    private interface BatchPut
    {
        int start(int i, List<Replica> replicas, long[] version, SharedGrants grants);
    }

    /** Runs a valid batch's PutStarts in order and answers them (into {@code wire} with shared grants, if given). */
    private Object startBatch(final int n, final boolean sharedGrants, final BatchReplicaAnswer wire, final BatchPut put)
    {
        final List<Replica> replicas = new ArrayList<>(2);
        final long[] version = new long[1];
        // With shared grants the keys are placed first and each run of contiguous extents is signed once after.
        final SharedGrants grants = !sharedGrants ? null :
            wire != null ? wire.grants(Opcode.WRITE) : new SharedGrants(Opcode.WRITE);
        final BatchReplicaAnswer direct = grants == null ? null : wire;
        final PutStartResponse.Builder[] results = direct == null ? new PutStartResponse.Builder[n] : null;
        if (direct != null)
        {
            direct.startPuts();
        }
        for (int i = 0; i < n; i++)
        {
            replicas.clear();
            version[0] = 0;
            if (grants != null)
            {
                grants.key(i);
            }
            final int code = put.start(i, replicas, version, grants);
            if (direct != null)
            {
                direct.put(code, version[0]);
            }
            else
            {
                results[i] = PutStartResponse.newBuilder().setCode(code).addAllReplicas(replicas).setVersion(version[0]);
            }
        }
        if (grants != null)
        {
            store.signGrants(grants);
        }
        if (direct != null)
        {
            direct.finish(grants);
            return direct;
        }
        final BatchPutStartResponse.Builder b = BatchPutStartResponse.newBuilder();
        for (int i = 0; i < n; i++)
        {
            if (grants != null)
            {
                replicas.clear();
                grants.replicasOf(i, replicas);
                results[i].addAllReplicas(replicas);
            }
            b.addResults(results[i]);
        }
        return b.setCode(OK_VALUE).build();
    }

    /** BatchPutEnd: {@code crc32c} holds no checksum or one per key. */
    public BatchCodeResponse batchPutEnd(final BatchKeysRequest req)
    {
        final boolean hasCrc = req.getCrc32CCount() > 0;
        if (hasCrc && req.getCrc32CCount() != req.getKeysCount())
        {
            return BatchCodeResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        return perKey(req, (i, key) ->
            store.putEnd(tenant(req.getTenant()), req.getClientId(), key, hasCrc, hasCrc ? req.getCrc32C(i) : 0));
    }

    /**
     * BatchPutEnd over keys given as bytes (the lookup port decodes them without building Strings): {@code crcs} holds
     * no checksum ({@code crcCount} 0) or one per key.
     */
    public BatchCodeResponse batchPutEnd(
        final String tenant, final String clientId, final KeyBatch keys, final int[] crcs, final int crcCount)
    {
        final BatchCodeResponse.Builder b = BatchCodeResponse.newBuilder();
        final int n = keys.size();
        if ((crcCount != 0 && crcCount != n) || badTenant(tenant) || badBatch(n) || badClientId(clientId))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        // The instances the objects keep: each key's tenant and client checks then end at an identity comparison.
        final String t = store.canonical(tenant(tenant));
        final String c = store.canonical(clientId);
        final long tenantMix = MetadataStore.tenantMix(t);
        store.touch(t, tenantMix, keys);
        final boolean hasCrc = crcCount != 0;
        final MetadataStore.Now now = store.now(); // the batch's keys share one reading of the clocks
        for (int i = 0; i < n; i++)
        {
            b.addCodes(store.putEnd(t, tenantMix, c, keys, i, hasCrc, hasCrc ? crcs[i] : 0, now));
        }
        return b.setCode(OK_VALUE).build();
    }

    /** BatchPutRevoke: {@code settled} holds nothing or one entry per key, of at most MAX_REPLICAS replicas each. */
    public BatchCodeResponse batchPutRevoke(final BatchKeysRequest req)
    {
        final boolean hasSettled = req.getSettledCount() > 0;
        if (hasSettled && req.getSettledCount() != req.getKeysCount())
        {
            return BatchCodeResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        for (int i = 0; i < req.getSettledCount(); i++)
        {
            if (req.getSettled(i).getReplicasCount() > Limits.MAX_REPLICAS)
            {
                return BatchCodeResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
            }
        }
        return perKey(req, (i, key) -> store.putRevoke(tenant(req.getTenant()), req.getClientId(), key,
            hasSettled ? req.getSettled(i).getReplicasList() : List.of()));
    }

    public GetReplicaListResponse getReplicaList(final KeyRequest req)
    {
        if (badTenant(req.getTenant()))
        {
            return GetReplicaListResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        return lookup(tenant(req.getTenant()), req.getKey(), new MetadataStore.Lookup()).build();
    }

    public BatchGetReplicaListResponse batchGetReplicaList(final BatchKeysRequest req)
    {
        final BatchGetReplicaListResponse.Builder b = BatchGetReplicaListResponse.newBuilder();
        if (badTenant(req.getTenant()) || badBatch(req.getKeysCount()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final String tenant = tenant(req.getTenant());
        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        final SharedGrants grants = req.getSharedGrants() ? new SharedGrants(Opcode.READ) : null;
        return lookups(b, req.getKeysCount(), out, grants,
            i -> store.getReplicaList(tenant, req.getKeys(i), out, grants));
    }

    /**
     * Answers a batch lookup: {@code lookup} fills {@code out} for key i. With {@code grants} (shared grants), signs
     * the recorded replicas once all keys are looked up (one READ token per run of contiguous extents) and adds each
     * key's to its answer.
     */
    private BatchGetReplicaListResponse lookups(
        final BatchGetReplicaListResponse.Builder b, final int n, final MetadataStore.Lookup out,
        final SharedGrants grants, final IntConsumer lookup)
    {
        return (BatchGetReplicaListResponse)lookups(b, n, out, grants, lookup, null);
    }

    /** {@link #lookups}; with {@code wire} and {@code grants}, the answer is written into {@code wire}, returned. */
    private Object lookups(
        final BatchGetReplicaListResponse.Builder b, final int n, final MetadataStore.Lookup out,
        final SharedGrants grants, final IntConsumer lookup, final BatchReplicaAnswer wire)
    {
        if (grants == null)
        {
            for (int i = 0; i < n; i++)
            {
                lookup.accept(i);
                b.addResults(answer(out));
            }
            return b.setCode(OK_VALUE).build();
        }
        if (wire != null)
        {
            wire.startLookups(store.settings().leaseTtlNs / 1_000_000L);
            for (int i = 0; i < n; i++)
            {
                grants.key(i);
                lookup.accept(i);
                wire.lookup(out.code, out.sizeBytes, out.hasCrc, out.crc32c);
            }
            store.signGrants(grants);
            wire.finish(grants);
            return wire;
        }
        final GetReplicaListResponse.Builder[] answers = new GetReplicaListResponse.Builder[n];
        for (int i = 0; i < n; i++)
        {
            grants.key(i);
            lookup.accept(i);
            answers[i] = answer(out);
        }
        store.signGrants(grants);
        final List<Replica> replicas = new ArrayList<>(2);
        for (int i = 0; i < answers.length; i++)
        {
            replicas.clear();
            grants.replicasOf(i, replicas);
            for (int r = 0; r < replicas.size(); r++)
            {
                answers[i].addReplicas(replicas.get(r));
            }
            b.addResults(answers[i]);
        }
        return b.setCode(OK_VALUE).build();
    }

    /** BatchGetReplicaList over keys given as bytes (the lookup port decodes them without building Strings). */
    public BatchGetReplicaListResponse batchGetReplicaList(final String tenant, final KeyBatch keys)
    {
        return batchGetReplicaList(tenant, keys, false);
    }

    /** {@link #batchGetReplicaList(String, KeyBatch)}, with one READ token per run when {@code sharedGrants}. */
    public BatchGetReplicaListResponse batchGetReplicaList(
        final String tenant, final KeyBatch keys, final boolean sharedGrants)
    {
        return (BatchGetReplicaListResponse)batchGetReplicaList(tenant, keys, sharedGrants, null);
    }

    /**
     * {@link #batchGetReplicaList(String, KeyBatch, boolean)}; with {@code wire} and {@code sharedGrants} (the lookup
     * port), the answer is written into {@code wire}, which is returned, instead of being built as a message.
     */
    public Object batchGetReplicaList(
        final String tenant, final KeyBatch keys, final boolean sharedGrants, final BatchReplicaAnswer wire)
    {
        final BatchGetReplicaListResponse.Builder b = BatchGetReplicaListResponse.newBuilder();
        if (badTenant(tenant) || badBatch(keys.size()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final String t = tenant(tenant);
        final long tenantMix = MetadataStore.tenantMix(t);
        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        store.touch(t, tenantMix, keys);
        final SharedGrants grants = !sharedGrants ? null :
            wire != null ? wire.grants(Opcode.READ) : new SharedGrants(Opcode.READ);
        return lookups(b, keys.size(), out, grants, i -> store.getReplicaList(t, tenantMix, keys, i, out, grants),
            wire);
    }

    public ExistKeyResponse existKey(final KeyRequest req)
    {
        if (badTenant(req.getTenant()))
        {
            return ExistKeyResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final int r = store.exists(tenant(req.getTenant()), req.getKey(), true);
        return ExistKeyResponse.newBuilder().setCode(r < 0 ? r : OK_VALUE).setExists(r == 1).build();
    }

    public BatchExistKeyResponse batchExistKey(final BatchKeysRequest req)
    {
        if (badBatch(req.getKeysCount()))
        {
            return BatchExistKeyResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        return batchExistKey(req.getTenant(), KeyBatch.of(req.getKeysList()));
    }

    /** BatchExistKey over keys given as bytes (the lookup port decodes them without building Strings). */
    public BatchExistKeyResponse batchExistKey(final String tenant, final KeyBatch keys)
    {
        final BatchExistKeyResponse.Builder b = BatchExistKeyResponse.newBuilder();
        if (badTenant(tenant) || badBatch(keys.size()))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final int[] results = new int[keys.size()];
        store.existsBatch(tenant(tenant), keys, true, results);
        for (final int r : results)
        {
            b.addExists(r == 1).addCodes(r < 0 ? r : OK_VALUE);
        }
        return b.setCode(OK_VALUE).build();
    }

    public BatchProbeKeyResponse batchProbeKey(final BatchProbeKeyRequest req)
    {
        if (badBatch(req.getKeysCount()))
        {
            return BatchProbeKeyResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        return batchProbeKey(req.getTenant(), req.getModeValue(), req.getCandidateSize(),
            KeyBatch.of(req.getKeysList()), req.getWithReplicas(), req.getReplicasFrom(), req.getReplicasCount(),
            req.getSharedGrants());
    }

    /**
     * BatchProbeKey over keys given as bytes; {@code mode} is the LeaseMode number. With {@code withReplicas} the
     * answer also carries, for every key the probe selected at a candidate position in
     * {@code [replicasFrom, replicasFrom + replicasCount)} (0 = every position), its replica list, taken under the
     * locks that leased it: with {@code sharedGrants}, one READ token per run of contiguous extents.
     */
    public BatchProbeKeyResponse batchProbeKey(
        final String tenant, final int mode, final int candidateSize, final KeyBatch keys, final boolean withReplicas,
        final int replicasFrom, final int replicasCount, final boolean sharedGrants)
    {
        final BatchProbeKeyResponse.Builder b = BatchProbeKeyResponse.newBuilder();
        final LeaseMode leaseMode = LeaseMode.forNumber(mode);
        if (badTenant(tenant) || badBatch(keys.size()) || leaseMode == null ||
            (withReplicas && !replicaSelection(leaseMode, candidateSize, replicasFrom, replicasCount)))
        {
            return b.setCode(INVALID_PARAMS_VALUE).build();
        }
        final int n = keys.size();
        final boolean[] mask = new boolean[n];
        final int[] codes = new int[n];
        MetadataStore.Lookup[] located = null;
        if (withReplicas)
        {
            located = new MetadataStore.Lookup[n];
            final int to = replicasCount == 0 ? candidateSize : replicasFrom + replicasCount;
            for (int i = 0; i < n; i++)
            {
                final int member = i % candidateSize;
                located[i] = member >= replicasFrom && member < to ? new MetadataStore.Lookup() : null;
            }
        }
        final SharedGrants grants = located != null && sharedGrants ? new SharedGrants(Opcode.READ) : null;
        final int code = probe.probe(tenant(tenant), leaseMode, candidateSize, keys, mask, codes, located, grants);
        if (code != OK_VALUE)
        {
            return b.setCode(code).build();
        }
        if (grants != null)
        {
            store.signGrants(grants);
        }
        final List<Replica> replicas = new ArrayList<>(2);
        for (int i = 0; i < n; i++)
        {
            b.addMask(mask[i]).addCodes(codes[i]);
            if (located != null)
            {
                if (!mask[i] || located[i] == null)
                {
                    b.addReplicas(GetReplicaListResponse.newBuilder().setCode(codes[i]));
                    continue;
                }
                final GetReplicaListResponse.Builder answer = answer(located[i]);
                if (grants != null)
                {
                    replicas.clear();
                    grants.replicasOf(i, replicas);
                    replicas.forEach(answer::addReplicas);
                }
                b.addReplicas(answer);
            }
        }
        return b.setCode(OK_VALUE).build();
    }

    /**
     * Whether a probe may bring back replica lists for these members: only with a mode that leases, and a range of
     * candidate positions inside the candidate (unsigned on the wire: a negative int is a huge number).
     */
    private static boolean replicaSelection(final LeaseMode mode, final int candidateSize, final int from,
        final int count)
    {
        if (mode == LeaseMode.LEASE_MODE_NONE || candidateSize <= 0)
        {
            return false;
        }
        if (count == 0)
        {
            return from == 0;
        }
        return from >= 0 && count > 0 && (long)from + count <= candidateSize;
    }

    public CodeResponse remove(final RemoveRequest req)
    {
        return badTenant(req.getTenant()) ? code(INVALID_PARAMS_VALUE) :
            code(store.remove(tenant(req.getTenant()), req.getKey(), req.getForce()));
    }

    public CountResponse removeByRegex(final RemoveByRegexRequest req)
    {
        final Predicate<String> filter = keyFilter(req.getRegex(), false);
        if (badTenant(req.getTenant()) || filter == null)
        {
            return CountResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final long n = store.removeMatching(tenant(req.getTenant()), filter, req.getForce());
        return CountResponse.newBuilder().setCode(OK_VALUE).setCount(n).build();
    }

    public CountResponse removeAll(final RemoveAllRequest req)
    {
        if (badTenant(req.getTenant()))
        {
            return CountResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final long n = store.removeMatching(tenant(req.getTenant()), null, req.getForce());
        return CountResponse.newBuilder().setCode(OK_VALUE).setCount(n).build();
    }

    public ListKeysResponse listKeys(final ListKeysRequest req)
    {
        final Predicate<String> filter = keyFilter(req.getRegex(), true);
        if (badTenant(req.getTenant()) || filter == null)
        {
            return ListKeysResponse.newBuilder().setCode(INVALID_PARAMS_VALUE).build();
        }
        final boolean[] truncated = new boolean[1];
        final List<KeyInfo> keys = store.listKeys(tenant(req.getTenant()), filter, req.getLimit(), truncated);
        return ListKeysResponse.newBuilder().setCode(OK_VALUE).addAllKeys(keys).setTruncated(truncated[0]).build();
    }

    public ServerInfoResponse getServerInfo(final ServerInfoRequest req)
    {
        return ServerInfoResponse.newBuilder()
            .setCode(OK_VALUE)
            .setVersion(MasterServer.VERSION)
            .setLookupPort(Math.max(0, server.lookupPort()))
            .setLeaseTtlMs(store.settings().leaseTtlNs / 1_000_000L)
            .setNodeTtlMs(server.context().nodeTtl().toMillis())
            .setMasterId(server.masterId())
            .build();
    }

    public ClusterStatusResponse getClusterStatus(final ClusterStatusRequest req)
    {
        return clusterStatus(server, store, registry);
    }

    private static CodeResponse code(final int code)
    {
        return CodeResponse.newBuilder().setCode(code).build();
    }
}
