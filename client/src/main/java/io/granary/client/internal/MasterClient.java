package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
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
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The client's stub of the master's gRPC service: one channel, a blocking call per method with a
 * deadline of the RPC timeout, and gRPC failures translated into {@link GranaryException} (RPC_TIMEOUT
 * for an expired deadline, RPC_FAIL otherwise, the status kept as the cause). It never retries: PutStart
 * and friends are not idempotent. Thread safe.
 */
final class MasterClient implements AutoCloseable
{
    static final int MAX_INBOUND_MESSAGE_BYTES = 64 << 20;

    private final String address;
    private final long rpcTimeoutMs;
    private final ManagedChannel channel;
    private final MasterServiceGrpc.MasterServiceBlockingStub stub;

    MasterClient(final String address, final Duration rpcTimeout)
    {
        this.address = address;
        this.rpcTimeoutMs = rpcTimeout.toMillis();
        this.channel = NettyChannelBuilder.forTarget(address)
            .usePlaintext()
            .directExecutor() // replies are decoded on the I/O thread and handed straight to the blocked caller
            .maxInboundMessageSize(MAX_INBOUND_MESSAGE_BYTES)
            .build();
        this.stub = MasterServiceGrpc.newBlockingStub(channel);
        channel.getState(true); // start connecting now, so the first call does not pay for it
    }

    PutStartResponse putStart(final PutStartRequest request)
    {
        return call("PutStart", s -> s.putStart(request));
    }

    CodeResponse putEnd(final PutEndRequest request)
    {
        return call("PutEnd", s -> s.putEnd(request));
    }

    CodeResponse putRevoke(final PutRevokeRequest request)
    {
        return call("PutRevoke", s -> s.putRevoke(request));
    }

    BatchPutStartResponse batchPutStart(final BatchPutStartRequest request)
    {
        return call("BatchPutStart", s -> s.batchPutStart(request));
    }

    BatchCodeResponse batchPutEnd(final BatchKeysRequest request)
    {
        return call("BatchPutEnd", s -> s.batchPutEnd(request));
    }

    BatchCodeResponse batchPutRevoke(final BatchKeysRequest request)
    {
        return call("BatchPutRevoke", s -> s.batchPutRevoke(request));
    }

    GetReplicaListResponse getReplicaList(final KeyRequest request)
    {
        return call("GetReplicaList", s -> s.getReplicaList(request));
    }

    BatchGetReplicaListResponse batchGetReplicaList(final BatchKeysRequest request)
    {
        return call("BatchGetReplicaList", s -> s.batchGetReplicaList(request));
    }

    ExistKeyResponse existKey(final KeyRequest request)
    {
        return call("ExistKey", s -> s.existKey(request));
    }

    BatchExistKeyResponse batchExistKey(final BatchKeysRequest request)
    {
        return call("BatchExistKey", s -> s.batchExistKey(request));
    }

    BatchProbeKeyResponse batchProbeKey(final BatchProbeKeyRequest request)
    {
        return call("BatchProbeKey", s -> s.batchProbeKey(request));
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

    private <R> R call(final String rpc, final Function<MasterServiceGrpc.MasterServiceBlockingStub, R> body)
    {
        try
        {
            return body.apply(stub.withDeadlineAfter(rpcTimeoutMs, TimeUnit.MILLISECONDS));
        }
        catch (final StatusRuntimeException ex)
        {
            throw translate(rpc, ex);
        }
    }

    private GranaryException translate(final String rpc, final StatusRuntimeException ex)
    {
        final Status status = ex.getStatus();
        final boolean timedOut = status.getCode() == Status.Code.DEADLINE_EXCEEDED;
        final String detail = timedOut ?
            "no answer within " + rpcTimeoutMs + " ms" :
            status.getCode() + (status.getDescription() == null ? "" : " " + status.getDescription());
        return new GranaryException(
            timedOut ? ErrorCode.RPC_TIMEOUT : ErrorCode.RPC_FAIL, rpc + " to master " + address + ": " + detail, ex);
    }

    @Override
    public void close()
    {
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
