package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.master.MasterServer;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code granary stat --admin}: the counters of the master's admin summary, the object budget among them; and the
 * object budget in plain {@code granary stat} (over gRPC).
 */
class StatAdminTest
{
    @Test
    void shouldPrintTheObjectBudgetAndTheHeldOffRounds()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(8L << 20)
            .masterContext(LocalCluster.defaultMasterContext().adminPort(0).maxObjects(4)).start())
        {
            try (GranaryClient client = cluster.newClient())
            {
                client.put("a", new byte[4096]);
                client.put("b", new byte[4096]);
            }
            final MasterServer master = cluster.master();

            final CliRun run = CliRun.run("stat", "--admin", "127.0.0.1:" + master.adminPort());

            assertThat(run.exitCode()).as(run.toString()).isZero();
            assertThat(run.out()).contains("objects: 2 of at most 4 (50.0% of the object budget)")
                .contains("object budget: 0 puts of new keys refused at it")
                .contains(" on demand, 0 held off), policy oldest-lease");
        }
    }

    @Test
    void shouldPrintTheObjectBudgetOverGrpc()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(8L << 20)
            .masterContext(LocalCluster.defaultMasterContext().maxObjects(8)).start())
        {
            try (GranaryClient client = cluster.newClient())
            {
                for (int i = 0; i < 3; i++)
                {
                    client.put("k" + i, new byte[4096]);
                }
                assertThat(client.clusterStatus().maxObjects()).isEqualTo(8);
            }

            final CliRun run = CliRun.run("stat", "--master", cluster.masterAddress());

            assertThat(run.exitCode()).as(run.toString()).isZero();
            assertThat(run.out()).contains("objects: 3 of at most 8 (37.5% of the object budget)");
        }
    }
}
