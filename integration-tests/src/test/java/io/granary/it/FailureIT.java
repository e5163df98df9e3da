package io.granary.it;

import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.PutOptions;
import io.granary.client.SoftPinAction;
import io.granary.it.Pages.Page;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.Replica;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.TOKEN_EXPIRED_VALUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Failures of real processes, one kind per test: a storage node killed during a workload, a storage node
 * stalled (SIGSTOP) shorter and longer than the node TTL, a client killed in the middle of a put, and the master
 * killed and restarted (rebuilt from the nodes' ledgers). Every value read is checked byte for byte.
 */
class FailureIT
{
    private static final long SEED = 0x6661696c75726573L;
    private static final Duration RECOVERY = Duration.ofSeconds(45);
    private static final PutOptions TWO = PutOptions.builder().replicas(2).build();

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void shouldReadOnlyRightBytesAndRetryPutsElsewhereWhenANodeIsKilledDuringAWorkload(final TestInfo test)
        throws Exception
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            // Forced removes keep a leased object's extents until its lease ends (its readers' tokens last that
            // long), and the workload leases every object it puts: a short lease and room for a few seconds of
            // churn keep its removes from filling the two nodes left. A caller-driven client put ~590 values of
            // 4 KiB to 1 MiB (mean 184 KiB) a second here, two replicas each: ~106 MiB a second on each node left,
            // whose allocated bytes then swung between 110 and 180 MiB (the housekeeper frees due extents every
            // 750 ms). 256 MiB segments filled up on some runs; 512 MiB leave about four seconds of churn.
            final ServiceProcess master = cluster.startMaster("--node-ttl", "3s", "--heartbeat-interval", "500ms",
                "--lease-ttl", "1s");
            final List<ServiceProcess> nodes = cluster.startNodesOnFixedPorts(
                List.of("node-0", "node-1", "node-2"), "--segment-size", "512m", "--pre-touch", "false");
            final GranaryClient client = cluster.newClient(b -> b.rpcTimeout(Duration.ofSeconds(3))
                .transferTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofSeconds(1)));
            final Workload.Generations generations = new Workload.Generations();
            nodes.forEach(n -> generations.of(n.ready("endpoint")));
            final Workload workload = new Workload(client, cluster.masterAddress(), "k", 3, 40, TWO, generations,
                60_000);
            workload.start();
            workload.awaitOps(60, RECOVERY);

            final ServiceProcess victim = nodes.get(1);
            victim.kill9();
            generations.bump(victim.ready("endpoint"));
            final long killedNs = System.nanoTime();
            Await.until(RECOVERY, () -> !nodeNames(client.clusterStatus()).contains("node-1"),
                () -> "the master to drop node-1 (node TTL 3 s)\n" + master.describe());
            final double dropSeconds = secondsSince(killedNs);
            workload.awaitOps(60, RECOVERY);

            final ServiceProcess reborn = cluster.relaunchNode("node-1")
                .awaitReady(ProcessCluster.NODE_READY, ProcessCluster.START_TIMEOUT);
            assertThat(reborn.stderr()).as("a restarted node has an empty ledger\n" + reborn.describe())
                .contains(", 0 ledger entries reported");
            Await.until(RECOVERY, () -> nodeNames(client.clusterStatus()).contains("node-1"),
                () -> "node-1 listed again");
            workload.awaitOps(60, RECOVERY);
            workload.stop();

            final Workload.Verification verification = workload.verifyBook(Duration.ofSeconds(30));
            final String status = admin(master, "/status");
            final String revoked = jsonNumber(status, "revoked");
            // The replicas of revoked puts whose writes went through (on the nodes left) are freed at once, not held
            // for the 30 s discard timeout: without that, the two nodes left fill up within seconds here.
            final String releasedAtOnce = jsonNumber(status, "revoked_extents_released");
            assertThat(workload.wrongReads.get()).as("wrong reads " + workload.problems()).isZero();
            assertThat(workload.hangs.get()).as("hangs " + workload.problems()).isZero();
            assertThat(verification.wrong()).as(verification.problems().toString()).isZero();
            assertThat(verification.lost()).as(verification.problems().toString()).isZero();
            assertThat(workload.putsFailed.get()).as("puts that failed although two nodes were up: " +
                workload.summary() + " " + workload.problems()).isZero();
            assertThat(Long.parseLong(revoked)).as("puts revoked (and retried) after the kill").isPositive();
            assertThat(Long.parseLong(releasedAtOnce)).as("extents of revoked puts freed at once").isPositive();
            summary(test, startNs, String.format(Locale.ROOT, "kill -9 of node-1 during %s; dropped after %.2f s; " +
                "%s puts revoked and retried (%s of their extents freed at once); %d complete objects read back",
                workload.summary(), dropSeconds, revoked, releasedAtOnce, verification.checked()));
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void shouldTimeOutOnAStalledNodeAndTakeItBackOrExpelItCleanly(final TestInfo test) throws Exception
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            final ServiceProcess master = cluster.startMaster("--node-ttl", "6s", "--heartbeat-interval", "500ms");
            final List<ServiceProcess> nodes = cluster.startNodesOnFixedPorts(
                List.of("node-0", "node-1"), "--segment-size", "64m", "--pre-touch", "false");
            final ServiceProcess stalled = nodes.get(1);
            // Puts with the default timeouts (a freshly started node may be slow to answer at first), reads during
            // the stalls with a 1 s transfer timeout.
            final GranaryClient setup = cluster.newClient();
            final GranaryClient client = cluster.newClient(b -> b.rpcTimeout(Duration.ofSeconds(3))
                .transferTimeout(Duration.ofSeconds(1)).connectTimeout(Duration.ofSeconds(1)));
            final PutOptions onStalled = PutOptions.builder().replicas(1).preferredSegment("node-1/seg0").build();
            final List<Page> solo = Pages.uniform("solo-", 10, 100_003);
            final List<Page> pairs = Pages.mixed("pair-", 40, SEED);
            putAll(setup, solo, onStalled);
            putAll(setup, pairs, TWO);
            verify(client, solo, "single-replica pages before the stall");

            // 1. A stall longer than the transfer timeout, shorter than the node TTL.
            stalled.pause();
            final long pausedNs = System.nanoTime();
            final CompletableFuture<byte[]> soloRead = client.async().get(solo.get(0).key());
            final List<CompletableFuture<byte[]>> pairReads = new ArrayList<>();
            for (int i = 0; i < 6; i++)
            {
                pairReads.add(client.async().get(pairs.get(i).key()));
            }
            final GranaryException timedOut = failure(soloRead);
            final double timeoutSeconds = secondsSince(pausedNs);
            for (int i = 0; i < pairReads.size(); i++)
            {
                assertThat(Pages.check(pairs.get(i), SEED, ByteBuffer.wrap(pairReads.get(i).get(30, TimeUnit.SECONDS))))
                    .as("a two-replica page while node-1 is stalled").isNull();
            }
            stalled.resume();
            assertThat(timedOut.code()).as(timedOut.getMessage()).isEqualTo(ErrorCode.RPC_TIMEOUT);
            assertThat(timeoutSeconds).as("a read of the stalled node gives up after its timeouts").isLessThan(10);
            verify(client, solo, "single-replica pages after SIGCONT");
            assertThat(master.countInStderr("node expired")).as("a short stall keeps the node").isZero();

            // 2. A stall longer than the node TTL: the master expels the node, which comes back empty.
            final Page kept = solo.get(1);
            final Replica before = replicaOf(cluster, kept.key());
            final int segmentBefore = segmentId(client.clusterStatus(), "node-1/seg0");
            stalled.pause();
            Await.until(RECOVERY, () -> !nodeNames(client.clusterStatus()).contains("node-1"),
                () -> "the master to expire the stalled node-1 (node TTL 6 s)\n" + master.describe());
            assertThatThrownBy(() -> client.get(kept.key())).isInstanceOfSatisfying(GranaryException.class,
                ex -> assertThat(ex.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND));
            verify(client, pairs, "two-replica pages while node-1 is expelled");
            stalled.resume();
            Await.until(RECOVERY, () -> stalled.stderr().contains("had expired node node-1: cleared"),
                () -> "node-1 to register again after SIGCONT, clearing its ledger\n" + stalled.describe());
            Await.until(RECOVERY, () -> nodeNames(client.clusterStatus()).contains("node-1"),
                () -> "node-1 listed again");
            final int segmentAfter = segmentId(client.clusterStatus(), "node-1/seg0");
            assertThat(segmentAfter).as("fresh segment id after the expulsion").isNotEqualTo(segmentBefore);
            final List<Page> fresh = Pages.uniform("fresh-", 10, 100_003);
            putAll(setup, fresh, onStalled);
            verify(client, fresh, "pages put on node-1 after it came back");
            try (NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()))
            {
                // With the read token the master handed out: a node refuses the stale extent whether the token
                // has expired by now (the token is checked first) or not (the segment id is gone).
                final ByteBuffer into = ByteBuffer.allocate((int)before.getLength());
                assertThat(engine.submit(new TransferRequest(TransferRequest.Op.READ, before.getEndpoint(),
                    before.getSegmentId(), before.getOffset(), into, (int)before.getLength(),
                    before.getAccessToken().isEmpty() ? null : before.getAccessToken().toByteArray()))
                    .get(10, TimeUnit.SECONDS))
                    .as("a read of an extent handed out before the expulsion")
                    .isIn(SEGMENT_NOT_FOUND_VALUE, TOKEN_EXPIRED_VALUE);
            }
            for (final Page page : solo)
            {
                assertThatThrownBy(() -> client.get(page.key())).as(page.key() + " does not come back")
                    .isInstanceOfSatisfying(GranaryException.class,
                        ex -> assertThat(ex.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND));
            }
            summary(test, startNs, String.format(Locale.ROOT, "SIGSTOP below the node TTL: read timed out " +
                "(RPC_TIMEOUT) after %.2f s, node kept; above the TTL: node expelled, came back with fresh segment " +
                "ids and an empty ledger, stale extents refused", timeoutSeconds));
        }
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void shouldLetAnotherClientWriteTheKeyOfAKilledClientAfterTheDiscardTimeoutAndReclaimItsExtent(
        final TestInfo test) throws Exception
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            final ServiceProcess master = cluster.startMaster("--put-discard-timeout", "3s",
                "--put-release-timeout", "6s", "--heartbeat-interval", "500ms");
            cluster.startNodesOnFixedPorts(List.of("node-0"), "--segment-size", "64m", "--pre-touch", "false");
            final GranaryClient client = cluster.newClient();
            final Page page = new Page("abandoned", 256 * 1024);

            final long launchedNs = System.nanoTime(); // before the client's PutStart
            final ServiceProcess crashing = cluster.startProcess("abandoning-client", AbandoningClient.class.getName(),
                cluster.masterAddress(), page.key(), Integer.toString(page.sizeBytes()));
            Await.until(RECOVERY, () -> crashing.stdout().contains("abandoned key="),
                () -> "the client process to start its put\n" + crashing.describe());
            final long startedNs = System.nanoTime();
            crashing.kill9();
            assertThat(allocations(client.clusterStatus())).as("the abandoned put's extent").isEqualTo(1);

            // Before the discard timeout the key belongs to the dead client: not readable, not writable.
            client.put(page.key(), ByteBuffer.wrap(Pages.content(page, SEED)), PutOptions.defaults());
            assertThatThrownBy(() -> client.get(page.key())).isInstanceOfSatisfying(GranaryException.class,
                ex -> assertThat(ex.code()).isEqualTo(ErrorCode.REPLICA_IS_NOT_READY));

            Await.until(RECOVERY, () ->
            {
                client.put(page.key(), ByteBuffer.wrap(Pages.content(page, SEED)), PutOptions.defaults());
                return client.exists(page.key());
            }, () -> "a new put of the abandoned key to succeed after the discard timeout\n" + master.describe());
            final double preemptedSeconds = secondsSince(startedNs);
            assertThat(Pages.check(page, SEED, ByteBuffer.wrap(client.get(page.key())))).isNull();
            assertThat(secondsSince(launchedNs)).as("not before the discard timeout").isGreaterThanOrEqualTo(3.0);

            Await.until(RECOVERY, () -> allocations(client.clusterStatus()) == 1,
                () -> "the abandoned extent to be reclaimed after the release timeout; status " +
                    client.clusterStatus());
            final double reclaimedSeconds = secondsSince(startedNs);
            assertThat(jsonNumber(admin(master, "/status"), "discarded")).isEqualTo("1");
            assertThat(Pages.check(page, SEED, ByteBuffer.wrap(client.get(page.key())))).isNull();
            summary(test, startNs, String.format(Locale.ROOT, "client killed after PutStart; key written again " +
                "%.2f s later (discard timeout 3 s), its old extent reclaimed after %.2f s (release timeout 6 s)",
                preemptedSeconds, reclaimedSeconds));
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void shouldReadEveryCompleteObjectAfterTheMasterIsKilledAndRestarted(final TestInfo test) throws Exception
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            cluster.startMaster("--ready-after-nodes", "3", "--heartbeat-interval", "500ms");
            cluster.startNodesOnFixedPorts(List.of("node-0", "node-1", "node-2"), "--segment-size", "128m",
                "--pre-touch", "false", "--reconnect-backoff", "50ms", "--reconnect-backoff-max", "500ms");
            final GranaryClient client = cluster.newClient(b -> b.rpcTimeout(Duration.ofSeconds(3))
                .reconnectBackoff(Duration.ofMillis(50)).reconnectBackoffMax(Duration.ofMillis(500)));
            final List<Page> pages = Pages.mixed("page-", 600, SEED);
            final List<Page> solo = Pages.mixed("solo-", 60, SEED + 1);
            final List<Page> pinned = Pages.uniform("pinned-", 5, 8192);
            putAll(client, pages, TWO);
            putAll(client, solo, PutOptions.builder().replicas(1).build());
            putAll(client, pinned, PutOptions.builder().replicas(2).hardPin(true).groupId("blk-1")
                .softPin(SoftPinAction.ENABLE, Duration.ofHours(1)).build());
            client.put("empty", new byte[0]);
            final Map<String, KeyInfo> listed = listKeys(client);
            final int objects = listed.size();
            final long replicas = listed.values().stream().mapToLong(KeyInfo::replicas).sum();

            cluster.master().kill9();
            final long downNs = System.nanoTime();
            final GranaryException down = catchGranary(() -> client.get(pages.get(0).key()));
            final double downCallSeconds = secondsSince(downNs);
            assertThat(down.code()).as(down.getMessage()).isIn(ErrorCode.RPC_FAIL, ErrorCode.RPC_TIMEOUT);
            assertThat(downCallSeconds).as("a call while the master is down").isLessThan(6);

            final ServiceProcess restarted = cluster.restartMaster();
            Await.until(RECOVERY, () -> clusterStatusOrNull(client) != null &&
                    clusterStatusOrNull(client).rebuild().ready(),
                () -> "the restarted master to be ready (3 nodes reported)\n" + restarted.describe());
            final double readySeconds = secondsSince(downNs);
            final ClusterStatus status = client.clusterStatus();
            assertThat(status.objects()).isEqualTo(objects);
            assertThat(status.rebuild().objectsRebuilt()).isEqualTo(objects);
            assertThat(status.rebuild().replicasRebuilt()).isEqualTo(replicas);
            assertThat(status.rebuild().entriesRejected()).isZero();
            assertThat(status.rebuild().ledgerReports()).isEqualTo(3);

            verify(client, pages, "two-replica pages after the master restart");
            verify(client, solo, "single-replica pages after the master restart");
            verify(client, pinned, "pinned pages after the master restart");
            assertThat(client.get("empty")).isEmpty();
            final Map<String, KeyInfo> relisted = listKeys(client);
            for (final Map.Entry<String, KeyInfo> e : listed.entrySet())
            {
                final KeyInfo after = relisted.get(e.getKey());
                assertThat(after).as(e.getKey()).isNotNull();
                assertThat(after.replicas()).as(e.getKey() + " replicas").isEqualTo(e.getValue().replicas());
                assertThat(after.valueLength()).as(e.getKey()).isEqualTo(e.getValue().valueLength());
                assertThat(after.hardPinned()).as(e.getKey()).isEqualTo(e.getValue().hardPinned());
                assertThat(after.groupId()).as(e.getKey()).isEqualTo(e.getValue().groupId());
                assertThat(after.crc32c()).as(e.getKey() + ": the checksum comes back from the ledger")
                    .isPresent().isEqualTo(e.getValue().crc32c());
            }
            assertThat(relisted.get(pinned.get(0).key()).softPinned()).isTrue();

            // New puts fill the space around the rebuilt extents, never over them.
            final List<Page> after = Pages.mixed("after-", 300, SEED + 2);
            putAll(client, after, TWO);
            verify(client, after, "pages put after the restart");
            verify(client, pages, "pages put before the restart, after new puts");
            summary(test, startNs, String.format(Locale.ROOT, "master kill -9: a call while it was down failed " +
                "with %s in %.2f s; restarted master ready %.2f s after the kill, %d objects and %d replicas " +
                "rebuilt from 3 ledgers, all read back byte for byte; 300 new pages beside them",
                down.code(), downCallSeconds, readySeconds, objects, replicas));
        }
    }

    // ------------------------------------------------------------------------------------------- helpers

    static void putAll(final GranaryClient client, final List<Page> pages, final PutOptions options)
    {
        for (final Page page : pages)
        {
            client.put(page.key(), ByteBuffer.wrap(Pages.content(page, SEED)), options);
        }
    }

    static void verify(final GranaryClient client, final List<Page> pages, final String what)
    {
        for (final Page page : pages)
        {
            final byte[] value;
            try
            {
                value = client.get(page.key());
            }
            catch (final GranaryException ex)
            {
                throw new AssertionError(what + ": " + page.key() + ": " + ex.getMessage(), ex);
            }
            assertThat(Pages.check(page, SEED, ByteBuffer.wrap(value))).as(what).isNull();
        }
    }

    private static GranaryException failure(final CompletableFuture<?> future) throws Exception
    {
        try
        {
            future.get(30, TimeUnit.SECONDS);
        }
        catch (final java.util.concurrent.ExecutionException ex)
        {
            if (ex.getCause() instanceof GranaryException)
            {
                return (GranaryException)ex.getCause();
            }
            throw ex;
        }
        throw new AssertionError("expected the read to fail");
    }

    private static GranaryException catchGranary(final Runnable call)
    {
        try
        {
            call.run();
        }
        catch (final GranaryException ex)
        {
            return ex;
        }
        catch (final CompletionException ex)
        {
            if (ex.getCause() instanceof GranaryException)
            {
                return (GranaryException)ex.getCause();
            }
            throw ex;
        }
        throw new AssertionError("expected the call to fail");
    }

    private static ClusterStatus clusterStatusOrNull(final GranaryClient client)
    {
        try
        {
            return client.clusterStatus();
        }
        catch (final GranaryException ex)
        {
            return null;
        }
    }

    private static Replica replicaOf(final ProcessCluster cluster, final String key) throws InterruptedException
    {
        final ManagedChannel channel = ManagedChannelBuilder.forTarget(cluster.masterAddress()).usePlaintext().build();
        try
        {
            final GetReplicaListResponse list = MasterServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(10, TimeUnit.SECONDS).getReplicaList(KeyRequest.newBuilder().setKey(key).build());
            assertThat(list.getReplicasCount()).as("replicas of " + key).isEqualTo(1);
            return list.getReplicas(0);
        }
        finally
        {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    static List<String> nodeNames(final ClusterStatus status)
    {
        return status.nodes().stream().map(ClusterStatus.Node::nodeName).sorted().collect(Collectors.toList());
    }

    private static int segmentId(final ClusterStatus status, final String segment)
    {
        return status.segments().stream().filter(s -> s.name().equals(segment)).findFirst()
            .orElseThrow(() -> new AssertionError("no segment " + segment + " in " + status)).segmentId();
    }

    private static long allocations(final ClusterStatus status)
    {
        return status.segments().stream().mapToLong(ClusterStatus.Segment::allocations).sum();
    }

    private static Map<String, KeyInfo> listKeys(final GranaryClient client)
    {
        final Map<String, KeyInfo> keys = new HashMap<>();
        for (final KeyInfo info : client.listKeys(null, 100_000))
        {
            keys.put(info.key(), info);
        }
        return keys;
    }

    static String admin(final ServiceProcess master, final String path) throws Exception
    {
        final HttpResponse<String> response = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create("http://" + master.ready("admin") + path))
                .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
        return response.body();
    }

    /** The first number after {@code "name":} in a JSON text. */
    static String jsonNumber(final String json, final String name)
    {
        final Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\":(-?\\d+)").matcher(json);
        if (!m.find())
        {
            throw new AssertionError("no \"" + name + "\" in " + json);
        }
        return m.group(1);
    }

    private static double secondsSince(final long startNs)
    {
        return (System.nanoTime() - startNs) / 1e9;
    }

    private static void summary(final TestInfo test, final long startNs, final String what)
    {
        System.out.printf(Locale.ROOT, "FailureIT.%s: %s; %.1f s%n",
            test.getTestMethod().map(m -> m.getName()).orElse("?"), what, secondsSince(startNs));
    }
}
