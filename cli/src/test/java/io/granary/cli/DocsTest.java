package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.node.Configuration;
import io.granary.node.StorageNode;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The docs must keep up with the code: a flag, environment variable, client file key or metric without
 * documentation fails here.
 */
class DocsTest
{
    private static final Path CONFIGURATION_MD = Path.of("..", "docs", "configuration.md");
    private static final Path OPERATIONS_MD = Path.of("..", "docs", "operations.md");
    private static final String[] COMMANDS = {"master", "node", "put", "get", "rm", "ls", "stat", "demo", "bench", "events"};

    private static String read(final Path doc) throws IOException
    {
        assertThat(doc).as(doc + " next to the cli module").exists();
        return Files.readString(doc);
    }

    @Test
    void shouldDocumentEveryMasterFlag() throws IOException, IllegalAccessException
    {
        final String doc = read(CONFIGURATION_MD);

        for (final String flag : FlagParsingTest.masterFlags())
        {
            assertThat(doc).as("docs/configuration.md documents granary master " + flag).contains("`" + flag);
        }
    }

    @Test
    void shouldDocumentEveryFlagOfEveryCommand() throws IOException
    {
        final String doc = read(CONFIGURATION_MD);

        for (final String command : COMMANDS)
        {
            final CommandLine cmd = Granary.newCommandLine().getSubcommands().get(command);
            for (final OptionSpec option : cmd.getCommandSpec().options())
            {
                if (option.usageHelp() || option.versionHelp())
                {
                    continue;
                }
                assertThat(doc).as("docs/configuration.md documents granary " + command + " " + option.longestName())
                    .contains("`" + option.longestName());
            }
        }
    }

    @Test
    void shouldDocumentTheEnvironmentVariableOfEveryFlag() throws IOException
    {
        final String doc = read(CONFIGURATION_MD);
        final Set<String> missing = new TreeSet<>();

        for (final String command : COMMANDS)
        {
            final CommandLine cmd = Granary.newCommandLine().getSubcommands().get(command);
            for (final OptionSpec option : cmd.getCommandSpec().options())
            {
                if (!option.usageHelp() && !option.versionHelp())
                {
                    final String variable = ConfigDefaults.envName(command, option.longestName());
                    if (!doc.contains("`" + variable + "`"))
                    {
                        missing.add(variable);
                    }
                }
            }
        }
        assertThat(missing).as("environment variables docs/configuration.md does not name").isEmpty();
        assertThat(doc).as("the naming rule").contains("GRANARY_<COMMAND>_<FLAG>")
            .contains("flags > environment > file > defaults");
    }

    @Test
    void shouldDocumentEveryClientFileKeyAndBuilderSetting() throws IOException
    {
        final String doc = read(CONFIGURATION_MD);

        for (final String key : ClientConfig.fileKeys())
        {
            assertThat(doc).as("docs/configuration.md documents the client file key " + key)
                .contains("| `" + key + "`");
        }
        assertThat(doc).contains("`meterRegistry(MeterRegistry)`");
    }

    @Test
    void shouldDocumentEveryStorageNodeSystemProperty() throws IOException, IllegalAccessException
    {
        final String doc = read(CONFIGURATION_MD);

        for (final Field field : Configuration.class.getFields())
        {
            if (Modifier.isStatic(field.getModifiers()) && field.getName().endsWith("_PROP_NAME"))
            {
                final Object property = field.get(null);
                assertThat(doc).as("docs/configuration.md documents " + property).contains("`" + property);
            }
        }
    }

    @Test
    void shouldDocumentEveryMetricTheMasterNodesAndClientsExport() throws IOException
    {
        final String doc = read(OPERATIONS_MD);
        final Set<String> families = new TreeSet<>();
        final PrometheusMeterRegistry clientMeters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(4L << 20).start())
        {
            final GranaryClient client = cluster.newClient(cluster.clientConfig().meterRegistry(clientMeters).build());
            client.put("docs/k", new byte[16]);
            client.get("docs/k");
            families.addAll(granaryFamilies(cluster.master().scrapeMetrics()));
            for (final StorageNode node : cluster.nodes())
            {
                families.addAll(granaryFamilies(node.scrapeMetrics()));
            }
            families.addAll(granaryFamilies(clientMeters.scrape()));
        }
        assertThat(families).hasSizeGreaterThan(40);
        final Set<String> missing = new TreeSet<>();
        for (final String family : families)
        {
            if (!doc.contains("`" + family + "`"))
            {
                missing.add(family);
            }
        }
        assertThat(missing).as("metrics docs/operations.md does not name").isEmpty();
    }

    /** The names in "# TYPE name kind" lines that start with granary_. */
    private static Set<String> granaryFamilies(final String page)
    {
        final Set<String> names = new TreeSet<>();
        final Matcher m = Pattern.compile("(?m)^# TYPE (granary_\\S+) (\\S+)$").matcher(page);
        while (m.find())
        {
            names.add(m.group(1) + ("counter".equals(m.group(2)) && !m.group(1).endsWith("_total") ? "_total" : ""));
        }
        return names;
    }
}
