package io.granary.cli;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class BenchCommandTest
{
    @Test
    void shouldMeasurePutsAndGetsAgainstALocalCluster()
    {
        final CliRun run = CliRun.run("bench", "--local", "--count", "50", "--size", "64k", "--concurrency", "2");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("OPS/S").contains("GB/S").contains("GIB/S")
            .contains("P50(MS)").contains("P99(MS)").contains("P99.9(MS)");
        assertThat(run.out().lines().filter(l -> l.matches("put\\s+50\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out().lines().filter(l -> l.matches("get\\s+50\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out()).contains("verify: 5 of 50 values read compared byte for byte, 0 differed");
    }

    @Test
    void shouldVerifyEveryValueOfAGetOnlyRunWhenAsked()
    {
        final CliRun run = CliRun.run("bench", "--local", "--nodes", "2", "--replicas", "2", "--count", "20",
            "--size", "10000", "--op", "get", "--verify", "--warmup", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("2 node(s) x 1 segment(s)");
        assertThat(run.out().lines().filter(l -> l.startsWith("put "))).isEmpty();
        assertThat(run.out()).contains("verify: 20 of 20 values read compared byte for byte, 0 differed");
    }

    @Test
    void shouldRefuseMasterAndLocalTogether()
    {
        final CliRun run = CliRun.run("bench", "--local", "--master", "127.0.0.1:50051");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("either --master or --local");
    }

    @Test
    void shouldRefuseAnUnknownPhase()
    {
        final CliRun run = CliRun.run("bench", "--local", "--op", "delete");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("--op");
    }

    @Test
    void shouldSizeLocalSegmentsBelowTheEvictionWatermark()
    {
        final long bytes = 2200L << 20;
        final long segment = BenchCommand.localSegmentSize(bytes, 1);

        assertThat((double)bytes / segment).isLessThan(0.8);
        assertThat(BenchCommand.localSegmentSize(1, 1)).isEqualTo(64L << 20);
        assertThat(segment % (1 << 20)).isZero();
    }
}
