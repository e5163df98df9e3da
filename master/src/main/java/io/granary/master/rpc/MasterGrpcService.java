package io.granary.master.rpc;

import io.granary.proto.*;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.function.Supplier;

/**
 * gRPC adapter of the master: each call is handed to the {@link MasterRequestHandler} on the
 * event loop (no thread hand-off). A gRPC error status means an unexpected server fault; store
 * outcomes are codes inside the reply.
 */
public final class MasterGrpcService extends MasterServiceGrpc.MasterServiceImplBase
{
    private static final Logger LOG = LoggerFactory.getLogger(MasterGrpcService.class);

    private final MasterRequestHandler handler;

    public MasterGrpcService(final MasterRequestHandler handler)
    {
        this.handler = handler;
    }

    private static <T> void reply(final StreamObserver<T> observer, final String rpc, final Supplier<T> call)
    {
        final T response;
        try
        {
            response = call.get();
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

    @Override
    public void mountSegment(final MountSegmentRequest req, final StreamObserver<MountSegmentResponse> observer)
    {
        reply(observer, "MountSegment", () -> handler.mountSegment(req));
    }

    @Override
    public void unmountSegment(final UnmountSegmentRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "UnmountSegment", () -> handler.unmountSegment(req));
    }

    @Override
    public void deregisterNode(final DeregisterNodeRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "DeregisterNode", () -> handler.deregisterNode(req));
    }

    @Override
    public void reportLedger(final ReportLedgerRequest req, final StreamObserver<ReportLedgerResponse> observer)
    {
        reply(observer, "ReportLedger", () -> handler.reportLedger(req));
    }

    @Override
    public void heartbeat(final HeartbeatRequest req, final StreamObserver<HeartbeatResponse> observer)
    {
        reply(observer, "Heartbeat", () -> handler.heartbeat(req));
    }

    @Override
    public void putStart(final PutStartRequest req, final StreamObserver<PutStartResponse> observer)
    {
        reply(observer, "PutStart", () -> handler.putStart(req));
    }

    @Override
    public void putEnd(final PutEndRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "PutEnd", () -> handler.putEnd(req));
    }

    @Override
    public void putRevoke(final PutRevokeRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "PutRevoke", () -> handler.putRevoke(req));
    }

    @Override
    public void batchPutStart(final BatchPutStartRequest req, final StreamObserver<BatchPutStartResponse> observer)
    {
        reply(observer, "BatchPutStart", () -> handler.batchPutStart(req));
    }

    @Override
    public void batchPutEnd(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, "BatchPutEnd", () -> handler.batchPutEnd(req));
    }

    @Override
    public void batchPutRevoke(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, "BatchPutRevoke", () -> handler.batchPutRevoke(req));
    }

    @Override
    public void getReplicaList(final KeyRequest req, final StreamObserver<GetReplicaListResponse> observer)
    {
        reply(observer, "GetReplicaList", () -> handler.getReplicaList(req));
    }

    @Override
    public void batchGetReplicaList(final BatchKeysRequest req, final StreamObserver<BatchGetReplicaListResponse> observer)
    {
        reply(observer, "BatchGetReplicaList", () -> handler.batchGetReplicaList(req));
    }

    @Override
    public void existKey(final KeyRequest req, final StreamObserver<ExistKeyResponse> observer)
    {
        reply(observer, "ExistKey", () -> handler.existKey(req));
    }

    @Override
    public void batchExistKey(final BatchKeysRequest req, final StreamObserver<BatchExistKeyResponse> observer)
    {
        reply(observer, "BatchExistKey", () -> handler.batchExistKey(req));
    }

    @Override
    public void batchProbeKey(final BatchProbeKeyRequest req, final StreamObserver<BatchProbeKeyResponse> observer)
    {
        reply(observer, "BatchProbeKey", () -> handler.batchProbeKey(req));
    }

    @Override
    public void remove(final RemoveRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, "Remove", () -> handler.remove(req));
    }

    @Override
    public void removeByRegex(final RemoveByRegexRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, "RemoveByRegex", () -> handler.removeByRegex(req));
    }

    @Override
    public void removeAll(final RemoveAllRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, "RemoveAll", () -> handler.removeAll(req));
    }

    @Override
    public void listKeys(final ListKeysRequest req, final StreamObserver<ListKeysResponse> observer)
    {
        reply(observer, "ListKeys", () -> handler.listKeys(req));
    }

    @Override
    public void getServerInfo(final ServerInfoRequest req, final StreamObserver<ServerInfoResponse> observer)
    {
        reply(observer, "GetServerInfo", () -> handler.getServerInfo(req));
    }

    @Override
    public void getClusterStatus(final ClusterStatusRequest req, final StreamObserver<ClusterStatusResponse> observer)
    {
        reply(observer, "GetClusterStatus", () -> handler.getClusterStatus(req));
    }
}
