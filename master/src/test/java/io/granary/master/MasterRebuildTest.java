package io.granary.master;

import io.granary.common.ManualClock;
import io.granary.proto.ClusterStatusRequest;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.LedgerEntry;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RebuildStatus;
import io.granary.proto.RemoveRequest;
import io.granary.proto.ReportLedgerRequest;
import io.granary.proto.ReportLedgerResponse;
import io.granary.proto.SegmentInfo;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;

/** ReportLedger, heartbeat frees and readiness over the master's real gRPC and admin ports. */
class MasterRebuildTest
{
    private static final long MIB = 1 << 20;
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    private void start(final int readyAfterNodes)
    {
        master = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(-1).adminPort(0)
            .clock(new ManualClock()).housekeeping(false).metadataShards(16).readyAfterNodes(readyAfterNodes));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    private void mount(final String node, final int segmentId)
    {
        assertThat(stub.mountSegment(MountSegmentRequest.newBuilder().setNodeId(node).setNodeName(node)
            .setEndpoint("127.0.0.1:" + (7000 + segmentId)).setLedgerFollows(true)
            .setSegment(SegmentInfo.newBuilder().setSegmentId(segmentId).setName(node + "/seg0").setSizeBytes(MIB))
            .build()).getCode()).isEqualTo(OK_VALUE);
    }

    private static LedgerEntry entry(final String key, final long offset, final long version)
    {
        return LedgerEntry.newBuilder().setTenant("default").setKey(key).setOffset(offset).setValueLength(100)
            .setVersion(version).build();
    }

    private ReportLedgerResponse report(
        final String node, final int segmentId, final String previous, final boolean last, final LedgerEntry... entries)
    {
        final ReportLedgerRequest.Builder b = ReportLedgerRequest.newBuilder().setNodeId(node)
            .setSegmentId(segmentId).setPreviousMasterId(previous).setLast(last);
        for (final LedgerEntry e : entries)
        {
            b.addEntries(e);
        }
        return stub.reportLedger(b.build());
    }

    private PutStartResponse putStart(final String key)
    {
        return stub.putStart(PutStartRequest.newBuilder().setClientId("c").setKey(key).setValueLength(100)
            .setOptions(PutOptions.getDefaultInstance()).build());
    }

    private int ready() throws IOException, InterruptedException
    {
        return HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + master.adminPort() + "/ready"))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    @Test
    void shouldRebuildFromChunkedReportsAndTakeNoNewExtentBeforeTheLastChunk() throws Exception
    {
        start(1);
        mount("n1", 5);
        assertThat(ready()).isEqualTo(503);
        assertThat(putStart("early").getCode()).as("no placeable segment yet").isEqualTo(NO_AVAILABLE_HANDLE_VALUE);

        final ReportLedgerResponse first = report("n1", 5, "old-master", false, entry("a", 0, 7), entry("b", 128, 8));
        final ReportLedgerResponse last = report("n1", 5, "old-master", true, entry("c", 64, 9), entry("d", 4096, 0));

        assertThat(first.getCode()).isEqualTo(OK_VALUE);
        assertThat(first.getMasterId()).isEqualTo(master.masterId());
        assertThat(first.getAdopted()).isEqualTo(2);
        assertThat(last.getRejectedOffsetsList()).as("c overlaps a, d has no version").containsExactly(64L, 4096L);
        assertThat(stub.existKey(KeyRequest.newBuilder().setKey("b").build()).getExists()).isTrue();
        assertThat(stub.existKey(KeyRequest.newBuilder().setKey("c").build()).getExists()).isFalse();
        assertThat(ready()).isEqualTo(200);
        final PutStartResponse put = putStart("later");
        assertThat(put.getCode()).isEqualTo(OK_VALUE);
        assertThat(put.getVersion()).as("newer than every reported version").isGreaterThan(9);
        final RebuildStatus status = stub.getClusterStatus(ClusterStatusRequest.getDefaultInstance()).getRebuild();
        assertThat(status.getMasterId()).isEqualTo(master.masterId());
        assertThat(status.getReady()).isTrue();
        assertThat(status.getLedgerReports()).isEqualTo(1);
        assertThat(status.getEntriesReported()).isEqualTo(4);
        assertThat(status.getObjectsRebuilt()).isEqualTo(2);
        assertThat(status.getRejectedOverlap()).isEqualTo(1);
        assertThat(status.getRejectedInvalid()).isEqualTo(1);
    }

    @Test
    void shouldTellANodeItExpiredToDiscardItsLedger()
    {
        start(0);
        mount("n1", 5);

        final ReportLedgerResponse response = report("n1", 5, master.masterId(), true, entry("a", 0, 7));

        assertThat(response.getDiscardAll()).isTrue();
        assertThat(stub.existKey(KeyRequest.newBuilder().setKey("a").build()).getExists()).isFalse();
        assertThat(putStart("k").getCode()).as("the segment takes puts after the last chunk").isEqualTo(OK_VALUE);
        assertThat(stub.getClusterStatus(ClusterStatusRequest.getDefaultInstance()).getRebuild()
            .getDiscardedReports()).isEqualTo(1);
    }

    @Test
    void shouldRefuseReportsForUnknownSegmentsAndOversizedChunks()
    {
        start(0);
        mount("n1", 5);

        assertThat(report("n1", 6, "", true).getCode()).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(report("ghost", 5, "", true).getCode()).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(report("", 5, "", true).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
    }

    @Test
    void shouldSendFreesInHeartbeatAnswers()
    {
        start(0);
        mount("n1", 5);
        report("n1", 5, "", true, entry("a", 0, 7));

        assertThat(stub.remove(RemoveRequest.newBuilder().setKey("a").build()).getCode()).isEqualTo(OK_VALUE);
        final HeartbeatResponse beat = stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("n1").build());
        final HeartbeatResponse next = stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("n1").build());

        assertThat(beat.getCode()).isEqualTo(OK_VALUE);
        assertThat(beat.getMasterId()).isEqualTo(master.masterId());
        assertThat(beat.getFreedList()).singleElement().satisfies(f ->
        {
            assertThat(f.getSegmentId()).isEqualTo(5);
            assertThat(f.getOffset()).isZero();
            assertThat(f.getVersion()).isEqualTo(7);
        });
        assertThat(beat.getMoreFreed()).isFalse();
        assertThat(next.getFreedList()).isEmpty();
        assertThat(stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("other").build()).getCode())
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
    }
}
