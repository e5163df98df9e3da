package io.granary.it;

import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import io.granary.it.ProcessCluster.CliResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * How the {@code granary} processes start and stop, as an operator sees them: SIGTERM on a node and on the
 * master, a node started before its master, the client commands run as processes, and a bad flag.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LifecycleIT
{
    private static final long SEED = 0x4c6966656379636cL;
    private static final Duration STOP_TIMEOUT = Duration.ofSeconds(30);

    @Test
    void shouldExitZeroAndUnmountAtOnceWhenANodeIsSentSigterm(final TestInfo test)
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            // A node TTL far longer than the test: only the node's own unmount can explain a quick drop.
            cluster.startMaster("--node-ttl", "30s", "--heartbeat-interval", "500ms");
            final List<ServiceProcess> nodes = cluster.startNodes("node-0", "node-1");
            final GranaryClient client = cluster.newClient();
            final Page solo = new Page("solo", 100_000);
            final Page pair = new Page("pair", 300_001);
            client.put(solo.key(), ByteBuffer.wrap(Pages.content(solo, SEED)),
                PutOptions.builder().replicas(1).preferredSegment("node-1/seg0").build());
            client.put(pair.key(), ByteBuffer.wrap(Pages.content(pair, SEED)),
                PutOptions.builder().replicas(2).build());
            assertThat(client.listKeys("pair", 0)).extracting(KeyInfo::replicas).containsExactly(2);

            final int exitCode = nodes.get(1).terminate(STOP_TIMEOUT);
            final long exitedNs = System.nanoTime();
            assertThat(exitCode).as("exit code of node-1 after SIGTERM\n" + nodes.get(1).describe()).isZero();
            Await.until(Duration.ofSeconds(2),
                () -> segmentNames(client.clusterStatus()).equals(List.of("node-0/seg0")),
                () -> "the master to drop node-1's segment right after its SIGTERM (node TTL 30 s); status now " +
                    client.clusterStatus());
            final double dropSeconds = (System.nanoTime() - exitedNs) / 1e9;
            assertThat(client.clusterStatus().nodes()).as("a node that left cleanly is no longer listed")
                .extracting(ClusterStatus.Node::nodeName).containsExactly("node-0");
            assertThat(client.clusterStatus().objects()).as("objects once node-1 unmounted").isEqualTo(1);
            assertThatThrownBy(() -> client.get(solo.key()))
                .isInstanceOfSatisfying(GranaryException.class,
                    ex -> assertThat(ex.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND));
            assertThat(client.listKeys("pair", 0)).extracting(KeyInfo::replicas).containsExactly(1);
            assertThat(Pages.check(pair, SEED, ByteBuffer.wrap(client.get(pair.key())))).isNull();
            assertThat(nodes.get(0).isAlive()).isTrue();
            summary(test, startNs, String.format(Locale.ROOT,
                "node-1 exited 0 on SIGTERM, master showed its segment gone %.3f s after the exit (node TTL 30 s)",
                dropSeconds));
        }
    }

    @Test
    void shouldExitZeroWhenTheMasterIsSentSigtermAndLetItsNodeStopCleanlyAfterwards(final TestInfo test)
        throws IOException, InterruptedException
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            final ServiceProcess master = cluster.startMaster();
            final ServiceProcess node = cluster.startNode("node-0", "--segment-size", "64m");
            final HttpResponse<String> health = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://" + master.ready("admin") + "/health"))
                    .timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
            assertThat(health.statusCode()).as("/health: " + health.body()).isEqualTo(200);
            assertThat(health.body()).contains("\"status\":\"UP\"").contains("\"nodes\":1");

            assertThat(master.terminate(STOP_TIMEOUT)).as("exit code of the master after SIGTERM\n" +
                master.describe()).isZero();
            // The node outlives its master and says so, then still stops cleanly on its own SIGTERM.
            Await.until(Duration.ofSeconds(30), () -> node.stderr().contains("lost contact with master"),
                () -> "node-0 to log that it lost contact with the master\n" + node.describe());
            assertThat(node.isAlive()).as("node-0 after its master stopped").isTrue();
            assertThat(node.terminate(STOP_TIMEOUT)).as("exit code of node-0 after SIGTERM\n" + node.describe())
                .isZero();
            summary(test, startNs, "master exited 0 on SIGTERM; its node kept running, then exited 0 on SIGTERM");
        }
    }

    @Test
    void shouldRegisterANodeStartedBeforeItsMasterOnceTheMasterComesUp(final TestInfo test) throws IOException
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            final int masterPort = freePort();
            final ServiceProcess node = cluster.launchNode("127.0.0.1:" + masterPort, "node-early",
                "--segment-size", "64m");
            Await.until(Duration.ofSeconds(60), () -> node.stderr().contains("not reachable"),
                () -> "node-early to report that its master is not reachable\n" + node.describe());
            assertThat(node.stdout()).as("stdout of a node whose master is not up").doesNotContain("ready");
            assertThat(node.isAlive()).isTrue();

            cluster.startMaster("--port", Integer.toString(masterPort));
            node.awaitReady(ProcessCluster.NODE_READY, ProcessCluster.START_TIMEOUT);
            final GranaryClient client = cluster.newClient();
            final ClusterStatus status = client.clusterStatus();
            assertThat(status.nodes()).extracting(ClusterStatus.Node::nodeName).containsExactly("node-early");
            assertThat(status.nodes()).extracting(ClusterStatus.Node::nodeId).containsExactly(node.ready("nodeId"));
            final Page page = new Page("late-page", 1 << 20);
            client.put(page.key(), Pages.directContent(page, SEED), PutOptions.defaults());
            assertThat(Pages.check(page, SEED, ByteBuffer.wrap(client.get(page.key())))).isNull();
            summary(test, startNs, "node started before its master registered when the master came up");
        }
    }

    @Test
    void shouldServeTheClientCommandsRunAsProcesses(final TestInfo test)
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            cluster.startMaster();
            cluster.startNodes("node-0", "node-1");
            final String master = cluster.masterAddress();

            final CliResult put = cluster.cli("put", "greeting", "--value", "hello, granary", "--master", master);
            assertThat(put.exitCode()).as("put: " + put).isZero();
            assertThat(put.stdout()).as("put: " + put).isEqualTo("put \"greeting\": 14 bytes, 1 replica\n");

            final CliResult get = cluster.cli("get", "greeting", "--master", master);
            assertThat(get.exitCode()).as("get: " + get).isZero();
            assertThat(get.stdout()).as("get: " + get).isEqualTo("hello, granary\n");

            final CliResult ls = cluster.cli("ls", "--master", master);
            assertThat(ls.exitCode()).as("ls: " + ls).isZero();
            assertThat(ls.stdout().lines().filter(line -> line.startsWith("greeting ")).collect(Collectors.toList()))
                .as("ls: " + ls).singleElement().asString().contains("14").contains("COMPLETE");
            assertThat(ls.stdout()).as("ls: " + ls).endsWith("1 key\n");

            final CliResult stat = cluster.cli("stat", "--master", master);
            assertThat(stat.exitCode()).as("stat: " + stat).isZero();
            assertThat(stat.stdout()).as("stat: " + stat)
                .contains("nodes: 2").contains("segments: 2").contains("objects: 1")
                .contains("node-0/seg0").contains("node-1/seg0");

            final CliResult missing = cluster.cli("get", "missing", "--master", master);
            assertThat(missing.exitCode()).as("get missing: " + missing).isEqualTo(1);
            assertThat(missing.stderr()).as("get missing: " + missing).startsWith("error: OBJECT_NOT_FOUND");
            assertThat(missing.stdout()).as("get missing: " + missing).isEmpty();

            // What the command stored is what an embedded client reads.
            final GranaryClient client = cluster.newClient();
            assertThat(new String(client.get("greeting"), StandardCharsets.UTF_8)).isEqualTo("hello, granary");
            summary(test, startNs, "put, get, ls, stat and a failing get run as processes");
        }
    }

    @Test
    void shouldExitTwoNamingTheFlagWhenAMasterSettingIsBad(final TestInfo test)
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            final CliResult malformed = cluster.cli("master", "--lease-ttl", "5x");
            assertThat(malformed.exitCode()).as("master --lease-ttl 5x: " + malformed).isEqualTo(2);
            assertThat(malformed.stderr()).as("master --lease-ttl 5x: " + malformed)
                .startsWith("error: ").contains("--lease-ttl").contains("5x");
            assertThat(malformed.stdout()).as("master --lease-ttl 5x: " + malformed).doesNotContain("ready");

            final CliResult contradicting = cluster.cli("master", "--port", "0", "--admin-port", "-1",
                "--node-ttl", "2s", "--heartbeat-interval", "5s");
            assertThat(contradicting.exitCode()).as("heartbeat longer than the node TTL: " + contradicting)
                .isEqualTo(2);
            assertThat(contradicting.stderr()).as("heartbeat longer than the node TTL: " + contradicting)
                .startsWith("error: ").contains("--heartbeat-interval").contains("--node-ttl");
            assertThat(contradicting.stdout()).as("heartbeat longer than the node TTL: " + contradicting)
                .doesNotContain("ready");
            summary(test, startNs, "malformed and contradicting master flags exit 2");
        }
    }

    /** A port nothing listens on right now (the master binds it moments later). */
    private static int freePort() throws IOException
    {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            return socket.getLocalPort();
        }
    }

    private static List<String> segmentNames(final ClusterStatus status)
    {
        return status.segments().stream().map(ClusterStatus.Segment::name).sorted().collect(Collectors.toList());
    }

    private static void summary(final TestInfo test, final long startNs, final String what)
    {
        System.out.printf(Locale.ROOT, "LifecycleIT.%s: %s; %.1f s%n",
            test.getTestMethod().map(m -> m.getName()).orElse("?"), what, (System.nanoTime() - startNs) / 1e9);
    }
}
