package io.granary.client.internal;

import com.google.protobuf.Message;
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
import io.granary.proto.ErrorCode;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.KeyRequest;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * Test double of the master on a real gRPC server (127.0.0.1, ephemeral port): records every request,
 * answers like a tiny in-memory master unless a test scripts an RPC's answer or makes it hang.
 * Thread safe.
 */
final class ScriptedMaster extends MasterServiceGrpc.MasterServiceImplBase implements AutoCloseable
{
    static final long LEASE_TTL_MS = 10_000;

    /** Where the default PutStart places replicas, in order. */
    record Placement(String nodeId, String endpoint, int segmentId)
    {
    }

    private static final class StoredObject
    {
        final long length;
        final List<Replica> replicas;
        volatile boolean complete;
        volatile Integer crc;

        StoredObject(final long length, final List<Replica> replicas)
        {
            this.length = length;
            this.replicas = replicas;
        }
    }

    private final java.util.concurrent.atomic.AtomicLong nextVersion = new java.util.concurrent.atomic.AtomicLong();
    private final List<Message> requests = new CopyOnWriteArrayList<>();
    private final Map<String, Function<Message, Message>> scripts = new ConcurrentHashMap<>();
    private final Set<String> hanging = ConcurrentHashMap.newKeySet();
    private final Map<String, StoredObject> objects = new ConcurrentHashMap<>();
    private final AtomicLong nextOffset = new AtomicLong();
    private final java.util.concurrent.atomic.AtomicInteger tokenGeneration = new java.util.concurrent.atomic.AtomicInteger();
    private volatile boolean tokens;
    private volatile List<Placement> placements = List.of(
        new Placement("node-a", "10.0.0.1:7001", 1),
        new Placement("node-b", "10.0.0.2:7002", 2));
    private Server server;

    ScriptedMaster start() throws IOException
    {
        return start(0);
    }

    /** Starts on {@code port} (0: any), e.g. again on the port of a master a test stopped. */
    ScriptedMaster start(final int port) throws IOException
    {
        server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
            .withOption(io.netty.channel.ChannelOption.SO_REUSEADDR, true)
            .addService(this)
            .directExecutor()
            .build()
            .start();
        return this;
    }

    String address()
    {
        return "127.0.0.1:" + server.getPort();
    }

    @Override
    public void close() throws InterruptedException
    {
        if (server != null)
        {
            server.shutdownNow();
            server.awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    // ------------------------------------------------------------------------------------------- scripting

    void placements(final Placement... placements)
    {
        this.placements = List.of(placements);
    }

    /**
     * Hands out access tokens from now on: each PutStart and replica list carries fresh 20-byte tokens whose byte 4
     * is a generation number counting from 1 ({@link #tokenGeneration(TransferRequest)}).
     */
    void issueTokens()
    {
        tokens = true;
    }

    /** The generation of the token a transfer carries (0 without one). */
    static int tokenGeneration(final io.granary.transfer.TransferRequest request)
    {
        return request.accessToken() == null ? 0 : request.accessToken()[4];
    }

    private Replica withToken(final Replica replica, final int generation)
    {
        if (!tokens)
        {
            return replica;
        }
        final byte[] token = new byte[20];
        token[3] = 1; // a non-zero expiry
        token[4] = (byte)generation;
        return replica.toBuilder().setAccessToken(com.google.protobuf.ByteString.copyFrom(token)).build();
    }

    /** The checksum the last PutEnd of {@code key} recorded, or null. */
    Integer crc(final String key)
    {
        final StoredObject o = objects.get(key);
        return o == null ? null : o.crc;
    }

    /** Answers {@code rpc} (e.g. "PutStart") with {@code answer} instead of the default behaviour. */
    @SuppressWarnings("unchecked")
    <Q extends Message, R extends Message> void script(final String rpc, final Function<Q, R> answer)
    {
        scripts.put(rpc, m -> answer.apply((Q)m));
    }

    /** Makes {@code rpc} never answer (the call stays open until the server stops). */
    void hang(final String rpc)
    {
        hanging.add(rpc);
    }

    List<Message> requests()
    {
        return List.copyOf(requests);
    }

    <T extends Message> List<T> requests(final Class<T> type)
    {
        final List<T> result = new ArrayList<>();
        for (final Message m : requests)
        {
            if (type.isInstance(m))
            {
                result.add(type.cast(m));
            }
        }
        return result;
    }

    int count(final Class<? extends Message> type)
    {
        return requests(type).size();
    }

    boolean isComplete(final String key)
    {
        final StoredObject o = objects.get(key);
        return o != null && o.complete;
    }

    // ------------------------------------------------------------------------------------------- plumbing

    @SuppressWarnings("unchecked")
    private <Q extends Message, R extends Message> void answer(
        final String rpc, final Q request, final StreamObserver<R> out, final Function<Q, R> fallback)
    {
        requests.add(request);
        if (hanging.contains(rpc))
        {
            return;
        }
        final Function<Message, Message> script = scripts.get(rpc);
        final R reply = script != null ? (R)script.apply(request) : fallback.apply(request);
        out.onNext(reply);
        out.onCompleted();
    }

    @Override
    public void getServerInfo(
        final io.granary.proto.ServerInfoRequest request, final StreamObserver<io.granary.proto.ServerInfoResponse> out)
    {
        answer("GetServerInfo", request, out, r -> io.granary.proto.ServerInfoResponse.newBuilder()
            .setVersion("scripted").setLeaseTtlMs(LEASE_TTL_MS).build());
    }

    @Override
    public void putStart(final PutStartRequest request, final StreamObserver<PutStartResponse> out)
    {
        answer("PutStart", request, out, r -> start(r.getKey(), r.getValueLength(), r.getOptions().getReplicas(),
            r.getAvoidNodeIdsList()));
    }

    @Override
    public void putEnd(final PutEndRequest request, final StreamObserver<CodeResponse> out)
    {
        answer("PutEnd", request, out, r -> CodeResponse.newBuilder()
            .setCode(end(r.getKey(), r.hasCrc32C() ? r.getCrc32C() : null)).build());
    }

    @Override
    public void putRevoke(final PutRevokeRequest request, final StreamObserver<CodeResponse> out)
    {
        answer("PutRevoke", request, out, r -> CodeResponse.newBuilder().setCode(revoke(r.getKey())).build());
    }

    @Override
    public void batchPutStart(final BatchPutStartRequest request, final StreamObserver<BatchPutStartResponse> out)
    {
        answer("BatchPutStart", request, out, r ->
        {
            final BatchPutStartResponse.Builder b = BatchPutStartResponse.newBuilder();
            for (int i = 0; i < r.getKeysCount(); i++)
            {
                b.addResults(start(r.getKeys(i), r.getValueLengths(i), r.getOptions().getReplicas(),
                    r.getAvoidNodeIdsList()));
            }
            return b.build();
        });
    }

    @Override
    public void batchPutEnd(final BatchKeysRequest request, final StreamObserver<BatchCodeResponse> out)
    {
        answer("BatchPutEnd", request, out, r ->
        {
            final BatchCodeResponse.Builder b = BatchCodeResponse.newBuilder();
            for (int i = 0; i < r.getKeysCount(); i++)
            {
                b.addCodes(end(r.getKeys(i), r.getCrc32CCount() == 0 ? null : r.getCrc32C(i)));
            }
            return b.build();
        });
    }

    @Override
    public void batchPutRevoke(final BatchKeysRequest request, final StreamObserver<BatchCodeResponse> out)
    {
        answer("BatchPutRevoke", request, out, r ->
        {
            final BatchCodeResponse.Builder b = BatchCodeResponse.newBuilder();
            r.getKeysList().forEach(k -> b.addCodes(revoke(k)));
            return b.build();
        });
    }

    @Override
    public void getReplicaList(final KeyRequest request, final StreamObserver<GetReplicaListResponse> out)
    {
        answer("GetReplicaList", request, out, r -> replicaList(r.getKey()));
    }

    @Override
    public void batchGetReplicaList(
        final BatchKeysRequest request, final StreamObserver<BatchGetReplicaListResponse> out)
    {
        answer("BatchGetReplicaList", request, out, r ->
        {
            final BatchGetReplicaListResponse.Builder b = BatchGetReplicaListResponse.newBuilder();
            r.getKeysList().forEach(k -> b.addResults(replicaList(k)));
            return b.build();
        });
    }

    @Override
    public void existKey(final KeyRequest request, final StreamObserver<ExistKeyResponse> out)
    {
        answer("ExistKey", request, out, r -> ExistKeyResponse.newBuilder().setExists(isComplete(r.getKey())).build());
    }

    @Override
    public void batchExistKey(final BatchKeysRequest request, final StreamObserver<BatchExistKeyResponse> out)
    {
        answer("BatchExistKey", request, out, r ->
        {
            final BatchExistKeyResponse.Builder b = BatchExistKeyResponse.newBuilder();
            r.getKeysList().forEach(k -> b.addExists(isComplete(k)).addCodes(0));
            return b.build();
        });
    }

    @Override
    public void batchProbeKey(final BatchProbeKeyRequest request, final StreamObserver<BatchProbeKeyResponse> out)
    {
        answer("BatchProbeKey", request, out, r ->
        {
            final BatchProbeKeyResponse.Builder b = BatchProbeKeyResponse.newBuilder();
            r.getKeysList().forEach(k -> b.addMask(isComplete(k)).addCodes(0));
            return b.build();
        });
    }

    @Override
    public void remove(final RemoveRequest request, final StreamObserver<CodeResponse> out)
    {
        answer("Remove", request, out, r -> CodeResponse.newBuilder()
            .setCode(objects.remove(r.getKey()) == null ? ErrorCode.OBJECT_NOT_FOUND_VALUE : 0).build());
    }

    @Override
    public void removeByRegex(final RemoveByRegexRequest request, final StreamObserver<CountResponse> out)
    {
        answer("RemoveByRegex", request, out, r ->
        {
            final Pattern pattern = Pattern.compile(r.getRegex());
            long removed = 0;
            for (final Iterator<String> it = objects.keySet().iterator(); it.hasNext(); )
            {
                if (pattern.matcher(it.next()).matches())
                {
                    it.remove();
                    removed++;
                }
            }
            return CountResponse.newBuilder().setCount(removed).build();
        });
    }

    @Override
    public void removeAll(final RemoveAllRequest request, final StreamObserver<CountResponse> out)
    {
        answer("RemoveAll", request, out, r ->
        {
            final long removed = objects.size();
            objects.clear();
            return CountResponse.newBuilder().setCount(removed).build();
        });
    }

    @Override
    public void listKeys(final ListKeysRequest request, final StreamObserver<ListKeysResponse> out)
    {
        answer("ListKeys", request, out, r ->
        {
            final ListKeysResponse.Builder b = ListKeysResponse.newBuilder();
            objects.forEach((k, o) -> b.addKeys(KeyInfo.newBuilder()
                .setKey(k)
                .setValueLength(o.length)
                .setReplicas(o.replicas.size())
                .setStatus(o.complete ?
                    ReplicaStatus.REPLICA_STATUS_COMPLETE : ReplicaStatus.REPLICA_STATUS_PROCESSING)));
            return b.build();
        });
    }

    @Override
    public void getClusterStatus(final ClusterStatusRequest request, final StreamObserver<ClusterStatusResponse> out)
    {
        answer("GetClusterStatus", request, out, r -> ClusterStatusResponse.newBuilder()
            .setObjects(objects.size()).setLeaseTtlMs(LEASE_TTL_MS).setVersion("scripted").build());
    }

    // ------------------------------------------------------------------------------------------- mini master

    /** Places on the configured nodes in order, the ones to avoid last (as the real master does). */
    private PutStartResponse start(final String key, final long length, final int replicas, final List<String> avoid)
    {
        final StoredObject existing = objects.get(key);
        if (existing != null)
        {
            return PutStartResponse.newBuilder().setCode(existing.complete ?
                ErrorCode.OBJECT_ALREADY_EXISTS_VALUE : ErrorCode.REPLICA_IS_NOT_READY_VALUE).build();
        }
        final List<Placement> where = new ArrayList<>(placements);
        where.sort(java.util.Comparator.comparing(p -> avoid.contains(p.nodeId())));
        final int count = Math.min(Math.max(1, replicas), where.size());
        final List<Replica> extents = new ArrayList<>(count);
        final long offset = nextOffset.getAndAdd((length + 63) & ~63L);
        final int generation = tokenGeneration.incrementAndGet();
        for (int i = 0; i < count; i++)
        {
            final Placement p = where.get(i);
            extents.add(Replica.newBuilder()
                .setNodeId(p.nodeId())
                .setEndpoint(p.endpoint())
                .setSegmentId(p.segmentId())
                .setOffset(offset)
                .setLength(length)
                .setStatus(ReplicaStatus.REPLICA_STATUS_PROCESSING)
                .build());
        }
        objects.put(key, new StoredObject(length, extents));
        final PutStartResponse.Builder b = PutStartResponse.newBuilder().setVersion(nextVersion.incrementAndGet());
        extents.forEach(r -> b.addReplicas(withToken(r, generation)));
        return b.build();
    }

    private int end(final String key, final Integer crc)
    {
        final StoredObject o = objects.get(key);
        if (o == null)
        {
            return ErrorCode.OBJECT_NOT_FOUND_VALUE;
        }
        o.crc = crc;
        o.complete = true;
        return 0;
    }

    private int revoke(final String key)
    {
        return objects.remove(key) == null ? ErrorCode.OBJECT_NOT_FOUND_VALUE : 0;
    }

    private GetReplicaListResponse replicaList(final String key)
    {
        final StoredObject o = objects.get(key);
        if (o == null || !o.complete)
        {
            return GetReplicaListResponse.newBuilder().setCode(ErrorCode.OBJECT_NOT_FOUND_VALUE).build();
        }
        final GetReplicaListResponse.Builder b = GetReplicaListResponse.newBuilder()
            .setValueLength(o.length)
            .setLeaseTtlMs(LEASE_TTL_MS);
        if (o.crc != null)
        {
            b.setCrc32C(o.crc);
        }
        final int generation = tokenGeneration.incrementAndGet();
        o.replicas.forEach(r -> b.addReplicas(
            withToken(r.toBuilder().setStatus(ReplicaStatus.REPLICA_STATUS_COMPLETE).build(), generation)));
        return b.build();
    }
}
