package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.master.MasterServer;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code granary stat --admin}: the counters of the master's admin summary, the object budget among them. */
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
            assertThat(run.out()).contains("object budget: 4 (50.0% held), 0 puts refused at it")
                .contains(" on demand, 0 held off), policy oldest-lease");
        }
    }
}
