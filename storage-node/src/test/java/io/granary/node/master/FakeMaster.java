package io.granary.node.master;

import io.granary.proto.CodeResponse;
import io.granary.proto.ErrorCode;
import io.granary.proto.FreedExtent;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.ReportLedgerRequest;
import io.granary.proto.ReportLedgerResponse;
import io.granary.proto.UnmountSegmentRequest;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.netty.channel.ChannelOption;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A recording master on a real gRPC server: remembers mounted nodes, answers heartbeats of unknown
 * nodes with SEGMENT_NOT_FOUND (as the real master does after a restart or expiry), records ledger
 * reports, and hands out the frees, rejections and discards a test scripts.
 */
public final class FakeMaster extends MasterServiceGrpc.MasterServiceImplBase implements AutoCloseable
{
    public final List<MountSegmentRequest> mounts = new CopyOnWriteArrayList<>();
    public final List<UnmountSegmentRequest> unmounts = new CopyOnWriteArrayList<>();
    public final List<HeartbeatRequest> heartbeats = new CopyOnWriteArrayList<>();
    private final Set<String> knownNodes = ConcurrentHashMap.newKeySet();
    public final List<ReportLedgerRequest> reports = new CopyOnWriteArrayList<>();
    public final String masterId = UUID.randomUUID().toString();
    private final AtomicInteger mountCode = new AtomicInteger(ErrorCode.OK_VALUE);
    private final Queue<FreedExtent> freed = new ConcurrentLinkedQueue<>();
    private final Set<Long> rejectOffsets = ConcurrentHashMap.newKeySet();
    private volatile boolean discardAll;
    private volatile boolean silentUnmounts;
    private volatile int refusedReportSegment;
    private Server server;

    public static FakeMaster start(final int port) throws IOException
    {
        final FakeMaster master = new FakeMaster();
        master.server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
            .withOption(ChannelOption.SO_REUSEADDR, true) // restart on the same port while old sockets linger
            .addService(master)
            .build()
            .start();
        return master;
    }

    public String address()
    {
        return "127.0.0.1:" + server.getPort();
    }

    public int port()
    {
        return server.getPort();
    }

    /** From now on, takes UnmountSegment calls and never answers them. */
    public void silentUnmounts()
    {
        silentUnmounts = true;
    }

    /** Forgets every node, as a restarted master would. */
    public void forgetNodes()
    {
        knownNodes.clear();
    }

    public void mountCode(final int code)
    {
        mountCode.set(code);
    }

    /** Sends these frees with the next heartbeat answer. */
    public void free(final int segmentId, final long offset, final long version)
    {
        freed.add(FreedExtent.newBuilder().setSegmentId(segmentId).setOffset(offset).setVersion(version).build());
    }

    /** Ledger entries at this offset are answered as rejected. */
    public void rejectOffset(final long offset)
    {
        rejectOffsets.add(offset);
    }

    /** Ledger reports of this segment id are refused (INTERNAL_ERROR); 0 refuses none. */
    public void refuseReportsOf(final int segmentId)
    {
        refusedReportSegment = segmentId;
    }

    /** Every ledger report is answered with discard_all. */
    public void discardAll(final boolean discard)
    {
        discardAll = discard;
    }

    public boolean pendingFrees()
    {
        return !freed.isEmpty();
    }

    public long heartbeatsFrom(final String nodeId)
    {
        return heartbeats.stream().filter(h -> h.getNodeId().equals(nodeId)).count();
    }

    @Override
    public void mountSegment(final MountSegmentRequest request, final StreamObserver<MountSegmentResponse> response)
    {
        mounts.add(request);
        final int code = mountCode.get();
        if (code == ErrorCode.OK_VALUE)
        {
            knownNodes.add(request.getNodeId());
        }
        response.onNext(MountSegmentResponse.newBuilder().setCode(code).setNodeTtlMs(10_000).build());
        response.onCompleted();
    }

    @Override
    public void getServerInfo(final io.granary.proto.ServerInfoRequest request,
        final StreamObserver<io.granary.proto.ServerInfoResponse> response)
    {
        response.onNext(io.granary.proto.ServerInfoResponse.newBuilder().setMasterId(masterId).build());
        response.onCompleted();
    }

    @Override
    public void reportLedger(final ReportLedgerRequest request, final StreamObserver<ReportLedgerResponse> response)
    {
        reports.add(request);
        if (request.getSegmentId() == refusedReportSegment)
        {
            response.onNext(ReportLedgerResponse.newBuilder().setCode(ErrorCode.INTERNAL_ERROR_VALUE).build());
            response.onCompleted();
            return;
        }
        final ReportLedgerResponse.Builder b = ReportLedgerResponse.newBuilder()
            .setCode(ErrorCode.OK_VALUE)
            .setMasterId(masterId)
            .setDiscardAll(discardAll);
        request.getEntriesList().stream().filter(e -> rejectOffsets.contains(e.getOffset()))
            .forEach(e -> b.addRejectedOffsets(e.getOffset()));
        response.onNext(b.build());
        response.onCompleted();
    }

    @Override
    public void unmountSegment(final UnmountSegmentRequest request, final StreamObserver<CodeResponse> response)
    {
        unmounts.add(request);
        if (silentUnmounts)
        {
            return; // never answers, as a master that hangs
        }
        response.onNext(CodeResponse.newBuilder().setCode(ErrorCode.OK_VALUE).build());
        response.onCompleted();
    }

    @Override
    public void heartbeat(final HeartbeatRequest request, final StreamObserver<HeartbeatResponse> response)
    {
        heartbeats.add(request);
        final int code = knownNodes.contains(request.getNodeId()) ?
            ErrorCode.OK_VALUE : ErrorCode.SEGMENT_NOT_FOUND_VALUE;
        final HeartbeatResponse.Builder b = HeartbeatResponse.newBuilder().setCode(code).setMasterId(masterId);
        FreedExtent f;
        while (code == ErrorCode.OK_VALUE && (f = freed.poll()) != null)
        {
            b.addFreed(f);
        }
        response.onNext(b.build());
        response.onCompleted();
    }

    @Override
    public void close() throws InterruptedException
    {
        server.shutdownNow();
        server.awaitTermination(5, TimeUnit.SECONDS);
    }
}
