package io.granary.cli;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.node.StorageNode;
import io.granary.node.segment.LedgerBudget;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/** A node whose ledgers reach their heap budget refuses COMMITs, keeps serving, and takes values again once freed. */
class LedgerBudgetClusterTest
{
    /** Keys "k0".."k9" without a group: names of 4 bytes. */
    private static final long ENTRY = LedgerBudget.entryBytes(4);

    @Test
    void shouldFailAPutWithNoAvailableHandleWhenTheOnlyNodesLedgerIsFullAndServeWhatItHolds() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(8L << 20)
            .nodeContext(ctx -> ctx.ledgerBudgetBytes(5 * ENTRY)).start())
        {
            final GranaryClient client = cluster.newClient();
            for (int i = 0; i < 5; i++)
            {
                client.put("k" + i, new byte[]{(byte)i, 1, 2});
            }

            assertThatThrownBy(() -> client.put("k5", new byte[]{5, 1, 2})).isInstanceOf(GranaryException.class)
                .satisfies(e -> assertThat(((GranaryException)e).code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE));
            assertThat(client.exists("k5")).as("the refused put was revoked").isFalse();
            for (int i = 1; i < 5; i++) // not k0: a read leases it, and a leased extent is freed only when that ends
            {
                assertThat(client.get("k" + i)).containsExactly((byte)i, 1, 2);
            }
            final StorageNode node = cluster.nodes().get(0);
            assertThat(ledgerEntries(node)).isEqualTo(5);
            assertThat(node.scrapeMetrics()).contains("granary_node_ledger_refusals_total")
                .contains("granary_node_ledger_budget_bytes " + (double)(5 * ENTRY));

            // The master frees k0's extent; the node hears of it in a heartbeat answer, then has room again.
            client.remove("k0");
            final long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
            while (true)
            {
                try
                {
                    client.put("k5", new byte[]{5, 1, 2});
                    break;
                }
                catch (final GranaryException e)
                {
                    assertThat(e.code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE);
                    if (System.nanoTime() - deadline > 0)
                    {
                        fail("the node never took a value again after k0 was removed");
                    }
                    Thread.sleep(50);
                }
            }
            assertThat(client.get("k5")).containsExactly(5, 1, 2);
            assertThat(ledgerEntries(node)).isEqualTo(5);
        }
    }

    @Test
    void shouldPutElsewhereWhenOneNodesLedgerIsFull()
    {
        final AtomicInteger started = new AtomicInteger();
        try (LocalCluster cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(8L << 20)
            .nodeContext(ctx -> ctx.ledgerBudgetBytes(started.getAndIncrement() == 0 ? ENTRY : 0)).start())
        {
            final StorageNode full = cluster.nodes().stream()
                .filter(n -> n.context().ledgerBudgetBytes() == ENTRY).findFirst().orElseThrow();
            final GranaryClient client = cluster.newClient();
            for (int i = 0; i < 40; i++)
            {
                client.put("v" + i, new byte[]{(byte)i});
            }

            for (int i = 0; i < 40; i++)
            {
                assertThat(client.get("v" + i)).containsExactly((byte)i);
            }
            assertThat(ledgerEntries(full)).isLessThanOrEqualTo(1);
            assertThat(cluster.nodes().stream().mapToInt(LedgerBudgetClusterTest::ledgerEntries).sum()).isEqualTo(40);
            assertThat(full.scrapeMetrics()).as("puts were placed on the full node, refused and retried elsewhere")
                .containsPattern("granary_node_ledger_refusals_total [1-9]");
        }
    }

    private static int ledgerEntries(final StorageNode node)
    {
        return node.segments().stream().mapToInt(s -> s.ledger().size()).sum();
    }
}
