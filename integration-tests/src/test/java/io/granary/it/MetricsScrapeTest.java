package io.granary.it;

import io.granary.cli.LocalCluster;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.SoftPinAction;
import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

/**
 * A real master and two storage nodes with their admin ports open, a workload through a client that records its own
 * metrics, then {@code /metrics} scraped over HTTP: every metric the operability issue names is there with a value
 * that fits the workload.
 */
class MetricsScrapeTest
{
    private static final long SEGMENT_BYTES = 8L << 20;
    private static final int SMALL_VALUES = 20;
    private static final int SMALL_BYTES = 64 << 10;
    private static final int BIG_VALUES = 24;
    private static final int BIG_BYTES = 1 << 20;

    private static LocalCluster cluster;
    private static SimpleMeterRegistry clientMeters;
    private static Map<String, Double> master;
    private static List<Map<String, Double>> nodes;

    @BeforeAll
    static void runWorkloadAndScrape() throws IOException, InterruptedException
    {
        cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(SEGMENT_BYTES)
            .masterContext(new MasterServer.Context().port(0).lookupPort(0).adminPort(0).allowEvictSoftPinned(false))
            .nodeContext(ctx -> ctx.adminPort(0).preTouch(false))
            .start();
        clientMeters = new SimpleMeterRegistry();
        // Every byte over the nodes' sockets, whose byte counters are checked below (same-host copies bypass them).
        final GranaryClient client = cluster.newClient(cluster.clientConfig().meterRegistry(clientMeters)
            .localTransfers(false).build());

        final ByteBuffer small = ByteBuffer.allocateDirect(SMALL_BYTES);
        for (int i = 0; i < SMALL_VALUES; i++)
        {
            client.put("small/" + i, small.duplicate(), PutOptions.builder().replicas(2).build());
        }
        for (int i = 0; i < SMALL_VALUES; i++)
        {
            assertThat(client.get("small/" + i)).hasSize(SMALL_BYTES);
        }
        assertThat(client.getBatch(List.of("small/0", "small/1", "missing/0")))
            .extracting(r -> r.ok()).containsExactly(true, true, false);
        assertThatThrownBy(() -> client.get("missing/1")).isInstanceOf(GranaryException.class);
        assertThat(client.existsBatch(List.of("small/2", "missing/2"))).extracting(OpResult::value)
            .containsExactly(true, false);
        assertThat(client.probeBatch(List.of("small/0", "small/1", "small/2", "small/3"), LeasePolicy.lastHitOnly(2)))
            .extracting(OpResult::value).containsExactly(false, false, true, true);
        assertThat(client.probeBatch(List.of("small/0", "missing/3"), LeasePolicy.longestPrefix(1)))
            .extracting(OpResult::value).containsExactly(true, false);
        client.put("pinned", small.duplicate(), PutOptions.builder()
            .softPin(SoftPinAction.ENABLE, Duration.ofMinutes(5)).build());
        client.put("three-replicas", small.duplicate(), PutOptions.builder().replicas(3).build());
        client.remove("small/19", true);

        // Fill past the pool so that puts evict (the small values are leased by the reads and stay).
        final ByteBuffer big = ByteBuffer.allocateDirect(BIG_BYTES);
        for (int i = 0; i < BIG_VALUES; i++)
        {
            client.put("big/" + i, big.duplicate(), PutOptions.defaults());
        }
        // Larger than any segment: refused even after eviction.
        assertThatThrownBy(() -> client.put("huge", ByteBuffer.allocate((int)SEGMENT_BYTES + 4096),
            PutOptions.defaults())).isInstanceOfSatisfying(GranaryException.class,
            e -> assertThat(e.code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE));

        master = scrape(cluster.master().adminPort());
        nodes = new ArrayList<>();
        for (final StorageNode node : cluster.nodes())
        {
            nodes.add(scrape(node.adminPort()));
        }
    }

    @AfterAll
    static void stop()
    {
        cluster.close();
    }

    /** GET /metrics and its samples, keyed "name{labels}" as printed. */
    static Map<String, Double> scrape(final int port) throws IOException, InterruptedException
    {
        final HttpResponse<String> response = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + port + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
            type -> assertThat(type).startsWith("text/plain; version=0.0.4"));
        final Map<String, Double> samples = new LinkedHashMap<>();
        for (final String line : response.body().split("\n"))
        {
            if (line.isBlank() || line.startsWith("#"))
            {
                continue;
            }
            final int space = line.lastIndexOf(' ');
            samples.put(line.substring(0, space), Double.parseDouble(line.substring(space + 1)));
        }
        return samples;
    }

    private static double sample(final Map<String, Double> samples, final String series)
    {
        final Double value = samples.get(series);
        assertThat(value).as("sample " + series + " in " + samples.keySet()).isNotNull();
        return value;
    }

    /** The sum of every sample of {@code name} whose labels contain all of {@code labels}. */
    private static double sum(final Map<String, Double> samples, final String name, final String... labels)
    {
        double total = 0;
        int seen = 0;
        for (final Map.Entry<String, Double> e : samples.entrySet())
        {
            final String series = e.getKey();
            if (!series.equals(name) && !series.startsWith(name + "{"))
            {
                continue;
            }
            boolean all = true;
            for (final String label : labels)
            {
                all &= series.contains(label);
            }
            if (all)
            {
                total += e.getValue();
                seen++;
            }
        }
        assertThat(seen).as("samples of " + name + " with " + String.join(",", labels)).isPositive();
        return total;
    }

    @Test
    void shouldReportKeysNodesAndCapacityPerSegmentAndInTotal()
    {
        final MasterServer m = cluster.master();
        assertThat(sample(master, "granary_master_objects")).isEqualTo(m.store().objectCount()).isPositive();
        assertThat(sample(master, "granary_master_soft_pinned_objects")).isEqualTo(1);
        assertThat(sample(master, "granary_master_nodes")).isEqualTo(2);
        assertThat(sample(master, "granary_master_segments")).isEqualTo(2);
        assertThat(sample(master, "granary_master_capacity_bytes")).isEqualTo(2 * SEGMENT_BYTES);
        assertThat(sum(master, "granary_master_segment_capacity_bytes")).isEqualTo(2 * SEGMENT_BYTES);
        final double allocated = sample(master, "granary_master_allocated_bytes");
        assertThat(allocated).isGreaterThanOrEqualTo(SMALL_VALUES * SMALL_BYTES).isLessThanOrEqualTo(2 * SEGMENT_BYTES);
        assertThat(sum(master, "granary_master_segment_allocated_bytes")).isEqualTo(allocated);
        for (final StorageNode node : cluster.nodes())
        {
            assertThat(sample(master, "granary_master_segment_capacity_bytes{node=\"" + node.name() +
                "\",segment=\"" + node.name() + "/seg0\"}")).isEqualTo(SEGMENT_BYTES);
        }
        assertThat(sample(master, "granary_master_nodes_joined_total")).isEqualTo(2);
        assertThat(sample(master, "granary_master_nodes_expired_total")).isZero();
    }

    @Test
    void shouldReportEvictionsAllocationFailuresAndPuts()
    {
        assertThat(sum(master, "granary_master_evicted_objects_total")).isPositive();
        assertThat(sum(master, "granary_master_evicted_bytes_total")).isGreaterThanOrEqualTo(BIG_BYTES);
        assertThat(sample(master, "granary_master_evicted_objects_total{pass=\"1\"}")).isPositive();
        assertThat(sample(master, "granary_master_evicted_objects_total{pass=\"2\"}"))
            .as("soft-pinned values are not evicted here").isZero();
        assertThat(sample(master, "granary_master_eviction_rounds_total")).isPositive();
        assertThat(sample(master, "granary_master_put_allocation_failures_total")).isEqualTo(1);
        assertThat(sample(master, "granary_master_put_partial_allocations_total")).as("3 replicas on 2 segments")
            .isEqualTo(1);
        final int puts = SMALL_VALUES + 2 + BIG_VALUES;
        assertThat(sample(master, "granary_master_puts_started_total")).as("the huge one too").isEqualTo(puts + 1);
        assertThat(sample(master, "granary_master_puts_completed_total")).isEqualTo(puts);
        assertThat(sample(master, "granary_master_puts_revoked_total")).isZero();
        assertThat(sample(master, "granary_master_puts_discarded_total")).isZero();
        assertThat(sample(master, "granary_master_puts_released_total")).isZero();
        assertThat(sample(master, "granary_master_objects_removed_total")).isEqualTo(1);
    }

    @Test
    void shouldReportLeasesProbesAndPerCallLatencyAndFailures()
    {
        assertThat(sample(master, "granary_master_lease_grants_total"))
            .as("gets, batch gets, exists and probe hits").isGreaterThanOrEqualTo(SMALL_VALUES + 2 + 1 + 2 + 1);
        assertThat(sample(master, "granary_master_probes_total{policy=\"last_hit_only\"}")).isEqualTo(1);
        assertThat(sample(master, "granary_master_probe_selections_total{policy=\"last_hit_only\"}")).isEqualTo(1);
        assertThat(sample(master, "granary_master_probe_selected_keys_total{policy=\"last_hit_only\"}")).isEqualTo(2);
        assertThat(sample(master, "granary_master_probes_total{policy=\"longest_prefix\"}")).isEqualTo(1);
        assertThat(sample(master, "granary_master_probe_selected_keys_total{policy=\"longest_prefix\"}"))
            .isEqualTo(1);

        // Calls go over the lookup port or gRPC; count both.
        final double putStarts = sum(master, "granary_master_rpc_seconds_count", "method=\"PutStart\"");
        assertThat(putStarts).isEqualTo(SMALL_VALUES + 2 + BIG_VALUES + 1);
        assertThat(sum(master, "granary_master_rpc_failures_total", "method=\"PutStart\"")).as("the huge put")
            .isEqualTo(1);
        assertThat(sum(master, "granary_master_rpc_seconds_count", "method=\"GetReplicaList\""))
            .isEqualTo(SMALL_VALUES + 1);
        assertThat(sum(master, "granary_master_rpc_failures_total", "method=\"GetReplicaList\"")).as("the miss")
            .isEqualTo(1);
        assertThat(sum(master, "granary_master_rpc_seconds_count", "method=\"BatchProbeKey\"")).isEqualTo(2);
        assertThat(sum(master, "granary_master_rpc_seconds_bucket", "method=\"PutStart\"", "le=\"+Inf\""))
            .isEqualTo(putStarts);
        assertThat(sum(master, "granary_master_rpc_seconds_sum", "method=\"PutStart\"")).isPositive()
            .isLessThan(putStarts * 5.0);
        assertThat(sum(master, "granary_master_rpc_seconds_count", "method=\"MountSegment\"", "transport=\"grpc\""))
            .as("nodes mount over gRPC").isGreaterThanOrEqualTo(2);
        assertThat(sample(master, "jvm_threads_live_threads")).isPositive();
    }

    @Test
    void shouldReportNodeBytesRequestsQueueAndTransferLatency()
    {
        double bytesIn = 0;
        double bytesOut = 0;
        double writes = 0;
        for (final Map<String, Double> node : nodes)
        {
            bytesIn += sample(node, "granary_node_transfer_bytes_total{direction=\"in\"}");
            bytesOut += sample(node, "granary_node_transfer_bytes_total{direction=\"out\"}");
            writes += sample(node, "granary_node_transfer_seconds_count{op=\"write\"}");
            assertThat(sample(node, "granary_node_transfer_requests_total")).isPositive();
            assertThat(sample(node, "granary_node_transfer_rejected_total")).isZero();
            assertThat(sample(node, "granary_node_transfer_protocol_errors_total")).isZero();
            assertThat(sample(node, "granary_node_transfer_queued_bytes")).isGreaterThanOrEqualTo(0);
            assertThat(sample(node, "granary_node_transfer_backpressure_pauses_total")).isGreaterThanOrEqualTo(0);
            assertThat(sample(node, "granary_node_transfer_connections")).isPositive();
            assertThat(sample(node, "granary_node_registered")).isEqualTo(1);
            assertThat(sample(node, "granary_node_segment_capacity_bytes")).isEqualTo(SEGMENT_BYTES);
            assertThat(sample(node, "granary_node_master_heartbeats_total")).isGreaterThanOrEqualTo(0);
            assertThat(sum(node, "granary_node_transfer_seconds_bucket", "op=\"read\"", "le=\"+Inf\""))
                .isEqualTo(sample(node, "granary_node_transfer_seconds_count{op=\"read\"}"));
        }
        final long stored = (2L * SMALL_VALUES + 1 + 2) * SMALL_BYTES + (long)BIG_VALUES * BIG_BYTES;
        assertThat(bytesIn).as("every replica written, plus headers").isGreaterThanOrEqualTo(stored);
        assertThat(bytesOut).as("every value read, plus headers")
            .isGreaterThanOrEqualTo((SMALL_VALUES + 2) * SMALL_BYTES);
        assertThat(writes).isGreaterThanOrEqualTo(2 * SMALL_VALUES + 1 + 2 + BIG_VALUES);
    }

    @Test
    void shouldRecordClientLatencyBytesMissesAndFailedKeys()
    {
        assertThat(clientMeters.get("granary.client.op").tag("op", "put").timer().count())
            .isEqualTo(SMALL_VALUES + 2 + BIG_VALUES + 1);
        assertThat(clientMeters.get("granary.client.op").tag("op", "get").timer().count()).isEqualTo(SMALL_VALUES + 1);
        assertThat(clientMeters.get("granary.client.bytes").tag("direction", "written").counter().count())
            .isEqualTo((SMALL_VALUES + 2.0) * SMALL_BYTES + (double)BIG_VALUES * BIG_BYTES);
        assertThat(clientMeters.get("granary.client.bytes").tag("direction", "read").counter().count())
            .isEqualTo((SMALL_VALUES + 2.0) * SMALL_BYTES, within(0.5));
        assertThat(clientMeters.get("granary.client.misses").tag("op", "get").counter().count()).isEqualTo(1);
        assertThat(clientMeters.get("granary.client.misses").tag("op", "getBatch").counter().count()).isEqualTo(1);
        assertThat(clientMeters.get("granary.client.failed.keys").tag("op", "put").counter().count()).isEqualTo(1);
        assertThat(clientMeters.get("granary.client.failed.keys").tag("op", "get").counter().count()).isZero();
        assertThat(clientMeters.get("granary.client.transfer.admission.rejected").tag("reason", "queue_full")
            .functionCounter().count()).isZero();
        // Synchronous calls move their own bytes (callerDriven, the default); the event loops admit the rest.
        final double driven = clientMeters.get("granary.client.transfer.caller.driven").functionCounter().count();
        assertThat(driven).isGreaterThanOrEqualTo(2 * SMALL_VALUES);
        assertThat(driven + clientMeters.get("granary.client.transfer.admitted").functionCounter().count())
            .isGreaterThanOrEqualTo(2 * SMALL_VALUES);
    }
}
