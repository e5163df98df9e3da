package io.granary.it;

import io.granary.client.GranaryClient;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Prefix chains across a master crash: two chains of pages put interleaved (so the oldest pages are the chains'
 * first blocks) under {@code --eviction-policy prefix-leaf-first}; the master is killed with SIGKILL and restarted,
 * rebuilds the pages and their parent links from the node's ledger (the client put each page's parent key into its
 * COMMIT record), and the eviction that the tenant's next put triggers takes pages from the chains' ends only: no
 * block is evicted while a later block of its chain is held. Without the links the rebuilt master would evict the
 * oldest pages, the chains' first blocks, and leave every block behind them useless.
 */
class PrefixRestartIT
{
    private static final long SEED = 0x7072_6566_6978_2121L;
    private static final int PAGE_BYTES = 4096;
    private static final int CHAIN = 6;
    private static final Duration RECOVERY = Duration.ofSeconds(45);

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void shouldEvictChainsFromTheirEndsAfterAMasterRestart(final TestInfo test)
        throws IOException, InterruptedException
    {
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            // A quota of the two chains exactly: the next put runs a round over the tenant's pages (a quarter of the
            // quota: three pages), in the policy's order. Watermark 1.0: nothing else evicts.
            cluster.startMaster("--eviction-policy", "prefix-leaf-first",
                "--tenant-quotas", "chains=" + (2 * CHAIN * PAGE_BYTES / 1024) + "k", "--eviction-ratio", "0.25",
                "--eviction-high-watermark", "1.0", "--ready-after-nodes", "1", "--heartbeat-interval", "500ms");
            cluster.startNode("node-0", "--segment-size", "16m", "--pre-touch", "false",
                "--reconnect-backoff", "50ms", "--reconnect-backoff-max", "500ms");
            final GranaryClient client = cluster.newClient(b -> b.tenant("chains").rpcTimeout(Duration.ofSeconds(3))
                .reconnectBackoff(Duration.ofMillis(50)).reconnectBackoffMax(Duration.ofMillis(500)));

            final List<Page> a = Pages.uniform("a-", CHAIN, PAGE_BYTES);
            final List<Page> b = Pages.uniform("b-", CHAIN, PAGE_BYTES);
            for (int i = 0; i < CHAIN; i++)
            {
                putChained(client, a, i);
                putChained(client, b, i);
            }
            assertThat(rebuildStatus(cluster)).contains("\"parents_linked\":0,");

            cluster.master().kill9();
            cluster.restartMaster();
            Await.until(RECOVERY, () -> ProcessCluster.readyWith(client, 2 * CHAIN),
                "the restarted master to rebuild every page from the node's ledger");
            assertThat(rebuildStatus(cluster)).as("every page but the two first blocks has its parent back")
                .contains("\"parents_linked\":" + 2 * (CHAIN - 1) + ",").contains("\"parents_awaited\":0,");

            final Page next = Pages.uniform("x-", 1, PAGE_BYTES).get(0);
            client.put(next.key(), Pages.content(next, SEED));

            final List<String> held = new ArrayList<>();
            final int heldA = heldPrefix(client, a, held);
            final int heldB = heldPrefix(client, b, held);
            assertThat(heldA + heldB).as("three pages evicted, from the chains' ends: " + held)
                .isEqualTo(2 * CHAIN - 3);
            assertThat(heldA).as("the first blocks, the oldest pages, stay").isPositive();
            assertThat(heldB).isPositive();
            assertThat(client.get(next.key())).isEqualTo(Pages.content(next, SEED));
            for (final Page page : a.subList(0, heldA))
            {
                assertThat(client.get(page.key())).isEqualTo(Pages.content(page, SEED));
            }
        }
    }

    private static void putChained(final GranaryClient client, final List<Page> chain, final int i)
    {
        final Page page = chain.get(i);
        final PutOptions options = i == 0 ? PutOptions.defaults() :
            PutOptions.builder().parent(chain.get(i - 1).key()).build();
        client.put(page.key(), ByteBuffer.wrap(Pages.content(page, SEED)), options);
    }

    /**
     * How many of the chain's first blocks are held, after checking that nothing behind them is (no hole); adds
     * the keys held to {@code held}.
     */
    private static int heldPrefix(final GranaryClient client, final List<Page> chain, final List<String> held)
    {
        int prefix = 0;
        while (prefix < chain.size() && client.exists(chain.get(prefix).key()))
        {
            held.add(chain.get(prefix).key());
            prefix++;
        }
        for (final Page page : chain.subList(prefix, chain.size()))
        {
            assertThat(client.exists(page.key())).as("%s is held behind a hole (held: %s)", page.key(), held)
                .isFalse();
        }
        return prefix;
    }

    /** The master's /status "rebuild" object. */
    private static String rebuildStatus(final ProcessCluster cluster) throws IOException, InterruptedException
    {
        final String status = cluster.masterStatus();
        final int at = status.indexOf("\"rebuild\":{");
        assertThat(at).as("/status has a rebuild object: " + status).isNotNegative();
        return status.substring(at, status.indexOf('}', at) + 1);
    }
}
