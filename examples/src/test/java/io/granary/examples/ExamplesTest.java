package io.granary.examples;

import io.granary.cli.LocalCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class ExamplesTest
{
    private static LocalCluster cluster;

    @BeforeAll
    static void startCluster()
    {
        cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(16L << 20).start();
    }

    @AfterAll
    static void stopCluster()
    {
        cluster.close();
    }

    @Test
    void shouldRunTheEmbeddedClientExample()
    {
        final String report = EmbeddedClientExample.run(cluster.masterAddress());

        assertThat(report)
            .contains("get example/hello -> \"hello from an embedded client\"")
            .contains("getInto example/hello -> 29 bytes")
            .contains("get example/missing -> OBJECT_NOT_FOUND")
            .contains("putBatch 8/8 stored, getBatch 8/8 loaded intact");
    }

    @Test
    void shouldSelectTheLastCompleteCheckpointInThePrefixLookup()
    {
        final PrefixLookupExample.Result result = PrefixLookupExample.run(cluster.masterAddress());

        // DESIGN's canonical example: 128 (both ranks), 256 (rank 1), 384 (rank 0) -> only 128 is selected.
        assertThat(result.mask()).isEqualTo(List.of(true, true, false, false, false, false));
        assertThat(result.resumeFromToken()).isEqualTo(128);
        assertThat(result.loadedBytes()).isEqualTo(2L * ("KV page " + PrefixLookupExample.key("prompt-7f3a", 128, 0))
            .length());
    }
}
