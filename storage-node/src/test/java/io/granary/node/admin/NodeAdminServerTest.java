package io.granary.node.admin;

import io.granary.node.Await;
import io.granary.node.StorageNode;
import io.granary.node.master.FakeMaster;
import io.granary.node.segment.Segment;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The storage node's admin port over real HTTP: health, readiness, segments, metrics after transfers. */
class NodeAdminServerTest
{
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final HttpClient http = HttpClient.newHttpClient();

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
    }

    private <T extends AutoCloseable> T track(final T resource)
    {
        resources.add(resource);
        return resource;
    }

    private HttpResponse<String> get(final StorageNode node, final String path) throws IOException, InterruptedException
    {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + node.adminPort() + path)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private StorageNode launch(final FakeMaster master, final int adminPort)
    {
        return track(StorageNode.launch(new StorageNode.Context()
            .masterAddress(master.address()).name("beta").segmentSizeBytes(1 << 20).segmentCount(2)
            .heartbeatIntervalMs(50).ioThreads(1).preTouch(false).adminPort(adminPort)));
    }

    @Test
    void shouldKeepTheAdminPortClosedUnlessAsked() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = track(StorageNode.launch(new StorageNode.Context()
            .masterAddress(master.address()).segmentSizeBytes(1 << 20).ioThreads(1).preTouch(false)));

        assertThat(node.adminPort()).isEqualTo(-1);
        assertThat(node.admin()).isNull();
        assertThat(node.scrapeMetrics()).contains("granary_node_segments 1.0");
    }

    @Test
    void shouldReportReadyOnceRegisteredAndServeSegments() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = launch(master, 0);
        Await.until("registered", () -> node.masterLink().isRegistered());

        final HttpResponse<String> health = get(node, "/health");
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(health.body()).startsWith("{\"status\":\"UP\",\"role\":\"node\",\"ready\":true,\"name\":\"beta\"")
            .contains("\"endpoint\":\"" + node.endpoint() + "\"").contains("\"segments\":2");
        assertThat(get(node, "/ready").statusCode()).isEqualTo(200);

        final HttpResponse<String> segments = get(node, "/segments");
        assertThat(segments.body()).contains("\"name\":\"beta/seg0\"").contains("\"name\":\"beta/seg1\"")
            .endsWith("\"capacity_bytes\":2097152}\n");
        // The default (auto) advises huge pages wherever the native library and the kernel allow it.
        final boolean advised = io.granary.node.segment.HugePages.unavailabilityCause() == null;
        assertThat(segments.body()).contains("\"huge_pages_advised\":" + advised).contains("\"huge_page_bytes\":");
        assertThat(node.scrapeMetrics()).contains("granary_node_segment_huge_page_bytes ");

        assertThat(get(node, "/segments?x=1").statusCode()).isEqualTo(400);
        assertThat(get(node, "/segments?x=1").body()).contains("unknown query parameter 'x'");
        assertThat(get(node, "/query?key=a").statusCode()).isEqualTo(404);
    }

    @Test
    void shouldNotBeReadyWhileTheMasterRefusesItsSegments() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        master.mountCode(io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE);
        final StorageNode node = launch(master, 0);
        Await.until("a refused mount", () -> !master.mounts.isEmpty());

        final HttpResponse<String> ready = get(node, "/ready");
        assertThat(ready.statusCode()).isEqualTo(503);
        assertThat(get(node, "/health").body()).contains("\"ready\":false");
    }

    @Test
    void shouldCountTransfersInItsMetrics() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = launch(master, 0);
        final Segment segment = node.segments().get(0);
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig()));
        final ByteBuffer data = ByteBuffer.allocateDirect(4096);
        final ByteBuffer back = ByteBuffer.allocateDirect(4096);
        for (int i = 0; i < 10; i++)
        {
            assertThat(engine.submit(TransferRequest.write(node.endpoint(), segment.id(), 8192L * i, data, 4096))
                .get(10, TimeUnit.SECONDS)).isZero();
            assertThat(engine.submit(TransferRequest.read(node.endpoint(), segment.id(), 8192L * i, back, 4096))
                .get(10, TimeUnit.SECONDS)).isZero();
        }
        assertThat(engine.submit(TransferRequest.read(node.endpoint(), 999, 0, back, 16)).get(10, TimeUnit.SECONDS))
            .as("an unknown segment").isNotZero();

        final String metrics = get(node, "/metrics").body();
        assertThat(value(metrics, "granary_node_transfer_seconds_count{op=\"write\"}")).isEqualTo(10);
        assertThat(value(metrics, "granary_node_transfer_seconds_count{op=\"read\"}")).isEqualTo(11);
        assertThat(value(metrics, "granary_node_transfer_requests_total")).isEqualTo(21);
        assertThat(value(metrics, "granary_node_transfer_rejected_total")).isEqualTo(1);
        assertThat(value(metrics, "granary_node_transfer_bytes_total{direction=\"in\"}"))
            .isGreaterThanOrEqualTo(10 * 4096 + 21 * 64);
        assertThat(value(metrics, "granary_node_transfer_bytes_total{direction=\"out\"}"))
            .isGreaterThanOrEqualTo(10 * 4096 + 21 * 64);
        assertThat(value(metrics, "granary_node_transfer_connections")).isGreaterThanOrEqualTo(1);
        assertThat(value(metrics, "granary_node_segment_capacity_bytes")).isEqualTo(2 << 20);
        assertThat(metrics).contains("granary_node_transfer_queued_bytes ").contains("jvm_memory_used_bytes");
    }

    /** The value of one sample line "name{labels} value" of a Prometheus text page. */
    static double value(final String page, final String series)
    {
        for (final String line : page.split("\n"))
        {
            if (line.startsWith(series + " "))
            {
                return Double.parseDouble(line.substring(series.length() + 1).trim().split(" ")[0]);
            }
        }
        throw new AssertionError("no sample " + series + " in:\n" + page);
    }
}
