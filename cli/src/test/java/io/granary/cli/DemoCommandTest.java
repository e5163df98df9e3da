package io.granary.cli;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class DemoCommandTest
{
    @Test
    void shouldVerifyEveryByteOfThePagesItStores()
    {
        final CliRun run = CliRun.run("demo");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out())
            .contains("pages: 300")
            .contains("put  200 pages one by one")
            .contains("in 4 batches")
            .contains("verify: 600 reads, all")
            .contains("selected #9 (expected #9)")
            .contains("OBJECT_HAS_LEASE")
            .contains("299 objects")
            .contains("every byte verified")
            .doesNotContain("CHECK FAILED");
    }

    @Test
    void shouldGrowTheSegmentWhenThePagesNeedIt()
    {
        assertThat(DemoCommand.defaultSegmentSize(300)).isEqualTo(256L << 20);
        assertThat(DemoCommand.defaultSegmentSize(5000)).isGreaterThan(1L << 30);
    }

    @Test
    void shouldMakePagesDeterministicAndOfMixedSizes()
    {
        assertThat(DemoCommand.page(7)).isEqualTo(DemoCommand.page(7));
        assertThat(DemoCommand.page(7)).isNotEqualTo(DemoCommand.page(16));
        assertThat(DemoCommand.page(0)).hasSize(4096);
        assertThat(DemoCommand.page(8)).hasSize(1 << 20);
    }
}
