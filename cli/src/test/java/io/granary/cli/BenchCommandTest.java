package io.granary.cli;

import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

class BenchCommandTest
{
    @Test
    void shouldMeasurePutsAndGetsAgainstALocalCluster()
    {
        final CliRun run = CliRun.run("bench", "--local", "--count", "50", "--size", "64k", "--concurrency", "2",
            "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("SIZE").contains("OPS/S").contains("GB/S").contains("GIB/S")
            .contains("P50(MS)").contains("P99(MS)").contains("P99.9(MS)").doesNotContain("%LIMIT");
        assertThat(run.out().lines().filter(l -> l.matches("64k\\s+put\\s+50\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out().lines().filter(l -> l.matches("64k\\s+get\\s+50\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out()).contains("verify: 5 of 50 values read compared byte for byte, 0 differed");
        // The in-process master's side of each phase: 50 puts of one value each, then 50 gets.
        assertThat(run.out()).containsPattern("master: 64k put: (\\w+ \\d+ x \\d+ us, )*PutStart 50 x \\d+ us")
            .containsPattern("master: 64k put: .*PutEnd 50 x \\d+ us.*; [0-9.]+ s serving them = [0-9.]+ % of the " +
                "phase's [0-9.]+ s")
            .containsPattern("master: 64k get: (\\w+ \\d+ x \\d+ us, )*GetReplicaList 50 x \\d+ us");
        // And what the JVM spent compiling and collecting in each phase (CPU of those threads: this is Linux).
        assertThat(run.out())
            .containsPattern("jvm: 64k put: JIT compiled \\d+ ms \\([0-9.]+ % of the phase's [0-9.]+ s\\), " +
                "\\d+ collection\\(s\\) took \\d+ ms \\([0-9.]+ %\\); CPU of the compiler threads \\d+ ms " +
                "\\([0-9.]+ % of \\d+ core\\(s\\)\\), of the GC threads \\d+ ms \\([0-9.]+ %\\); process CPU \\d+ ms " +
                "\\([0-9.]+ % of the cores\\), [0-9.]+ us per op")
            .containsPattern("jvm: 64k get: JIT compiled \\d+ ms");
    }

    @Test
    void shouldKeepWarmingUpInRoundsWhoseKeysItRemoves()
    {
        // 20 warmup values of 1 MiB, then rounds of 20 fresh puts (and 20 gets) for 2 s; the segment holds the
        // measured values, the warmup values and two rounds, so every round's keys must really be removed.
        final CliRun run = CliRun.run("bench", "--local", "--count", "20", "--size", "1m", "--warmup-seconds", "2",
            "--warmup-calls", "0", "--warmup-jit-quiet", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        final java.util.regex.Matcher warmup = java.util.regex.Pattern.compile("warmup: (\\d+) values put or read in "
            + "([0-9.]+) s, (\\d+) timed round\\(s\\) of 20 puts and 20 gets, (\\d+) round values removed, (\\d+) put calls "
            + "and (\\d+) get calls").matcher(run.out());
        assertThat(warmup.find()).as(run.out()).isTrue();
        final int rounds = Integer.parseInt(warmup.group(3));
        assertThat(rounds).isPositive();
        assertThat(Double.parseDouble(warmup.group(2))).isGreaterThanOrEqualTo(2.0);
        assertThat(Long.parseLong(warmup.group(1))).isEqualTo(40L + 40L * rounds);
        assertThat(Long.parseLong(warmup.group(4))).isEqualTo(20L * rounds);
        assertThat(Long.parseLong(warmup.group(5))).isEqualTo(20L + 20L * rounds);
        assertThat(Long.parseLong(warmup.group(6))).isEqualTo(20L + 20L * rounds);
        assertThat(run.out()).doesNotContain("errors, first:");
        assertThat(run.out().lines().filter(l -> l.matches("1m\\s+(put|get)\\s+20\\s+0\\s+.*"))).hasSize(2);
        assertThat(run.out()).containsPattern("get calls, the JIT took [0-9.]+ % of the cores in the last round");

        // Fewer warmup values than a round's 16 MiB: the rounds put 16 fresh values and read the 3 that stay.
        // With --warmup-calls the rounds go on past --warmup-seconds until both kinds of calls reached it: batches of
        // 2 give 8 put calls and 2 get calls per round, so 40 get calls need 19 rounds after the first 2 calls.
        final CliRun few = CliRun.run("bench", "--local", "--count", "5", "--size", "1m", "--warmup", "3",
            "--warmup-seconds", "1", "--warmup-calls", "40", "--batch", "2", "--warmup-jit-quiet", "0");
        assertThat(few.exitCode()).as(few.toString()).isZero();
        final java.util.regex.Matcher calls = java.util.regex.Pattern.compile("(\\d+) timed round\\(s\\) of 16 puts and "
            + "3 gets, \\d+ round values removed, (\\d+) put calls and (\\d+) get calls").matcher(few.out());
        assertThat(calls.find()).as(few.out()).isTrue();
        final int fewRounds = Integer.parseInt(calls.group(1));
        assertThat(fewRounds).isGreaterThanOrEqualTo(19);
        assertThat(Long.parseLong(calls.group(3))).isEqualTo(2L + 2L * fewRounds).isGreaterThanOrEqualTo(40);
        assertThat(Long.parseLong(calls.group(2))).isEqualTo(2L + 8L * fewRounds);
        assertThat(few.out()).doesNotContain("errors, first:");
    }

    @Test
    void shouldLandEveryGetInTheCallersPartOfThePoolAndVerifyIt()
    {
        // 3 callers x batches of 4 x 16 KiB in a 1 MiB pool: each caller's part holds 5 slots of a batch, picked at
        // random per call; every value is compared where it landed.
        final CliRun run = CliRun.run("bench", "--local", "--op", "get", "--count", "120", "--size", "16k", "--batch",
            "4", "--concurrency", "3", "--pool", "1m", "--verify", "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("pool: gets land in random slots of a 1.00 MiB host buffer")
            .contains("verify: 120 of 120 values read compared byte for byte, 0 differed");

        final CliRun small = CliRun.run("bench", "--local", "--size", "1m", "--concurrency", "2", "--pool", "1m");
        assertThat(small.exitCode()).as(small.toString()).isEqualTo(2);
        assertThat(small.err()).contains("--pool must hold a batch of the largest size for every caller");
    }

    @Test
    void shouldVerifyEveryValueOfAGetOnlyRunWhenAsked()
    {
        final CliRun run = CliRun.run("bench", "--local", "--nodes", "2", "--replicas", "2", "--count", "20",
            "--size", "10000", "--op", "get", "--verify", "--warmup", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("2 node(s) x 1 segment(s)");
        assertThat(run.out().lines().filter(l -> l.matches("10000\\s+put\\s.*"))).isEmpty();
        assertThat(run.out().lines().filter(l -> l.matches("10000\\s+get\\s+20\\s+0\\s.*"))).hasSize(1);
        assertThat(run.out()).contains("verify: 20 of 20 values read compared byte for byte, 0 differed");
    }

    @Test
    void shouldPrintARowPerSizeAndPhaseOfABatchedMixedRun()
    {
        final CliRun run = CliRun.run("bench", "--size", "4k,64k", "--batch", "8", "--op", "mixed", "--local",
            "--count", "200", "--warmup", "16", "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out().lines().filter(l -> l.matches("4k\\s+mixed\\s+200\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out().lines().filter(l -> l.matches("64k\\s+mixed\\s+200\\s+0\\s+.*"))).hasSize(1);
        assertThat(run.out().lines().filter(l -> l.matches("\\S+\\s+(put|get|mixed)\\s+\\d+\\s+.*"))).hasSize(2);
        assertThat(run.out()).contains("latency is per call of up to 8 values");
        // 25 calls of 8 values per size; the reads compare every 10th value and none may differ.
        assertThat(run.out()).containsPattern("mixed 4k: \\d+ values got \\([0-9.]+%\\), \\d+ put");
        assertThat(run.out()).containsPattern("verify: \\d+ of \\d+ values read compared byte for byte, 0 differed");
    }

    @Test
    void shouldPrintTheBaselineAndTheShareOfItReached()
    {
        final CliRun run = CliRun.run("bench", "--baseline", "--baseline-seconds", "0.3", "--local", "--count", "100",
            "--size", "64k", "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        for (final String when : List.of("before", "after"))
        {
            assertThat(run.out()).containsPattern("baseline " + when + ": loopback put 64\\.00 KiB c=1 batch=1: " +
                "[0-9.]+ GB/s").containsPattern("baseline " + when + ": loopback get 64\\.00 KiB c=1 batch=1: " +
                "[0-9.]+ GB/s");
        }
        // Each row's limit is the higher of its shape's two runs.
        for (final String shape : List.of("put", "get"))
        {
            final double higher = run.out().lines()
                .filter(l -> l.startsWith("baseline ") && l.contains(": loopback " + shape + " "))
                .mapToDouble(l -> Double.parseDouble(l.replaceAll(".*batch=1: ([0-9.]+) GB/s.*", "$1"))).max()
                .orElseThrow();
            final String row = run.out().lines().filter(l -> l.matches("64k\\s+" + shape + "\\s.*")).findFirst()
                .orElseThrow();
            final String[] cells = row.trim().split("\\s+");
            assertThat(Double.parseDouble(cells[cells.length - 2])).as(row).isCloseTo(higher, offset(0.0005));
        }
        assertThat(run.out()).contains("LIMIT(GB/S)").contains("%LIMIT");
        // The last two cells of each row: the limit and Granary's share of it, both positive numbers.
        assertThat(run.out().lines().filter(l -> l.matches("64k\\s+(put|get)\\s+100\\s+0\\s+.*\\s[0-9]+\\.[0-9]{3}"
            + "\\s+[0-9]+\\.[0-9]"))).hasSize(2);
    }

    @Test
    void shouldPrintTheColdBaselineAndTheShareOfItReached()
    {
        final CliRun run = CliRun.run("bench", "--baseline", "--baseline-cold", "--baseline-cold-region", "16MiB",
            "--baseline-seconds", "0.3", "--local", "--count", "50", "--size", "64k", "--op", "get",
            "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        for (final String when : List.of("before", "after"))
        {
            assertThat(run.out()).containsPattern("baseline " + when + ": loopback get 64\\.00 KiB c=1 batch=1: " +
                "[0-9.]+ GB/s").containsPattern("baseline " + when + ": loopback cold get 64\\.00 KiB c=1 batch=1: " +
                "[0-9.]+ GB/s");
        }
        final double higherCold = run.out().lines()
            .filter(l -> l.startsWith("baseline ") && l.contains(": loopback cold get "))
            .mapToDouble(l -> Double.parseDouble(l.replaceAll(".*batch=1: ([0-9.]+) GB/s.*", "$1"))).max()
            .orElseThrow();
        final String row = run.out().lines().filter(l -> l.matches("64k\\s+get\\s.*")).findFirst().orElseThrow();
        final String[] cells = row.trim().split("\\s+");
        // ... LIMIT(GB/S) %LIMIT COLD(GB/S) %COLD: the cold limit is the higher of its two runs, the share Granary's.
        assertThat(Double.parseDouble(cells[cells.length - 2])).as(row).isCloseTo(higherCold, offset(0.0005));
        final double gbps = Double.parseDouble(cells[6]);
        assertThat(Double.parseDouble(cells[cells.length - 1])).as(row)
            .isCloseTo(100 * gbps / higherCold, offset(0.1 + 0.001 * 100 * gbps / higherCold));
        assertThat(run.out()).contains("COLD(GB/S)").contains("%COLD").contains("COLD: the same sockets");
    }

    @Test
    void shouldRefuseAColdBaselineWithoutABaselineOrARegionSmallerThanAValue()
    {
        assertBadInput(CliRun.run("bench", "--local", "--baseline-cold"), "--baseline-cold needs --baseline");
        assertBadInput(CliRun.run("bench", "--local", "--baseline", "--baseline-cold", "--baseline-cold-region", "1MiB",
            "--size", "2MiB"), "--baseline-cold-region");
        assertBadInput(CliRun.run("bench", "--local", "--baseline", "--baseline-cold", "--baseline-cold-region",
            "2GiB"), "--baseline-cold-region");
    }

    @Test
    void shouldPrintJsonLinesForScripts()
    {
        final CliRun run = CliRun.run("bench", "--json", "--baseline", "--baseline-seconds", "0.2", "--local",
            "--count", "40", "--size", "4k,8k", "--op", "get", "--concurrency", "2", "--warmup-seconds", "0");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        final List<String> lines = run.out().lines().collect(Collectors.toList());
        assertThat(lines).allSatisfy(line ->
            assertThat(line).startsWith("{\"type\":\"").endsWith("}").doesNotContain("NaN"));
        final List<String> granary = lines.stream().filter(l -> l.startsWith("{\"type\":\"granary\""))
            .collect(Collectors.toList());
        assertThat(granary).hasSize(2);
        assertThat(granary.get(0)).contains("\"size\":4096", "\"phase\":\"get\"", "\"concurrency\":2", "\"batch\":1",
            "\"values\":40", "\"errors\":0", "\"valuesPerSec\":", "\"gbPerSec\":", "\"p50Ms\":", "\"p99Ms\":",
            "\"limitGbPerSec\":", "\"pctLimit\":");
        assertThat(granary.get(1)).contains("\"size\":8192");
        assertThat(lines.stream().filter(l -> l.startsWith("{\"type\":\"baseline\""))).hasSize(4)
            .allSatisfy(l -> assertThat(l).contains("\"shape\":\"get\"", "\"gbPerSec\":"))
            .filteredOn(l -> l.contains("\"when\":\"after\"")).hasSize(2);
        assertThat(run.err()).contains("verify:");
    }

    @Test
    void shouldRefuseAZeroBatch()
    {
        assertBadInput(CliRun.run("bench", "--local", "--batch", "0"), "--batch");
    }

    @Test
    void shouldRefuseANegativeWarmupDuration()
    {
        assertBadInput(CliRun.run("bench", "--local", "--warmup-seconds", "-1"), "--warmup-seconds");
    }

    @Test
    void shouldRefuseANegativeWarmupCallCount()
    {
        assertBadInput(CliRun.run("bench", "--local", "--warmup-calls", "-5"), "--warmup-calls");
    }

    @Test
    void shouldRefuseAJitQuietShareOutsideZeroToOneHundred()
    {
        assertBadInput(CliRun.run("bench", "--local", "--warmup-jit-quiet", "-1"), "--warmup-jit-quiet");
        assertBadInput(CliRun.run("bench", "--local", "--warmup-jit-quiet", "100.5"), "--warmup-jit-quiet");
    }

    @Test
    void shouldWaitForTheJitUntilItWasQuietInThreeRoundsInARow()
    {
        assertThat(BenchCommand.jitBusy(0, 0)).isFalse();
        // Asked: until the JIT was quiet in three rounds in a row.
        assertThat(BenchCommand.jitBusy(5, 0)).isTrue();
        assertThat(BenchCommand.jitBusy(5, 2)).isTrue();
        assertThat(BenchCommand.jitBusy(5, 3)).isFalse();
        assertThat(BenchCommand.JIT_QUIET_ROUNDS).isEqualTo(3);
    }

    @Test
    void shouldRefuseAReadRatioAboveOne()
    {
        assertBadInput(CliRun.run("bench", "--local", "--op", "mixed", "--read-ratio", "1.5"), "--read-ratio");
    }

    @Test
    void shouldRefuseLanesAndSlicesOutsideTheirRanges()
    {
        assertBadInput(CliRun.run("bench", "--local", "--lanes-per-peer", "0"), "--lanes-per-peer must be in 1..64");
        assertBadInput(CliRun.run("bench", "--local", "--lanes-per-peer", "65"), "--lanes-per-peer must be in 1..64");
        assertBadInput(CliRun.run("bench", "--local", "--slice-bytes", "4095"), "--slice-bytes must be in 4096..");
        assertBadInput(CliRun.run("bench", "--local", "--slice-bytes", "2g"), "--slice-bytes must be in 4096..");
    }

    @Test
    void shouldMoveSlicedValuesWithTheLanesAndSlicesGiven()
    {
        // 200 KiB values in slices of 16 KiB over 3 lanes (and over 1): every value read back is compared.
        for (final String lanes : new String[] {"3", "1"})
        {
            final CliRun run = CliRun.run("bench", "--local", "--count", "30", "--size", "200k", "--verify",
                "--warmup", "0", "--warmup-seconds", "0", "--lanes-per-peer", lanes, "--slice-bytes", "16k");
            assertThat(run.exitCode()).as(run.toString()).isZero();
            assertThat(run.out()).contains("caller-driven on, " + lanes + " lane(s) per node, slices of 16.00 KiB")
                .contains("verify: 30 of 30 values read compared byte for byte, 0 differed");
            assertThat(run.out().lines().filter(l -> l.matches("200k\\s+(put|get)\\s+30\\s+0\\s+.*"))).hasSize(2);
        }
    }

    @Test
    void shouldRefuseAnEmptySize()
    {
        assertBadInput(CliRun.run("bench", "--local", "--size", "4k,0"), "--size");
    }

    @Test
    void shouldRefuseANonPositiveBaselineDuration()
    {
        assertBadInput(CliRun.run("bench", "--local", "--baseline", "--baseline-seconds", "0"), "--baseline-seconds");
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
        assertBadInput(CliRun.run("bench", "--local", "--op", "delete"), "--op");
    }

    @Test
    void shouldChooseReadsInTheRequestedShare()
    {
        int reads = 0;
        for (int call = 0; call < 100_000; call++)
        {
            reads += BenchCommand.isRead(call, 0.9) ? 1 : 0;
        }

        assertThat(reads).isBetween(89_000, 91_000);
        assertThat(BenchCommand.isRead(12345, 0.0)).isFalse();
        assertThat(BenchCommand.isRead(12345, 1.0)).isTrue();
    }

    @Test
    void shouldWeighTheMixedLimitByTime()
    {
        // Half the bytes at 2 GB/s and half at 1 GB/s take 0.25 + 0.5 s per GB.
        assertThat(BenchCommand.mixedLimit(0.5, 2.0, 1.0)).isCloseTo(1 / 0.75, offset(1e-9));
        assertThat(BenchCommand.mixedLimit(1.0, 2.0, 1.0)).isEqualTo(2.0);
        assertThat(BenchCommand.mixedLimit(0.0, 2.0, 1.0)).isEqualTo(1.0);
    }

    @Test
    void shouldWriteValidJsonStrings()
    {
        final Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("s", "a\"b\\c\n");
        fields.put("n", 1.5);
        fields.put("nan", Double.NaN);
        fields.put("none", null);

        assertThat(BenchCommand.jsonObject(fields)).isEqualTo("{\"s\":\"a\\\"b\\\\c\\u000a\",\"n\":1.5,\"nan\":null,"
            + "\"none\":null}");
    }

    @Test
    void shouldWarmUpWithTwoGibibytesOfValuesByDefaultBetween200AndTheCount()
    {
        assertThat(BenchCommand.warmupFor(null, 1 << 20, 3000)).isEqualTo(2048);
        assertThat(BenchCommand.warmupFor(null, 4096, 1_024_000)).isEqualTo(524_288);
        assertThat(BenchCommand.warmupFor(null, 4096, 1000)).isEqualTo(1000);
        assertThat(BenchCommand.warmupFor(null, 64L << 20, 3000)).isEqualTo(200);
        assertThat(BenchCommand.warmupFor(null, 64L << 20, 10)).isEqualTo(10);
        assertThat(BenchCommand.warmupFor(7, 4096, 1000)).isEqualTo(7);
        assertThat(BenchCommand.warmupFor(0, 4096, 1000)).isZero();
    }

    @Test
    void shouldWarmUpInRoundsOfSixteenToTwoHundredFiftySixMebibytes()
    {
        assertThat(BenchCommand.warmupRoundValues(1 << 20, 2048)).isEqualTo(256);
        assertThat(BenchCommand.warmupRoundValues(1 << 20, 20)).isEqualTo(20);
        assertThat(BenchCommand.warmupRoundValues(1 << 20, 3)).isEqualTo(16);
        assertThat(BenchCommand.warmupRoundValues(4096, 524_288)).isEqualTo(65_536);
        assertThat(BenchCommand.warmupRoundValues(4096, 8)).isEqualTo(4096);
        assertThat(BenchCommand.warmupRoundValues(1L << 30, 1)).isEqualTo(1);
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

    private static void assertBadInput(final CliRun run, final String flag)
    {
        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains(flag);
    }

    @Test
    void shouldPrintWhatEachPhaseCostARunningMasterFromItsMetrics()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(64L << 20)
            .masterContext(LocalCluster.defaultMasterContext().adminPort(0)).start())
        {
            final String metrics = "127.0.0.1:" + cluster.master().adminPort();
            final CliRun run = CliRun.run("bench", "--master", cluster.masterAddress(), "--master-metrics", metrics,
                "--count", "40", "--size", "4k", "--warmup", "8", "--warmup-seconds", "0");

            assertThat(run.exitCode()).as(run.toString()).isZero();
            assertThat(run.out()).contains("its metrics at http://" + metrics + "/metrics")
                .containsPattern("master: 4k put: (\\w+ \\d+ x \\d+ us, )*PutStart 40 x \\d+ us")
                .containsPattern("master: 4k put: .*PutEnd 40 x \\d+ us")
                .containsPattern("master: 4k get: (\\w+ \\d+ x \\d+ us, )*GetReplicaList 40 x \\d+ us");
        }
    }

    @Test
    void shouldBenchOnWhenTheMasterMetricsCannotBeReadAndRefuseABadAddress()
    {
        try (LocalCluster cluster = LocalCluster.start(1, 64L << 20))
        {
            // The gRPC port speaks HTTP/2 only: a plain HTTP/1.1 GET there fails, and the bench says so and goes on.
            final String notAdmin = cluster.masterAddress();
            final CliRun run = CliRun.run("bench", "--master", cluster.masterAddress(), "--master-metrics", notAdmin,
                "--count", "10", "--size", "4k", "--warmup", "0");

            assertThat(run.exitCode()).as(run.toString()).isZero();
            assertThat(run.out().lines().filter(l -> l.matches("4k\\s+put\\s+10\\s+0\\s+.*"))).hasSize(1);
            assertThat(run.out()).contains("master: 4k put: metrics unavailable: cannot read http://" + notAdmin)
                .contains("master: 4k get: metrics unavailable: ");

            // Nothing listening there at all (a port of this test's own, closed again).
            final int closed;
            try (java.net.ServerSocket socket = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()))
            {
                closed = socket.getLocalPort();
            }
            catch (final java.io.IOException ex)
            {
                throw new java.io.UncheckedIOException(ex);
            }
            final CliRun refused = CliRun.run("bench", "--master", cluster.masterAddress(), "--master-metrics",
                "127.0.0.1:" + closed, "--count", "10", "--size", "4k", "--warmup", "0", "--op", "put");
            assertThat(refused.exitCode()).as(refused.toString()).isZero();
            assertThat(refused.out()).contains("master: 4k put: metrics unavailable: cannot read http://127.0.0.1:" +
                closed + "/metrics: ");
        }

        final CliRun bad = CliRun.run("bench", "--master-metrics", "no-port", "--count", "1");
        assertThat(bad.exitCode()).as(bad.toString()).isEqualTo(2);
        assertThat(bad.err()).contains("--master-metrics must be HOST:PORT");
        final CliRun local = CliRun.run("bench", "--local", "--master-metrics", "127.0.0.1:9003", "--count", "1");
        assertThat(local.exitCode()).as(local.toString()).isEqualTo(2);
        assertThat(local.err()).contains("--master-metrics is for a running master");
    }
}
