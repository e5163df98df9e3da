package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.common.tls.GrpcTls;
import io.granary.common.tls.TlsContexts;
import io.granary.common.tls.TlsSettings;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.ClusterStatusRequest;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.CountResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.LeaseMode;
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
import io.granary.proto.ServerInfoRequest;
import io.granary.proto.ServerInfoResponse;
import io.granary.protocol.LookupDescriptor;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.ssl.SslContext;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The client's stub of the master's gRPC service: one channel, a blocking call per method with a
 * deadline of the RPC timeout, and gRPC failures translated into {@link GranaryException} (RPC_TIMEOUT
 * for an expired deadline, RPC_FAIL otherwise, the status kept as the cause). A call that goes over the
 * lookup port and falls back to gRPC keeps to the same deadline. While the master is unreachable the
 * client reconnects with capped, jittered backoff (the gRPC channel's own backoff is cut short at that
 * pace, and the lookup port is rediscovered), so a restarted master is used again within one backoff
 * step. It never retries a call itself. Thread safe.
 */
final class MasterClient implements AutoCloseable
{
    static final int MAX_INBOUND_MESSAGE_BYTES = 64 << 20;

    private final String address;
    private final long rpcTimeoutMs;
    private final ManagedChannel channel;
    private final MasterServiceGrpc.MasterServiceBlockingStub stub;
    private final boolean fastLookups;
    /** TLS for the lookup port's blocking sockets; null for plain text. */
    private final javax.net.ssl.SSLContext lookupTls;
    /** The framed lookup path once discovered; null until then or when the master has none. */
    private volatile LookupClient lookup;
    private volatile boolean lookupResolved;
    private volatile long fastPathRetryAtNs = System.nanoTime();
    private final Backoff lookupBackoff;
    private volatile boolean lookupFailing;
    private final Backoff reconnectBackoff;
    private volatile boolean masterUnreachable;
    private volatile long reconnectAtNs = System.nanoTime();

    MasterClient(final String address, final Duration rpcTimeout)
    {
        this(address, rpcTimeout, false);
    }

    MasterClient(final String address, final Duration rpcTimeout, final boolean fastLookups)
    {
        this(address, rpcTimeout, fastLookups, TlsSettings.DISABLED);
    }

    /** @throws IllegalArgumentException when the TLS files are unusable. */
    MasterClient(final String address, final Duration rpcTimeout, final boolean fastLookups, final TlsSettings tls)
    {
        this(address, rpcTimeout, fastLookups, tls, io.granary.client.ClientConfig.DEFAULT_RECONNECT_BACKOFF,
            io.granary.client.ClientConfig.DEFAULT_RECONNECT_BACKOFF_MAX);
    }

    /**
     * @param reconnectBackoff first pause between reconnect attempts; doubles up to {@code reconnectBackoffMax}.
     * @throws IllegalArgumentException when the TLS files are unusable.
     */
    MasterClient(
        final String address,
        final Duration rpcTimeout,
        final boolean fastLookups,
        final TlsSettings tls,
        final Duration reconnectBackoff,
        final Duration reconnectBackoffMax)
    {
        this.lookupBackoff = new Backoff(reconnectBackoff.toNanos(), reconnectBackoffMax.toNanos());
        this.reconnectBackoff = new Backoff(reconnectBackoff.toNanos(), reconnectBackoffMax.toNanos());
        this.address = address;
        this.fastLookups = fastLookups;
        this.rpcTimeoutMs = rpcTimeout.toMillis();
        final SslContext grpcTls = GrpcTls.clientContext(tls);
        this.lookupTls = TlsContexts.jdkClientContext(tls);
        final NettyChannelBuilder builder = NettyChannelBuilder.forTarget(address)
            .directExecutor() // replies are decoded on the I/O thread and handed straight to the blocked caller
            .maxInboundMessageSize(MAX_INBOUND_MESSAGE_BYTES);
        if (grpcTls == null)
        {
            builder.usePlaintext();
        }
        else
        {
            builder.sslContext(grpcTls);
        }
        this.channel = builder.build();
        this.stub = MasterServiceGrpc.newBlockingStub(channel);
        channel.getState(true); // start connecting now, so the first call does not pay for it
    }

    /** PutStart; {@code whileWaiting} (may be null, see fastOrGrpc) runs on this thread while the master handles it. */
    PutStartResponse putStart(final PutStartRequest request, final Runnable whileWaiting)
    {
        return fastOrGrpc("PutStart", LookupDescriptor.METHOD_PUT_START, request,
            PutStartResponse.parser(), s -> s.putStart(request), whileWaiting);
    }

    CodeResponse putEnd(final PutEndRequest request)
    {
        return fastOrGrpc("PutEnd", LookupDescriptor.METHOD_PUT_END, request,
            CodeResponse.parser(), s -> s.putEnd(request));
    }

    CodeResponse putRevoke(final PutRevokeRequest request)
    {
        return fastOrGrpc("PutRevoke", LookupDescriptor.METHOD_PUT_REVOKE, request,
            CodeResponse.parser(), s -> s.putRevoke(request));
    }

    /** BatchPutStart; {@code whileWaiting} (may be null, see fastOrGrpc) runs here while the master handles it. */
    StartedPuts batchPutStart(final BatchPutStartRequest request, final Runnable whileWaiting)
    {
        return fastOrGrpc("BatchPutStart", LookupDescriptor.METHOD_BATCH_PUT_START, request,
            StartedPuts::decode, s -> StartedPuts.of(s.batchPutStart(request)), whileWaiting);
    }

    BatchCodeResponse batchPutEnd(final BatchKeysRequest request)
    {
        return fastOrGrpc("BatchPutEnd", LookupDescriptor.METHOD_BATCH_PUT_END, request,
            BatchCodeResponse.parser(), s -> s.batchPutEnd(request));
    }

    BatchCodeResponse batchPutRevoke(final BatchKeysRequest request)
    {
        return fastOrGrpc("BatchPutRevoke", LookupDescriptor.METHOD_BATCH_PUT_REVOKE, request,
            BatchCodeResponse.parser(), s -> s.batchPutRevoke(request));
    }

    GetReplicaListResponse getReplicaList(final KeyRequest request)
    {
        return fastOrGrpc("GetReplicaList", LookupDescriptor.METHOD_GET_REPLICA_LIST, request,
            GetReplicaListResponse.parser(), s -> s.getReplicaList(request));
    }

    BatchGetReplicaListResponse batchGetReplicaList(final BatchKeysRequest request)
    {
        return fastOrGrpc("BatchGetReplicaList", LookupDescriptor.METHOD_BATCH_GET_REPLICA_LIST, request,
            BatchGetReplicaListResponse.parser(), s -> s.batchGetReplicaList(request));
    }

    ExistKeyResponse existKey(final KeyRequest request)
    {
        return fastOrGrpc("ExistKey", LookupDescriptor.METHOD_EXIST_KEY, request,
            ExistKeyResponse.parser(), s -> s.existKey(request));
    }

    BatchExistKeyResponse batchExistKey(final BatchKeysRequest request)
    {
        return fastOrGrpc("BatchExistKey", LookupDescriptor.METHOD_BATCH_EXIST_KEY, request,
            BatchExistKeyResponse.parser(), s -> s.batchExistKey(request));
    }

    BatchProbeKeyResponse batchProbeKey(final BatchProbeKeyRequest request)
    {
        return fastOrGrpc("BatchProbeKey", LookupDescriptor.METHOD_BATCH_PROBE_KEY, request,
            BatchProbeKeyResponse.parser(), s -> s.batchProbeKey(request));
    }

    /**
     * BatchExistKey for plain keys: on the lookup port the request is written straight from the
     * strings (one pass, no message built); over gRPC it becomes a BatchKeysRequest.
     */
    BatchExistKeyResponse batchExistKey(final String tenant, final List<String> keys)
    {
        final long deadlineNs = deadline();
        final LookupClient fast = lookup(deadlineNs);
        if (fast != null)
        {
            try
            {
                final BatchExistKeyResponse reply = fast.call("BatchExistKey", LookupDescriptor.METHOD_BATCH_EXIST_KEY,
                    out ->
                    {
                        out.writeStringField(1, tenant);
                        out.writeStrings(3, keys);
                    }, BatchExistKeyResponse.parser(), deadlineNs);
                lookupReachable();
                return reply;
            }
            catch (final GranaryException ex)
            {
                fallBackToGrpc(ex);
            }
        }
        final BatchKeysRequest request = BatchKeysRequest.newBuilder().setTenant(tenant).addAllKeys(keys).build();
        return call("BatchExistKey", s -> s.batchExistKey(request), deadlineNs);
    }

    /** BatchProbeKey for plain keys, written like {@link #batchExistKey(String, List)}. */
    BatchProbeKeyResponse batchProbeKey(
        final String tenant, final LeaseMode mode, final int candidateSize, final List<String> keys)
    {
        return batchProbeKey(tenant, mode, candidateSize, keys, false, 0, 0);
    }

    /**
     * {@link #batchProbeKey(String, LeaseMode, int, List)}, asking with {@code withReplicas} for the replica lists of
     * the selected keys at candidate positions {@code [replicasFrom, replicasFrom + replicasCount)} too (count 0: all).
     */
    BatchProbeKeyResponse batchProbeKey(
        final String tenant, final LeaseMode mode, final int candidateSize, final List<String> keys,
        final boolean withReplicas, final int replicasFrom, final int replicasCount)
    {
        final long deadlineNs = deadline();
        final LookupClient fast = lookup(deadlineNs);
        if (fast != null)
        {
            try
            {
                final BatchProbeKeyResponse reply = fast.call("BatchProbeKey", LookupDescriptor.METHOD_BATCH_PROBE_KEY,
                    out ->
                    {
                        out.writeStringField(1, tenant);
                        out.writeVarintField(2, mode.getNumber());
                        out.writeVarintField(3, candidateSize & 0xFFFFFFFFL);
                        out.writeStrings(4, keys);
                        out.writeVarintField(5, withReplicas ? 1 : 0);
                        out.writeVarintField(6, replicasFrom & 0xFFFFFFFFL);
                        out.writeVarintField(7, replicasCount & 0xFFFFFFFFL);
                        out.writeVarintField(8, withReplicas ? 1 : 0); // shared grants with the replica lists
                    }, BatchProbeKeyResponse.parser(), deadlineNs);
                lookupReachable();
                return reply;
            }
            catch (final GranaryException ex)
            {
                fallBackToGrpc(ex);
            }
        }
        final BatchProbeKeyRequest request = BatchProbeKeyRequest.newBuilder()
            .setTenant(tenant).setMode(mode).setCandidateSize(candidateSize).addAllKeys(keys)
            .setWithReplicas(withReplicas).setReplicasFrom(replicasFrom).setReplicasCount(replicasCount)
            .setSharedGrants(withReplicas).build();
        return call("BatchProbeKey", s -> s.batchProbeKey(request), deadlineNs);
    }

    CodeResponse remove(final RemoveRequest request)
    {
        return call("Remove", s -> s.remove(request));
    }

    CountResponse removeByRegex(final RemoveByRegexRequest request)
    {
        return call("RemoveByRegex", s -> s.removeByRegex(request));
    }

    CountResponse removeAll(final RemoveAllRequest request)
    {
        return call("RemoveAll", s -> s.removeAll(request));
    }

    ListKeysResponse listKeys(final ListKeysRequest request)
    {
        return call("ListKeys", s -> s.listKeys(request));
    }

    ClusterStatusResponse clusterStatus()
    {
        return call("GetClusterStatus", s -> s.getClusterStatus(ClusterStatusRequest.getDefaultInstance()));
    }

    /**
     * Sends a call over the framed lookup port when there is one, else (or when it fails to connect)
     * over gRPC. Retrying a call on the other path is safe: lookups only read and lease, PutStart
     * of the same client and key answers the same extents, PutEnd is idempotent, PutRevoke of a
     * revoked key answers OBJECT_NOT_FOUND.
     */
    private <T> T fastOrGrpc(
        final String rpc,
        final int method,
        final com.google.protobuf.MessageLite request,
        final com.google.protobuf.Parser<T> parser,
        final Function<MasterServiceGrpc.MasterServiceBlockingStub, T> grpc)
    {
        return fastOrGrpc(rpc, method, request, parser::parseFrom, grpc, null);
    }

    private <T> T fastOrGrpc(
        final String rpc,
        final int method,
        final com.google.protobuf.MessageLite request,
        final com.google.protobuf.Parser<T> parser,
        final Function<MasterServiceGrpc.MasterServiceBlockingStub, T> grpc,
        final Runnable whileWaiting)
    {
        return fastOrGrpc(rpc, method, request, parser::parseFrom, grpc, whileWaiting);
    }

    /**
     * As above; {@code whileWaiting} (null: nothing) runs on this thread after the request left on the lookup port, so
     * that it overlaps the master's handling, and before a gRPC call: it may run more than once (a resent request, a
     * fallback), so it must do its work only the first time.
     */
    private <T> T fastOrGrpc(
        final String rpc,
        final int method,
        final com.google.protobuf.MessageLite request,
        final LookupClient.Decoder<T> decoder,
        final Function<MasterServiceGrpc.MasterServiceBlockingStub, T> grpc,
        final Runnable whileWaiting)
    {
        final long deadlineNs = deadline();
        final LookupClient fast = lookup(deadlineNs);
        if (fast != null)
        {
            try
            {
                final T reply = fast.call(rpc, method, request, decoder, deadlineNs, whileWaiting);
                lookupReachable();
                return reply;
            }
            catch (final GranaryException ex)
            {
                fallBackToGrpc(ex);
            }
        }
        if (whileWaiting != null)
        {
            whileWaiting.run();
        }
        return call(rpc, grpc, deadlineNs);
    }

    private long deadline()
    {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(rpcTimeoutMs);
    }

    private void lookupReachable()
    {
        if (lookupFailing)
        {
            lookupFailing = false;
            lookupBackoff.reset();
        }
    }

    /**
     * The framed lookup client, discovered once through GetServerInfo; null when fast lookups are
     * off, the master advertises no lookup port, or discovery failed (gRPC then carries lookups).
     */
    private LookupClient lookup(final long deadlineNs)
    {
        if (!fastLookups || System.nanoTime() - fastPathRetryAtNs < 0)
        {
            return null;
        }
        if (lookupResolved)
        {
            return lookup;
        }
        synchronized (this)
        {
            if (!lookupResolved)
            {
                try
                {
                    final ServerInfoResponse info = call("GetServerInfo", s -> s.getServerInfo(
                        ServerInfoRequest.getDefaultInstance()), deadlineNs);
                    final LookupClient previous = lookup;
                    lookup = info.getLookupPort() > 0 ?
                        new LookupClient(hostOf(address), info.getLookupPort(), rpcTimeoutMs, lookupTls) : null;
                    if (previous != null)
                    {
                        previous.close();
                    }
                    lookupResolved = true;
                }
                catch (final GranaryException ex)
                {
                    if (ex.getCause() instanceof StatusRuntimeException &&
                        ((StatusRuntimeException)ex.getCause()).getStatus().getCode() == Status.Code.UNIMPLEMENTED)
                    {
                        lookupResolved = true; // an older master: gRPC only
                    }
                    return null; // otherwise try discovery again on the next call
                }
            }
            return lookup;
        }
    }

    /**
     * The lookup port failed (not a timeout): carry on over gRPC and leave the fast path alone for a
     * backoff step (doubling up to the cap while it keeps failing), so an unreachable lookup port costs
     * one failed connect per step, not per call; then discover the port again (a restarted master may
     * have another one).
     */
    private void fallBackToGrpc(final GranaryException ex)
    {
        if (ex.code() != ErrorCode.RPC_FAIL || !(ex.getCause() instanceof java.io.IOException))
        {
            throw ex;
        }
        lookupFailing = true;
        fastPathRetryAtNs = System.nanoTime() + lookupBackoff.nextDelayNs();
        lookupResolved = false;
    }

    /** The host part of host:port or [v6]:port. */
    static String hostOf(final String hostPort)
    {
        final String host = hostPort.substring(0, hostPort.lastIndexOf(':'));
        return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    }

    private <R> R call(final String rpc, final Function<MasterServiceGrpc.MasterServiceBlockingStub, R> body)
    {
        return call(rpc, body, deadline());
    }

    private <R> R call(
        final String rpc, final Function<MasterServiceGrpc.MasterServiceBlockingStub, R> body, final long deadlineNs)
    {
        final long remainingNs = deadlineNs - System.nanoTime();
        if (remainingNs <= 0)
        {
            throw new GranaryException(ErrorCode.RPC_TIMEOUT,
                rpc + " to master " + address + ": no answer within " + rpcTimeoutMs + " ms");
        }
        try
        {
            final R reply = body.apply(stub.withDeadlineAfter(remainingNs, TimeUnit.NANOSECONDS));
            if (masterUnreachable)
            {
                masterUnreachable = false;
                reconnectBackoff.reset();
            }
            return reply;
        }
        catch (final StatusRuntimeException ex)
        {
            if (ex.getStatus().getCode() == Status.Code.UNAVAILABLE)
            {
                reconnectSoon();
            }
            throw translate(rpc, ex);
        }
    }

    /**
     * The master could not be reached: let the channel try again now rather than after its own backoff
     * (which grows to two minutes), but at most once per backoff step of ours.
     */
    private void reconnectSoon()
    {
        masterUnreachable = true;
        final long now = System.nanoTime();
        if (now - reconnectAtNs >= 0)
        {
            reconnectAtNs = now + reconnectBackoff.nextDelayNs();
            channel.resetConnectBackoff();
        }
    }

    private GranaryException translate(final String rpc, final StatusRuntimeException ex)
    {
        final Status status = ex.getStatus();
        final boolean timedOut = status.getCode() == Status.Code.DEADLINE_EXCEEDED;
        final String detail = timedOut ?
            "no answer within " + rpcTimeoutMs + " ms" :
            status.getCode() == Status.Code.UNAVAILABLE ?
                "master unreachable (" + status.getCode() +
                    (status.getDescription() == null ? "" : " " + status.getDescription()) + ")" :
                status.getCode() + (status.getDescription() == null ? "" : " " + status.getDescription());
        return new GranaryException(
            timedOut ? ErrorCode.RPC_TIMEOUT : ErrorCode.RPC_FAIL, rpc + " to master " + address + ": " + detail, ex);
    }

    @Override
    public void close()
    {
        final LookupClient fast = lookup;
        if (fast != null)
        {
            fast.close();
        }
        channel.shutdown();
        try
        {
            if (!channel.awaitTermination(1, TimeUnit.SECONDS))
            {
                channel.shutdownNow();
            }
        }
        catch (final InterruptedException ex)
        {
            channel.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
