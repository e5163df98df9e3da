package io.granary.master;

import io.granary.common.ManualClock;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.ClusterStatusRequest;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.DeregisterNodeRequest;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.KeyRequest;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.SegmentInfo;
import io.granary.proto.UnmountSegmentRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Collections;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MasterServerTest
{
    ManualClock clock;
    MasterServer master;
    ManagedChannel channel;
    MasterServiceGrpc.MasterServiceBlockingStub stub;

    @BeforeEach
    void start()
    {
        clock = new ManualClock();
        master = MasterServer.launch(new MasterServer.Context()
            .port(0).lookupPort(0).adminPort(0).clock(clock).housekeeping(false).metadataShards(64));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    MountSegmentResponse mount(final String nodeId, final String endpoint, final int segmentId, final long size)
    {
        return stub.mountSegment(MountSegmentRequest.newBuilder()
            .setNodeId(nodeId).setNodeName(nodeId).setEndpoint(endpoint)
            .setSegment(SegmentInfo.newBuilder().setSegmentId(segmentId).setName(nodeId + "/seg0").setSizeBytes(size))
            .build());
    }

    @Test
    void shouldServeAPutAndReadOverGrpc()
    {
        final MountSegmentResponse mounted = mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        assertThat(mounted.getCode()).isEqualTo(OK_VALUE);
        assertThat(mounted.getNodeTtlMs()).isEqualTo(10_000);

        final PutStartResponse started = stub.putStart(PutStartRequest.newBuilder()
            .setClientId("c").setKey("k").setValueLength(1000).build());
        assertThat(started.getCode()).isEqualTo(OK_VALUE);
        assertThat(started.getReplicas(0).getSegmentId()).isEqualTo(5);
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("k").build()).getCode())
            .isEqualTo(OK_VALUE);

        final GetReplicaListResponse got = stub.getReplicaList(KeyRequest.newBuilder().setKey("k").build());
        assertThat(got.getCode()).isEqualTo(OK_VALUE);
        assertThat(got.getValueLength()).isEqualTo(1000);
        assertThat(got.getLeaseTtlMs()).isEqualTo(10_000);
        assertThat(got.getReplicas(0).getEndpoint()).isEqualTo("127.0.0.1:7001");

        final BatchExistKeyResponse exists = stub.batchExistKey(BatchKeysRequest.newBuilder()
            .addKeys("k").addKeys("missing").addKeys("").build());
        assertThat(exists.getExistsList()).containsExactly(true, false, false);
        assertThat(exists.getCodesList()).containsExactly(OK_VALUE, OK_VALUE, INVALID_KEY_VALUE);

        final ClusterStatusResponse status = stub.getClusterStatus(ClusterStatusRequest.getDefaultInstance());
        assertThat(status.getObjects()).isEqualTo(1);
        assertThat(status.getNodesCount()).isEqualTo(1);
        assertThat(status.getCapacityBytes()).isEqualTo(1 << 20);
        assertThat(status.getAllocatedBytes()).isGreaterThanOrEqualTo(1000);
    }

    @Test
    void shouldAnswerBadEnvelopesWithInvalidParams()
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        assertThat(stub.existKey(KeyRequest.newBuilder().setTenant("bad tenant!").setKey("k").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.batchExistKey(BatchKeysRequest.newBuilder()
            .addAllKeys(Collections.nCopies(65_537, "k")).build()).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.batchPutStart(BatchPutStartRequest.newBuilder().setClientId("c")
            .addKeys("a").addKeys("b").addValueLengths(1).build()).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.batchPutStart(BatchPutStartRequest.newBuilder().setClientId("c")
            .addKeys("a").addKeys("b").addValueLengths(1).addValueLengths(1)
            .addPerKeyOptions(PutOptions.getDefaultInstance()).build()).getCode())
            .as("per-key options for some keys only").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.removeByRegex(RemoveByRegexRequest.newBuilder().setRegex("([").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.removeByRegex(RemoveByRegexRequest.newBuilder().setRegex("").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.listKeys(ListKeysRequest.newBuilder().setRegex("x".repeat(2000)).build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.putStart(PutStartRequest.newBuilder().setKey("k").setValueLength(1).build()).getCode())
            .as("a put without a client id").isEqualTo(INVALID_PARAMS_VALUE);

        assertThat(mount("", "127.0.0.1:7002", 1, 100).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(mount("n2", "no-port", 1, 100).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(mount("n2", "127.0.0.1:99999", 1, 100).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(mount("n2", "127.0.0.1:7002", 0, 100).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(mount("n2", "127.0.0.1:7002", 1, 0).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(mount("n1", "127.0.0.1:7001", 5, 2 << 20).getCode())
            .as("same segment id, different size").isEqualTo(SEGMENT_ALREADY_EXISTS_VALUE);

        // The server keeps serving valid requests.
        final ExistKeyResponse ok = stub.existKey(KeyRequest.newBuilder().setKey("k").build());
        assertThat(ok.getCode()).isEqualTo(OK_VALUE);
        assertThat(ok.getExists()).isFalse();
    }

    @Test
    void shouldRunBatchPutsWithPerKeyCodes()
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        final BatchPutStartResponse r = stub.batchPutStart(BatchPutStartRequest.newBuilder().setClientId("c")
            .addKeys("a").addValueLengths(10)
            .addKeys("").addValueLengths(10)
            .addKeys("huge").addValueLengths(2 << 20)
            .setOptions(PutOptions.newBuilder().setReplicas(1))
            .build());
        assertThat(r.getCode()).isEqualTo(OK_VALUE);
        assertThat(r.getResultsList()).extracting(PutStartResponse::getCode)
            .containsExactly(OK_VALUE, INVALID_KEY_VALUE, NO_AVAILABLE_HANDLE_VALUE);
        assertThat(stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c").addKeys("a").addKeys("zz").build())
            .getCodesList()).containsExactly(OK_VALUE, OBJECT_NOT_FOUND_VALUE);
        assertThat(stub.removeAll(RemoveAllRequest.getDefaultInstance()).getCount()).isEqualTo(1);
    }

    @Test
    void shouldApplyPerKeyOptionsOfABatchPutKeyByKey()
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        final BatchPutStartResponse r = stub.batchPutStart(BatchPutStartRequest.newBuilder().setClientId("c")
            .addKeys("b0").addValueLengths(10).addPerKeyOptions(PutOptions.newBuilder().setGroupId("g0"))
            .addKeys("b1").addValueLengths(10).addPerKeyOptions(PutOptions.newBuilder().setGroupId("g1")
                .setParentKey("b0"))
            .addKeys("b2").addValueLengths(10).addPerKeyOptions(PutOptions.newBuilder().setParentKey("bad\u0000"))
            .setOptions(PutOptions.newBuilder().setGroupId("ignored"))
            .build());
        assertThat(r.getResultsList()).extracting(PutStartResponse::getCode)
            .containsExactly(OK_VALUE, OK_VALUE, INVALID_PARAMS_VALUE);
        assertThat(stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c").addKeys("b0").addKeys("b1").build())
            .getCodesList()).containsExactly(OK_VALUE, OK_VALUE);
        assertThat(master.store().query("default", "b0").groupId()).isEqualTo("g0");
        assertThat(master.store().query("default", "b1").groupId()).isEqualTo("g1");
        assertThat(master.store().parentLinks()).isEqualTo(1);
    }

    @Test
    void shouldForgetNodesAfterTheNodeTtlAndAskThemToMountAgain()
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        assertThat(stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("n1").build()).getCode()).isEqualTo(OK_VALUE);
        clock.advance(Duration.ofSeconds(11));
        master.housekeep();
        assertThat(stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("n1").build()).getCode())
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(stub.unmountSegment(UnmountSegmentRequest.newBuilder().setNodeId("n1").setSegmentId(5).build())
            .getCode()).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(master.registry().nodeCount()).isZero();
    }

    @Test
    void shouldForgetANodeThatLeavesCleanly()
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        assertThat(stub.unmountSegment(UnmountSegmentRequest.newBuilder().setNodeId("n1").setSegmentId(5).build())
            .getCode()).isEqualTo(OK_VALUE);
        assertThat(master.registry().nodeCount()).as("unmounting keeps the node registered").isEqualTo(1);
        assertThat(stub.deregisterNode(DeregisterNodeRequest.newBuilder().setNodeId("n1").build()).getCode())
            .isEqualTo(OK_VALUE);
        assertThat(master.registry().nodeCount()).isZero();
        assertThat(stub.deregisterNode(DeregisterNodeRequest.newBuilder().setNodeId("n1").build()).getCode())
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
    }

    @Test
    void shouldHoldNoMoreObjectsThanItsBudgetAndSaySo() throws IOException, InterruptedException
    {
        final MasterServer small = MasterServer.launch(new MasterServer.Context()
            .port(0).lookupPort(-1).adminPort(0).clock(clock).housekeeping(false).metadataShards(16).maxObjects(3));
        final ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", small.grpcPort()).usePlaintext().build();
        try
        {
            final MasterServiceGrpc.MasterServiceBlockingStub s =
                MasterServiceGrpc.newBlockingStub(ch).withDeadlineAfter(10, TimeUnit.SECONDS);
            assertThat(s.mountSegment(MountSegmentRequest.newBuilder().setNodeId("n1").setNodeName("n1")
                .setEndpoint("127.0.0.1:7001").setSegment(SegmentInfo.newBuilder().setSegmentId(5).setName("n1/seg0")
                    .setSizeBytes(1 << 20)).build()).getCode()).isEqualTo(OK_VALUE);
            for (int i = 0; i < 3; i++)
            {
                assertThat(s.putStart(PutStartRequest.newBuilder().setClientId("c").setKey("k" + i).setValueLength(100)
                    .build()).getCode()).isEqualTo(OK_VALUE);
                assertThat(s.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("k" + i).build()).getCode())
                    .isEqualTo(OK_VALUE);
                // Read: leased, so the on-demand round may not take it.
                assertThat(s.getReplicaList(KeyRequest.newBuilder().setKey("k" + i).build()).getCode())
                    .isEqualTo(OK_VALUE);
            }

            assertThat(s.putStart(PutStartRequest.newBuilder().setClientId("c").setKey("k3").setValueLength(100)
                .build()).getCode()).as("a fourth object, the pool still roomy").isEqualTo(NO_AVAILABLE_HANDLE_VALUE);

            final ClusterStatusResponse cluster = s.getClusterStatus(ClusterStatusRequest.getDefaultInstance());
            assertThat(cluster.getObjects()).isEqualTo(3);
            assertThat(cluster.getMaxObjects()).isEqualTo(3);

            final HttpClient http = HttpClient.newHttpClient();
            final String status = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + small.adminPort() +
                "/status")).build(), HttpResponse.BodyHandlers.ofString()).body();
            assertThat(status).contains("\"objects\":3,\"max_objects\":3").contains("\"object_budget_refusals\":1");
            final String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + small.adminPort() +
                "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
            assertThat(metrics).contains("granary_master_objects_max 3.0")
                .contains("granary_master_put_object_budget_refusals_total 1.0");
        }
        finally
        {
            ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            small.close();
        }
    }

    @Test
    void shouldDeriveTheObjectBudgetFromTheHeapUnlessGivenOne()
    {
        // 70 % of 1 GiB at 512 bytes an object.
        assertThat(MasterServer.Context.objectsForHeap(1L << 30)).isEqualTo(1_468_006);
        assertThat(new MasterServer.Context().effectiveMaxObjects())
            .isEqualTo(MasterServer.Context.objectsForHeap(Runtime.getRuntime().maxMemory()));
        assertThat(new MasterServer.Context().maxObjects(1000).effectiveMaxObjects()).isEqualTo(1000);
        assertThat(master.store().settings().maxObjects).as("the running master's, from the heap")
            .isEqualTo(MasterServer.Context.objectsForHeap(Runtime.getRuntime().maxMemory()));
    }

    @Test
    void shouldServeHealthAndStatusOnTheAdminPort() throws IOException, InterruptedException
    {
        mount("n1", "127.0.0.1:7001", 5, 1 << 20);
        final HttpClient http = HttpClient.newHttpClient();
        final HttpResponse<String> health = http.send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + master.adminPort() + "/health")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(health.body()).contains("\"status\":\"UP\"").contains("\"role\":\"master\"").contains("\"nodes\":1");
        final HttpResponse<String> status = http.send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + master.adminPort() + "/status")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(status.body()).contains("\"name\":\"n1/seg0\"").contains("\"size_bytes\":1048576")
            .contains("\"eviction\":{\"rounds\":0").contains("\"allocation_failures\":0");
        final HttpResponse<String> missing = http.send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + master.adminPort() + "/nope")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(missing.statusCode()).isEqualTo(404);
    }

    @Test
    void shouldRefuseInconsistentConfiguration()
    {
        assertThatThrownBy(() -> new MasterServer.Context()
            .softPinDefaultTtl(Duration.ofHours(25)).conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--soft-pin-default-ttl");
        assertThatThrownBy(() -> new MasterServer.Context().metadataShards(1000).conclude())
            .hasMessageContaining("power of two");
        assertThatThrownBy(() -> new MasterServer.Context().maxObjects(-1).conclude())
            .hasMessageContaining("--max-objects must be 0 (from the heap) or positive, was -1");
        assertThatThrownBy(() -> new MasterServer.Context().evictionHighWatermark(1.5).conclude())
            .hasMessageContaining("--eviction-high-watermark");
        assertThatThrownBy(() -> new MasterServer.Context().leaseTtl(Duration.ZERO).conclude())
            .hasMessageContaining("--lease-ttl");
        assertThatThrownBy(() -> new MasterServer.Context()
            .putDiscardTimeout(Duration.ofMinutes(20)).putReleaseTimeout(Duration.ofMinutes(10)).conclude())
            .hasMessageContaining("--put-release-timeout");
        assertThatThrownBy(() -> new MasterServer.Context().heartbeatInterval(Duration.ofSeconds(20)).conclude())
            .hasMessageContaining("--heartbeat-interval");
    }
}
