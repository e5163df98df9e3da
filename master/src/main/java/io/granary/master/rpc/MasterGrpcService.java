package io.granary.master.rpc;

import io.granary.master.events.EventDispatcher;
import io.granary.master.meta.MetadataStore;
import io.granary.proto.*;
import io.granary.protocol.Limits;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
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
    private final RpcMetrics metrics;
    private final EventDispatcher events;

    public MasterGrpcService(final MasterRequestHandler handler)
    {
        this(handler, RpcMetrics.NONE, null);
    }

    /** @param metrics per-call latency and failures of this transport. */
    public MasterGrpcService(final MasterRequestHandler handler, final RpcMetrics metrics)
    {
        this(handler, metrics, null);
    }

    /** @param events the event streams, or null when the master publishes no events. */
    public MasterGrpcService(final MasterRequestHandler handler, final RpcMetrics metrics, final EventDispatcher events)
    {
        this.handler = handler;
        this.metrics = metrics;
        this.events = events;
    }

    private <T> void reply(final StreamObserver<T> observer, final MasterRpc rpc, final Supplier<T> call)
    {
        final long startNs = System.nanoTime();
        final T response;
        try
        {
            response = call.get();
        }
        catch (final RuntimeException ex)
        {
            metrics.recordFailure(rpc, startNs);
            LOG.error("{} failed unexpectedly", rpc, ex);
            observer.onError(Status.INTERNAL.withDescription(rpc + ": " + ex).asRuntimeException());
            return;
        }
        metrics.record(rpc, startNs, response);
        observer.onNext(response);
        observer.onCompleted();
    }

    @Override
    public void mountSegment(final MountSegmentRequest req, final StreamObserver<MountSegmentResponse> observer)
    {
        reply(observer, MasterRpc.MOUNT_SEGMENT, () -> handler.mountSegment(req));
    }

    @Override
    public void unmountSegment(final UnmountSegmentRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, MasterRpc.UNMOUNT_SEGMENT, () -> handler.unmountSegment(req));
    }

    @Override
    public void deregisterNode(final DeregisterNodeRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, MasterRpc.DEREGISTER_NODE, () -> handler.deregisterNode(req));
    }

    @Override
    public void reportLedger(final ReportLedgerRequest req, final StreamObserver<ReportLedgerResponse> observer)
    {
        reply(observer, MasterRpc.REPORT_LEDGER, () -> handler.reportLedger(req));
    }

    @Override
    public void heartbeat(final HeartbeatRequest req, final StreamObserver<HeartbeatResponse> observer)
    {
        reply(observer, MasterRpc.HEARTBEAT, () -> handler.heartbeat(req));
    }

    @Override
    public void putStart(final PutStartRequest req, final StreamObserver<PutStartResponse> observer)
    {
        reply(observer, MasterRpc.PUT_START, () -> handler.putStart(req));
    }

    @Override
    public void putEnd(final PutEndRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, MasterRpc.PUT_END, () -> handler.putEnd(req));
    }

    @Override
    public void putRevoke(final PutRevokeRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, MasterRpc.PUT_REVOKE, () -> handler.putRevoke(req));
    }

    @Override
    public void batchPutStart(final BatchPutStartRequest req, final StreamObserver<BatchPutStartResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_PUT_START, () -> handler.batchPutStart(req));
    }

    @Override
    public void batchPutEnd(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_PUT_END, () -> handler.batchPutEnd(req));
    }

    @Override
    public void batchPutRevoke(final BatchKeysRequest req, final StreamObserver<BatchCodeResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_PUT_REVOKE, () -> handler.batchPutRevoke(req));
    }

    @Override
    public void getReplicaList(final KeyRequest req, final StreamObserver<GetReplicaListResponse> observer)
    {
        reply(observer, MasterRpc.GET_REPLICA_LIST, () -> handler.getReplicaList(req));
    }

    @Override
    public void batchGetReplicaList(final BatchKeysRequest req, final StreamObserver<BatchGetReplicaListResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_GET_REPLICA_LIST, () -> handler.batchGetReplicaList(req));
    }

    @Override
    public void existKey(final KeyRequest req, final StreamObserver<ExistKeyResponse> observer)
    {
        reply(observer, MasterRpc.EXIST_KEY, () -> handler.existKey(req));
    }

    @Override
    public void batchExistKey(final BatchKeysRequest req, final StreamObserver<BatchExistKeyResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_EXIST_KEY, () -> handler.batchExistKey(req));
    }

    @Override
    public void batchProbeKey(final BatchProbeKeyRequest req, final StreamObserver<BatchProbeKeyResponse> observer)
    {
        reply(observer, MasterRpc.BATCH_PROBE_KEY, () -> handler.batchProbeKey(req));
    }

    @Override
    public void remove(final RemoveRequest req, final StreamObserver<CodeResponse> observer)
    {
        reply(observer, MasterRpc.REMOVE, () -> handler.remove(req));
    }

    @Override
    public void removeByRegex(final RemoveByRegexRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, MasterRpc.REMOVE_BY_REGEX, () -> handler.removeByRegex(req));
    }

    @Override
    public void removeAll(final RemoveAllRequest req, final StreamObserver<CountResponse> observer)
    {
        reply(observer, MasterRpc.REMOVE_ALL, () -> handler.removeAll(req));
    }

    @Override
    public void listKeys(final ListKeysRequest req, final StreamObserver<ListKeysResponse> observer)
    {
        reply(observer, MasterRpc.LIST_KEYS, () -> handler.listKeys(req));
    }

    @Override
    public void getServerInfo(final ServerInfoRequest req, final StreamObserver<ServerInfoResponse> observer)
    {
        reply(observer, MasterRpc.GET_SERVER_INFO, () -> handler.getServerInfo(req));
    }

    /**
     * A server stream of KV events. Refusals are gRPC statuses (there is no reply message to carry a code):
     * INVALID_ARGUMENT for a bad tenant or sequence, FAILED_PRECONDITION with {@code --events=false},
     * RESOURCE_EXHAUSTED when too many streams are open.
     */
    @Override
    public void subscribeEvents(final SubscribeEventsRequest req, final StreamObserver<EventBatch> observer)
    {
        if (events == null)
        {
            observer.onError(Status.FAILED_PRECONDITION
                .withDescription("this master publishes no events (started with --events=false)").asRuntimeException());
            return;
        }
        if (!req.getAllTenants() && MetadataStore.checkTenant(req.getTenant()) != ErrorCode.OK_VALUE)
        {
            observer.onError(Status.INVALID_ARGUMENT.withDescription("bad tenant: " +
                Limits.checkTenant(req.getTenant())).asRuntimeException());
            return;
        }
        events.subscribe(req, req.getAllTenants() ? null : Limits.tenantOrDefault(req.getTenant()),
            (ServerCallStreamObserver<EventBatch>)observer);
    }

    @Override
    public void getClusterStatus(final ClusterStatusRequest req, final StreamObserver<ClusterStatusResponse> observer)
    {
        reply(observer, MasterRpc.GET_CLUSTER_STATUS, () -> handler.getClusterStatus(req));
    }
}
