package io.granary.master.admin;

import io.granary.common.ManualClock;
import io.granary.master.MasterServer;
import io.granary.proto.KeyRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.SegmentInfo;
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
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** Every admin endpoint of the master over real HTTP, good and bad parameters alike. */
class AdminEndpointsTest
{
    private ManualClock clock;
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeEach
    void start()
    {
        clock = new ManualClock();
        master = MasterServer.launch(new MasterServer.Context()
            .port(0).lookupPort(-1).adminPort(0).clock(clock).housekeeping(false).metadataShards(16)
            .listKeysLimit(50));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
        assertThat(stub.mountSegment(MountSegmentRequest.newBuilder()
            .setNodeId("n1").setNodeName("node-a").setEndpoint("127.0.0.1:7001")
            .setSegment(SegmentInfo.newBuilder().setSegmentId(3).setName("node-a/seg0").setSizeBytes(1 << 20))
            .build()).getCode()).isEqualTo(OK_VALUE);
        for (int i = 0; i < 5; i++)
        {
            put("default", "page/" + i, 1000 + i, null);
        }
        put("team-b", "page/0", 64, "g1");
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    private void put(final String tenant, final String key, final long size, final String group)
    {
        final PutOptions.Builder options = PutOptions.newBuilder().setReplicas(1);
        if (group != null)
        {
            options.setGroupId(group);
        }
        assertThat(stub.putStart(PutStartRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key)
            .setValueLength(size).setOptions(options).build()).getCode()).isEqualTo(OK_VALUE);
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key).build())
            .getCode()).isEqualTo(OK_VALUE);
    }

    private HttpResponse<String> get(final String pathAndQuery) throws IOException, InterruptedException
    {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + master.adminPort() + pathAndQuery))
            .build(), HttpResponse.BodyHandlers.ofString());
    }

    private void assertBadRequest(final String pathAndQuery, final int status, final String message)
        throws IOException, InterruptedException
    {
        final HttpResponse<String> response = get(pathAndQuery);
        assertThat(response.statusCode()).as(pathAndQuery + " -> " + response.body()).isEqualTo(status);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
            type -> assertThat(type).startsWith("application/json"));
        assertThat(response.body()).as(pathAndQuery).startsWith("{\"error\":\"").contains(message);
    }

    @Test
    void shouldAnswerHealthAndReadinessAsJsonAndText() throws IOException, InterruptedException
    {
        final HttpResponse<String> health = get("/health");
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(health.body()).isEqualTo(
            "{\"status\":\"UP\",\"role\":\"master\",\"ready\":true,\"nodes\":1,\"objects\":6}\n");
        final HttpResponse<String> ready = get("/ready");
        assertThat(ready.statusCode()).isEqualTo(200);
        assertThat(ready.body()).isEqualTo("ready\n");
        final HttpResponse<String> head = http.send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + master.adminPort() + "/ready")).method("HEAD",
            HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(head.statusCode()).isEqualTo(200);
        assertThat(head.body()).isEmpty();
    }

    @Test
    void shouldSummariseTheClusterWithItsCounters() throws IOException, InterruptedException
    {
        final HttpResponse<String> status = get("/status");

        assertThat(status.statusCode()).isEqualTo(200);
        assertThat(status.body())
            .contains("\"objects\":6")
            .contains("\"capacity_bytes\":1048576")
            .contains("\"puts\":{\"started\":6,\"ended\":6,\"revoked\":0")
            .contains("\"eviction\":{\"rounds\":0")
            .contains("\"nodes\":[{\"node_id\":\"n1\",\"name\":\"node-a\",\"endpoint\":\"127.0.0.1:7001\"")
            .contains("\"segments\":[{\"name\":\"node-a/seg0\",\"node\":\"node-a\"");
    }

    @Test
    void shouldListSegmentsWithTheirUse() throws IOException, InterruptedException
    {
        final HttpResponse<String> segments = get("/segments");

        assertThat(segments.statusCode()).isEqualTo(200);
        assertThat(segments.body()).startsWith("{\"count\":1,\"capacity_bytes\":1048576,\"allocated_bytes\":")
            .contains("\"name\":\"node-a/seg0\"").contains("\"allocations\":6").contains("\"size_bytes\":1048576");
        assertBadRequest("/segments?verbose=1", 400, "unknown query parameter 'verbose'");
    }

    @Test
    void shouldDescribeAKeyWithoutGrantingALease() throws IOException, InterruptedException
    {
        final HttpResponse<String> query = get("/query?key=page/2");

        assertThat(query.statusCode()).isEqualTo(200);
        assertThat(query.body())
            .contains("\"tenant\":\"default\",\"key\":\"page/2\",\"size_bytes\":1002,\"status\":\"COMPLETE\"")
            .contains("\"lease_remaining_ms\":0")
            .contains("\"replicas\":[{\"segment\":\"node-a/seg0\",\"node\":\"node-a\",\"endpoint\":\"127.0.0.1:7001\"")
            .contains("\"length_bytes\":1002,\"alive\":true}");
        // Unleased: an unforced remove succeeds right after the query.
        assertThat(stub.remove(RemoveRequest.newBuilder().setKey("page/2").build()).getCode()).isEqualTo(OK_VALUE);

        // A lease granted by the data path shows, and the query leaves it as it is.
        assertThat(stub.existKey(KeyRequest.newBuilder().setKey("page/3").build()).getExists()).isTrue();
        clock.advance(Duration.ofSeconds(4));
        assertThat(get("/query?key=page%2F3").body()).contains("\"lease_remaining_ms\":6000");
        clock.advance(Duration.ofSeconds(7));
        assertThat(get("/query?key=page/3").body()).contains("\"lease_remaining_ms\":0");

        assertThat(get("/query?key=page/0&tenant=team-b").body()).contains("\"size_bytes\":64")
            .contains("\"group\":\"g1\"");
    }

    @Test
    void shouldRefuseBadQueryParameters() throws IOException, InterruptedException
    {
        assertBadRequest("/query", 400, "missing query parameter 'key'");
        assertBadRequest("/query?key=", 400, "missing query parameter 'key'");
        assertBadRequest("/query?key=a&key=b", 400, "given more than once");
        assertBadRequest("/query?key=a&lease=1", 400, "unknown query parameter 'lease'");
        assertBadRequest("/query?key=a&tenant=bad%20tenant", 400, "bad tenant 'bad tenant'");
        assertBadRequest("/query?key=%00x", 400, "invalid key");
        // HTTP clients refuse to send a malformed escape; the server's own view of the request still answers it.
        final io.granary.common.http.AdminHttp.Response malformed = master.admin().answer("/query", "key=%zz");
        assertThat(malformed.status()).isEqualTo(400);
        assertThat(malformed.body()).contains("malformed query string");
        assertBadRequest("/query?key=page/9", 404, "no object 'page/9' in tenant 'default'");
        assertBadRequest("/query?key=page/1&tenant=team-b", 404, "no object 'page/1' in tenant 'team-b'");
    }

    @Test
    void shouldListKeysBoundedByTheLimit() throws IOException, InterruptedException
    {
        final HttpResponse<String> all = get("/keys");
        assertThat(all.statusCode()).isEqualTo(200);
        assertThat(all.body()).contains("\"tenant\":\"default\",\"regex\":\"\",\"limit\":50,\"count\":5," +
            "\"truncated\":false");

        final HttpResponse<String> two = get("/keys?regex=page/%5B1-4%5D&limit=2");
        assertThat(two.body()).contains("\"limit\":2,\"count\":2,\"truncated\":true")
            .contains("{\"key\":\"page/1\",\"size_bytes\":1001,\"status\":\"COMPLETE\",\"replicas\":1")
            .contains("\"key\":\"page/2\"").doesNotContain("\"key\":\"page/3\"");

        assertThat(get("/keys?tenant=team-b").body()).contains("\"count\":1").contains("\"group\":\"g1\"");
        assertThat(get("/keys?regex=nothing.*").body()).contains("\"count\":0,\"truncated\":false,\"keys\":[]");
    }

    @Test
    void shouldRefuseBadListingParameters() throws IOException, InterruptedException
    {
        assertBadRequest("/keys?limit=abc", 400, "'limit' must be an integer");
        assertBadRequest("/keys?limit=0", 400, "'limit' must be in 1..50");
        assertBadRequest("/keys?limit=51", 400, "'limit' must be in 1..50");
        assertBadRequest("/keys?regex=(", 400, "bad regex '('");
        assertBadRequest("/keys?regex=" + "a".repeat(1025), 400, "bad regex");
        assertBadRequest("/keys?tenant=-x", 400, "bad tenant");
        assertBadRequest("/keys?sort=size", 400, "unknown query parameter 'sort'");
    }

    @Test
    void shouldServePrometheusMetrics() throws IOException, InterruptedException
    {
        // one put started and never finished
        assertThat(stub.putStart(PutStartRequest.newBuilder().setTenant("team-a").setClientId("c").setKey("unfinished")
            .setValueLength(64).setOptions(PutOptions.newBuilder().setReplicas(1)).build()).getCode())
            .isEqualTo(OK_VALUE);
        final HttpResponse<String> metrics = get("/metrics");

        assertThat(metrics.statusCode()).isEqualTo(200);
        assertThat(metrics.headers().firstValue("Content-Type")).hasValue("text/plain; version=0.0.4; charset=utf-8");
        assertThat(metrics.body())
            .contains("granary_master_objects 7.0")
            .contains("granary_master_puts_processing 1.0")
            .contains("granary_master_puts_started_total 7.0")
            .contains("granary_master_segment_capacity_bytes{node=\"node-a\",segment=\"node-a/seg0\"} 1048576.0")
            .contains("granary_master_rpc_seconds_count{method=\"PutStart\",transport=\"grpc\"} 7");
        assertBadRequest("/metrics?x=1", 400, "unknown query parameter 'x'");
    }

    @Test
    void shouldAnswerUnknownPathsAndMethodsWithJsonErrors() throws IOException, InterruptedException
    {
        final HttpResponse<String> missing = get("/nope");
        assertThat(missing.statusCode()).isEqualTo(404);
        assertThat(missing.body()).contains("\"error\":\"not found: /nope\"").contains("/query").contains("/metrics");

        final HttpResponse<String> post = http.send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + master.adminPort() + "/keys")).POST(HttpRequest.BodyPublishers.ofString(
            "x")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(post.statusCode()).isEqualTo(405);
        assertThat(post.body()).contains("only GET and HEAD");

        // Still serving after every refusal.
        assertThat(get("/health").statusCode()).isEqualTo(200);
    }
}
