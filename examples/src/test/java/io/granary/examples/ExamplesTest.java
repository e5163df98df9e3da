package io.granary.examples;

import io.granary.cli.Granary;
import io.granary.cli.LocalCluster;
import io.granary.node.StorageNode;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.Yaml;
import picocli.CommandLine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

class ExamplesTest
{
    /** The examples module's own directory: Maven runs tests there. */
    private static final Path EXAMPLES = Path.of("");

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

    @Test
    void shouldFindTheWholeFirstBlockAndCountTheHoleBehindItWithTheHelper()
    {
        final PrefixLookupExample.HelperResult result = PrefixLookupExample.runWithHelper(cluster.masterAddress());

        assertThat(result.hitTokens()).isEqualTo(128);
        assertThat(result.holes()).isEqualTo(1);
        assertThat(result.recomputedTokens()).isEqualTo(128);
    }

    @Test
    void shouldLoadTheStoredPrefixInOneBatch()
    {
        final PrefixBatchLoadExample.Result result = PrefixBatchLoadExample.run(cluster.masterAddress());

        assertThat(result.storedBlocks()).isEqualTo(6);
        assertThat(result.loadedBlocks()).isEqualTo(6);
        assertThat(result.loadedBytes())
            .isEqualTo(6L * PrefixBatchLoadExample.RANKS * PrefixBatchLoadExample.PAGE_BYTES);
        assertThat(result.savedBlocks()).as("only the 4 blocks the lookup did not find").isEqualTo(4);
    }

    @Test
    void shouldRunTheConfiguredClientExampleFromTheShippedFile()
    {
        final SimpleMeterRegistry meters = new SimpleMeterRegistry();

        final String report = ConfiguredClientExample.run(EXAMPLES.resolve("config/client.properties"),
            cluster.masterAddress(), meters);

        assertThat(report).contains("tenant llama-3-70b").contains("puts 10, gets 10, bytes written 9000, " +
            "bytes read 9000");
        assertThat(meters.get("granary.client.op").tag("op", "put").timer().totalTime(
            java.util.concurrent.TimeUnit.NANOSECONDS)).isPositive();
    }

    @Test
    void shouldParseTheShippedServiceConfigurationFiles()
    {
        final String[] master = {"master", "--config", EXAMPLES.resolve("config/master.yaml").toString()};
        final CommandLine.ParseResult parsedMaster = Granary.newCommandLine(master, Map.of()).parseArgs(master);
        final CommandLine.Model.CommandSpec masterSpec = parsedMaster.subcommand().commandSpec();
        assertThat((Duration)masterSpec.findOption("--lease-ttl").getValue()).isEqualTo(Duration.ofSeconds(10));
        assertThat((String)masterSpec.findOption("--host").getValue()).isEqualTo("0.0.0.0");
        assertThat((String)masterSpec.findOption("--log-format").getValue()).isEqualTo("json");

        final String[] node = {"node", "--config", EXAMPLES.resolve("config/node.properties").toString()};
        final CommandLine.ParseResult parsedNode = Granary.newCommandLine(node, Map.of()).parseArgs(node);
        final CommandLine.Model.CommandSpec nodeSpec = parsedNode.subcommand().commandSpec();
        assertThat((String)nodeSpec.findOption("--master").getValue()).isEqualTo("10.0.0.5:50051");
        assertThat((Long)nodeSpec.findOption("--segment-size").getValue()).isEqualTo(64L << 30);
        assertThat((Integer)nodeSpec.findOption("--admin-port").getValue()).isEqualTo(9091);
    }

    @Test
    @SuppressWarnings("unchecked")
    void shouldScrapeTheAdminPortsAndAlertOnlyOnMetricsThatExist() throws IOException
    {
        final Map<String, Object> prometheus =
            new Yaml().load(Files.readString(EXAMPLES.resolve("prometheus/prometheus.yml")));
        final List<Map<String, Object>> jobs = (List<Map<String, Object>>)prometheus.get("scrape_configs");
        assertThat(jobs).extracting(job -> job.get("job_name")).containsExactly("granary-master", "granary-nodes");
        assertThat(jobs).allSatisfy(job -> assertThat(job.get("metrics_path")).isEqualTo("/metrics"));
        assertThat(jobs.get(0).toString()).contains(":9003");
        assertThat(jobs.get(1).toString()).contains(":9091");

        final String alerts = Files.readString(EXAMPLES.resolve("prometheus/granary-alerts.yml"));
        assertThat((Map<String, Object>)new Yaml().load(alerts)).containsKey("groups");
        final StringBuilder scraped = new StringBuilder(cluster.master().scrapeMetrics());
        for (final StorageNode node : cluster.nodes())
        {
            scraped.append(node.scrapeMetrics());
        }
        final Matcher names = Pattern.compile("granary_[a-z_]+").matcher(alerts);
        int checked = 0;
        while (names.find())
        {
            assertThat(scraped.toString()).as("metric " + names.group() + " in the alert rules")
                .containsPattern("(?m)^" + names.group() + "[{ ]");
            checked++;
        }
        assertThat(checked).isGreaterThan(5);
    }
}
