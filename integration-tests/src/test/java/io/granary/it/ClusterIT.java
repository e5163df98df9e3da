package io.granary.it;

import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A master and two storage nodes as separate JVMs, a client in this JVM: thousands of pages of mixed sizes
 * stored with two replicas and read back byte for byte, through a kill -9 of one node, the master's expiry
 * of that node after the node TTL, and a restart of the node under the same name.
 */
class ClusterIT
{
    private static final long SEED = 0x6772616e6172794cL;
    private static final int PAGES = 2400;
    private static final int SOLO_PAGES = 24;
    private static final int FRESH_PAGES = 200;
    private static final int BATCH_KEYS = 64;
    private static final long BATCH_BYTES = 8L * Pages.MIB;
    private static final String NODE_TTL = "3s";
    private static final Duration DROP_TIMEOUT = Duration.ofSeconds(30);
    private static final int MAX_REPORTED = 20;

    private static final PutOptions TWO_REPLICAS = PutOptions.builder().replicas(2).build();

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void shouldReadEveryPageThroughAKill9AndDropTheDeadNodesReplicasAfterTheNodeTtl(final TestInfo test)
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            cluster.startMaster("--node-ttl", NODE_TTL, "--heartbeat-interval", "500ms");
            final List<ServiceProcess> nodes = cluster.startNodes("node-0", "node-1");
            final ServiceProcess victim = nodes.get(1);
            final GranaryClient client = cluster.newClient();
            assertThat(segmentNames(client.clusterStatus())).containsExactly("node-0/seg0", "node-1/seg0");

            // Thousands of pages, two replicas each: batches and single puts, heap and direct buffers.
            final List<Page> pages = Pages.mixed("page-", PAGES, SEED);
            final long pageBytes = Pages.totalBytes(pages);
            long phaseNs = System.nanoTime();
            putAll(client, pages, TWO_REPLICAS);
            final double putSeconds = secondsSince(phaseNs);
            final Map<String, KeyInfo> listed = listKeys(client, "page-.*");
            assertThat(listed).as("keys listed after the puts").hasSize(PAGES);
            for (final Page page : pages)
            {
                final KeyInfo info = listed.get(page.key());
                assertThat(info).as(page.key()).isNotNull();
                assertThat(info.status()).as(page.key()).isEqualTo(KeyInfo.Status.COMPLETE);
                assertThat(info.valueLength()).as(page.key()).isEqualTo(page.sizeBytes());
                assertThat(info.replicas()).as(page.key() + " replicas").isEqualTo(2);
            }
            phaseNs = System.nanoTime();
            verifyAll(client, pages, 0, "first read");
            final double readSeconds = secondsSince(phaseNs);

            // Single-replica pages placed on the node about to die.
            final Map<String, Long> allocationsBefore = allocations(client.clusterStatus());
            final List<Page> solo = Pages.uniform("solo-", SOLO_PAGES, 64 * Pages.KIB + 3);
            final PutOptions onVictim = PutOptions.builder().replicas(1).preferredSegment("node-1/seg0").build();
            putAll(client, solo, onVictim);
            final Map<String, Long> allocationsAfter = allocations(client.clusterStatus());
            assertThat(allocationsAfter.get("node-1/seg0") - allocationsBefore.get("node-1/seg0"))
                .as("extents added on node-1/seg0 by the single-replica puts").isEqualTo(SOLO_PAGES);
            assertThat(allocationsAfter.get("node-0/seg0")).as("extents on node-0/seg0")
                .isEqualTo(allocationsBefore.get("node-0/seg0"));
            verifyAll(client, solo, 0, "single-replica pages before the kill");

            // kill -9: every two-replica page must still read, from the surviving replica.
            victim.kill9();
            final long killedNs = System.nanoTime();
            // The first batch is read well inside the node TTL, while the master still hands out node-1's
            // replicas: those reads must fail over. The full pass may outlast the TTL.
            verifyAll(client, pages.subList(0, BATCH_KEYS), 0, "first batch read right after kill -9 of node-1");
            assertThat(nodeNames(client.clusterStatus())).as("nodes the master lists after the first reads " +
                "following the kill (node TTL " + NODE_TTL + ")").contains("node-1");
            verifyAll(client, pages, 1, "reads right after kill -9 of node-1");
            final double failoverSeconds = secondsSince(killedNs);
            final boolean victimStillListed = nodeNames(client.clusterStatus()).contains("node-1");
            for (final OpResult<byte[]> result : client.getBatch(keys(solo)))
            {
                assertThat(result.ok()).as("a single-replica page on the killed node: " + result).isFalse();
            }

            // After the node TTL the master drops the node, its segment and its replicas. The housekeeper unmounts
            // the segment first and then purges the objects left without a replica, so wait for both.
            Await.until(DROP_TIMEOUT, () ->
                {
                    final ClusterStatus status = client.clusterStatus();
                    return nodeNames(status).equals(List.of("node-0")) &&
                        segmentNames(status).equals(List.of("node-0/seg0")) && status.objects() == PAGES;
                },
                () -> "the master to drop node-1 after the node TTL of " + NODE_TTL + "; status now " +
                    client.clusterStatus() + "\n" + cluster.master().describe());
            final double dropSeconds = secondsSince(killedNs);
            final Map<String, KeyInfo> afterDrop = listKeys(client, null);
            for (final Page page : pages)
            {
                final KeyInfo info = afterDrop.get(page.key());
                assertThat(info).as(page.key() + " after node-1 was dropped").isNotNull();
                assertThat(info.replicas()).as(page.key() + " replicas after node-1 was dropped").isEqualTo(1);
            }
            for (final Page page : solo)
            {
                assertThat(afterDrop).as("listing after node-1 was dropped").doesNotContainKey(page.key());
            }
            assertThat(client.clusterStatus().objects()).as("objects after node-1 was dropped").isEqualTo(PAGES);
            for (final OpResult<byte[]> result : client.getBatch(keys(solo)))
            {
                assertThat(result.error()).as("a single-replica page of the dropped node: " + result)
                    .isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
            }
            assertThatThrownBy(() -> client.get(solo.get(0).key()))
                .isInstanceOfSatisfying(GranaryException.class,
                    ex -> assertThat(ex.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND));

            // The same node name again: a new incarnation registers and takes new puts.
            final ServiceProcess reborn = cluster.startNode("node-1");
            assertThat(reborn.ready("nodeId")).as("node id of the restarted node")
                .isNotEqualTo(victim.ready("nodeId"));
            final ClusterStatus rebornStatus = client.clusterStatus();
            assertThat(nodeNames(rebornStatus)).containsExactly("node-0", "node-1");
            assertThat(rebornStatus.nodes()).filteredOn(n -> n.nodeName().equals("node-1"))
                .extracting(ClusterStatus.Node::nodeId).containsExactly(reborn.ready("nodeId"));
            final List<Page> fresh = Pages.mixed("fresh-", FRESH_PAGES, SEED + 1);
            final List<Page> freshSolo = Pages.uniform("fresh-solo-", SOLO_PAGES, 16 * Pages.KIB - 5);
            putAll(client, fresh, TWO_REPLICAS);
            putAll(client, freshSolo, onVictim);
            assertThat(allocations(client.clusterStatus()).get("node-1/seg0"))
                .as("extents on the restarted node-1/seg0: one replica of each fresh page and the single ones")
                .isEqualTo(FRESH_PAGES + SOLO_PAGES);
            final Map<String, KeyInfo> freshListed = listKeys(client, "fresh-.*");
            for (final Page page : fresh)
            {
                assertThat(freshListed.get(page.key()).replicas()).as(page.key() + " replicas").isEqualTo(2);
            }
            verifyAll(client, fresh, 0, "pages put after the restart");
            verifyAll(client, freshSolo, 1, "single-replica pages put on the restarted node");
            verifyAll(client, pages, 2, "first pages, now on node-0 alone");

            System.out.printf(Locale.ROOT, "ClusterIT: master + 2 nodes as processes; %d pages (%.1f MiB, " +
                    "%d B..%d B, 2 replicas) put in %.2f s, read in %.2f s; kill -9 node-1: all %d read back " +
                    "in %.2f s (node-1 %s listed by the master then), dropped after %.2f s with %d single-replica " +
                    "pages; node-1 restarted and took %d pages; %d pages read back 3 times, every byte verified; " +
                    "%.1f s in all%n",
                PAGES, pageBytes / (double)Pages.MIB, smallest(pages), Pages.largest(pages), putSeconds,
                readSeconds, PAGES, failoverSeconds, victimStillListed ? "still" : "no longer", dropSeconds,
                SOLO_PAGES, FRESH_PAGES + SOLO_PAGES, PAGES, secondsSince(startNs));
        }
    }

    /**
     * Puts every page with {@code options}: most through putBatch (at most 64 keys or 8 MiB per batch), every
     * twentieth through a single put, alternately from a heap and a direct buffer.
     */
    static void putAll(final GranaryClient client, final List<Page> pages, final PutOptions options)
    {
        final List<String> batchKeys = new ArrayList<>();
        final List<ByteBuffer> batchValues = new ArrayList<>();
        long batchBytes = 0;
        for (int i = 0; i < pages.size(); i++)
        {
            final Page page = pages.get(i);
            if (i % 20 == 7)
            {
                final ByteBuffer value = (i / 20) % 2 == 0 ?
                    ByteBuffer.wrap(Pages.content(page, SEED)) : Pages.directContent(page, SEED);
                client.put(page.key(), value, options);
                continue;
            }
            batchKeys.add(page.key());
            batchValues.add(ByteBuffer.wrap(Pages.content(page, SEED)));
            batchBytes += page.sizeBytes();
            if (batchKeys.size() == BATCH_KEYS || batchBytes >= BATCH_BYTES)
            {
                putBatch(client, batchKeys, batchValues, options);
                batchBytes = 0;
            }
        }
        putBatch(client, batchKeys, batchValues, options);
    }

    private static void putBatch(
        final GranaryClient client, final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        if (keys.isEmpty())
        {
            return;
        }
        final List<OpResult<Void>> results = client.putBatch(keys, values, options);
        assertThat(results).hasSize(keys.size());
        for (int i = 0; i < keys.size(); i++)
        {
            assertThat(results.get(i).ok()).as("putBatch of " + keys.get(i) + ": " + results.get(i)).isTrue();
        }
        keys.clear();
        values.clear();
    }

    /**
     * Reads every page back and checks every byte. The read path of each page rotates with {@code pass}: six
     * pages in eight through getBatch, one through get, one through getInto a direct buffer at an odd position.
     */
    static void verifyAll(final GranaryClient client, final List<Page> pages, final int pass, final String what)
    {
        final List<String> problems = new ArrayList<>();
        int failures = 0;
        final ByteBuffer direct = ByteBuffer.allocateDirect(Pages.largest(pages) + 64);
        final List<Page> batch = new ArrayList<>();
        long batchBytes = 0;
        for (int i = 0; i < pages.size(); i++)
        {
            final Page page = pages.get(i);
            final int path = (i + pass) % 8;
            String problem = null;
            if (path < 6)
            {
                batch.add(page);
                batchBytes += page.sizeBytes();
                if (batch.size() == BATCH_KEYS || batchBytes >= BATCH_BYTES)
                {
                    failures += getBatch(client, batch, problems);
                    batchBytes = 0;
                }
            }
            else if (path == 6)
            {
                try
                {
                    problem = Pages.check(page, SEED, ByteBuffer.wrap(client.get(page.key())));
                }
                catch (final GranaryException ex)
                {
                    problem = page.key() + ": get failed: " + ex.getMessage();
                }
            }
            else
            {
                problem = getInto(client, page, direct);
            }
            if (problem != null)
            {
                failures++;
                if (problems.size() < MAX_REPORTED)
                {
                    problems.add(problem);
                }
            }
        }
        failures += getBatch(client, batch, problems);
        assertThat(failures).as(what + ": " + failures + " of " + pages.size() + " pages unreadable or wrong; " +
            "first ones: " + problems).isZero();
    }

    private static String getInto(final GranaryClient client, final Page page, final ByteBuffer direct)
    {
        final int offset = 7;
        direct.clear().position(offset);
        final int length;
        try
        {
            length = client.getInto(page.key(), direct);
        }
        catch (final GranaryException ex)
        {
            return page.key() + ": getInto failed: " + ex.getMessage();
        }
        if (length != page.sizeBytes() || direct.position() != offset + length)
        {
            return page.key() + ": getInto returned " + length + " and moved the position to " + direct.position() +
                " for a page of " + page.sizeBytes() + " bytes read at " + offset;
        }
        return Pages.check(page, SEED, direct.flip().position(offset));
    }

    /** Reads the batch, checks it, clears it; returns the number of bad pages. */
    private static int getBatch(final GranaryClient client, final List<Page> batch, final List<String> problems)
    {
        if (batch.isEmpty())
        {
            return 0;
        }
        final List<OpResult<byte[]>> results = client.getBatch(keys(batch));
        assertThat(results).hasSize(batch.size());
        int failures = 0;
        for (int i = 0; i < batch.size(); i++)
        {
            final OpResult<byte[]> result = results.get(i);
            final Page page = batch.get(i);
            final String problem = result.ok() ?
                Pages.check(page, SEED, ByteBuffer.wrap(result.value())) : page.key() + ": getBatch: " + result;
            if (problem != null)
            {
                failures++;
                if (problems.size() < MAX_REPORTED)
                {
                    problems.add(problem);
                }
            }
        }
        batch.clear();
        return failures;
    }

    private static Map<String, KeyInfo> listKeys(final GranaryClient client, final String regex)
    {
        final Map<String, KeyInfo> byKey = new HashMap<>();
        for (final KeyInfo info : client.listKeys(regex, 0))
        {
            byKey.put(info.key(), info);
        }
        return byKey;
    }

    private static Map<String, Long> allocations(final ClusterStatus status)
    {
        final Map<String, Long> bySegment = new HashMap<>();
        for (final ClusterStatus.Segment segment : status.segments())
        {
            bySegment.put(segment.name(), segment.allocations());
        }
        return bySegment;
    }

    private static List<String> nodeNames(final ClusterStatus status)
    {
        final TreeSet<String> names = new TreeSet<>();
        status.nodes().forEach(n -> names.add(n.nodeName()));
        return new ArrayList<>(names);
    }

    private static List<String> segmentNames(final ClusterStatus status)
    {
        final TreeSet<String> names = new TreeSet<>();
        status.segments().forEach(s -> names.add(s.name()));
        return new ArrayList<>(names);
    }

    private static List<String> keys(final List<Page> pages)
    {
        final List<String> keys = new ArrayList<>(pages.size());
        pages.forEach(p -> keys.add(p.key()));
        return keys;
    }

    private static int smallest(final List<Page> pages)
    {
        int smallest = Integer.MAX_VALUE;
        for (final Page page : pages)
        {
            smallest = Math.min(smallest, page.sizeBytes());
        }
        return smallest;
    }

    private static double secondsSince(final long startNs)
    {
        return (System.nanoTime() - startNs) / 1e9;
    }
}
