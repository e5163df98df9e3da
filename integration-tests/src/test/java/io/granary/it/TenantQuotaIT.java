package io.granary.it;

import io.granary.client.GranaryClient;
import io.granary.it.Pages.Page;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Tenant byte quotas across processes and a master crash: a master started with {@code --tenant-quotas small=40k}
 * keeps tenant "small" within ten 4 KiB pages while tenant "other" puts freely; killed and restarted, it rebuilds the
 * tenant's use from the node's ledger (the quota counts the rebuilt pages), and the tenant's next put evicts its own
 * oldest pages to fit, leaving every other tenant's pages alone.
 */
class TenantQuotaIT
{
    private static final long SEED = 0x7175_6f74_6173_2121L;
    private static final int PAGE_BYTES = 4096;
    private static final int QUOTA_PAGES = 10;
    private static final Duration RECOVERY = Duration.ofSeconds(45);

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void shouldKeepATenantWithinItsQuotaAcrossAMasterRestart(final TestInfo test)
        throws IOException, InterruptedException
    {
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            // Watermark 1.0: only puts evict (on demand), so what is held is what the quota and the puts decide.
            cluster.startMaster("--tenant-quotas", "small=" + (QUOTA_PAGES * PAGE_BYTES / 1024) + "k",
                "--eviction-ratio", "0.25", "--eviction-high-watermark", "1.0", "--ready-after-nodes", "1",
                "--heartbeat-interval", "500ms");
            cluster.startNode("node-0", "--segment-size", "16m", "--pre-touch", "false",
                "--reconnect-backoff", "50ms", "--reconnect-backoff-max", "500ms");
            final GranaryClient small = cluster.newClient(b -> b.tenant("small").rpcTimeout(Duration.ofSeconds(3))
                .reconnectBackoff(Duration.ofMillis(50)).reconnectBackoffMax(Duration.ofMillis(500)));
            final GranaryClient other = cluster.newClient(b -> b.tenant("other").rpcTimeout(Duration.ofSeconds(3))
                .reconnectBackoff(Duration.ofMillis(50)).reconnectBackoffMax(Duration.ofMillis(500)));

            final List<Page> pages = Pages.uniform("s-", QUOTA_PAGES + 1, PAGE_BYTES);
            for (final Page page : pages.subList(0, QUOTA_PAGES))
            {
                small.put(page.key(), Pages.content(page, SEED));
            }
            final List<Page> others = Pages.uniform("o-", 3 * QUOTA_PAGES, PAGE_BYTES);
            for (final Page page : others)
            {
                other.put(page.key(), Pages.content(page, SEED + 1)); // no quota: three times as much
            }
            assertThat(smallQuota(cluster)).contains("\"used_bytes\":" + QUOTA_PAGES * PAGE_BYTES + ",");

            cluster.master().kill9();
            cluster.restartMaster();
            Await.until(RECOVERY, () -> ProcessCluster.readyWith(small, QUOTA_PAGES + 3 * QUOTA_PAGES),
                "the restarted master to rebuild every page from the node's ledger");
            assertThat(smallQuota(cluster)).as("the rebuilt pages count against the quota")
                .contains("\"used_bytes\":" + QUOTA_PAGES * PAGE_BYTES + ",").contains("\"refusals\":0,");

            final Page next = pages.get(QUOTA_PAGES);
            small.put(next.key(), Pages.content(next, SEED));

            // A round over the tenant frees a quarter of its quota (three pages) and the new page takes one.
            final long held = pages.stream().filter(p -> small.exists(p.key())).count();
            assertThat(held).isEqualTo(QUOTA_PAGES - 3 + 1);
            assertThat(small.get(next.key())).isEqualTo(Pages.content(next, SEED));
            assertThat(smallQuota(cluster)).contains("\"used_bytes\":" + held * PAGE_BYTES + ",")
                .contains("\"evicted_bytes\":" + 3 * PAGE_BYTES + "}");
            for (final Page page : others)
            {
                assertThat(other.get(page.key())).as("another tenant's " + page.key())
                    .isEqualTo(Pages.content(page, SEED + 1));
            }
        }
    }

    /** The "small" entry of the master's /status tenant_quotas. */
    private static String smallQuota(final ProcessCluster cluster) throws IOException, InterruptedException
    {
        final String status = cluster.masterStatus();
        final int at = status.indexOf("{\"tenant\":\"small\"");
        assertThat(at).as("/status names tenant small: " + status).isNotNegative();
        return status.substring(at, status.indexOf('}', at) + 1);
    }
}
