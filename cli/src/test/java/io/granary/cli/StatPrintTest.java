package io.granary.cli;

import io.granary.client.ClusterStatus;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The rebuild line of {@code granary stat}: parent links only when a rebuild made or awaits any. */
class StatPrintTest
{
    private static String print(final ClusterStatus.Rebuild rebuild)
    {
        final StringWriter text = new StringWriter();
        try (PrintWriter out = new PrintWriter(text))
        {
            StatCommand.print(new ClusterStatus(List.of(), List.of(), 12, 1 << 20, 4096, 10_000, "test", rebuild, 0),
                "127.0.0.1:1", out);
        }
        return text.toString();
    }

    @Test
    void shouldSayHowManyRebuiltObjectsGotTheirParentBackAndHowManyWait()
    {
        assertThat(print(new ClusterStatus.Rebuild("m-1", true, 2, 12, 12, 0, 1_000, 9, 1)))
            .contains("rebuilt from node ledgers: 12 objects, 12 replicas from 2 segment report(s), 0 entries refused; " +
                "9 linked to their parent, 1 waiting for it\n");
        assertThat(print(new ClusterStatus.Rebuild("m-1", true, 2, 12, 12, 0, 1_000)))
            .as("no parent links: nothing said about them")
            .contains("0 entries refused\n").doesNotContain("parent");
    }
}
