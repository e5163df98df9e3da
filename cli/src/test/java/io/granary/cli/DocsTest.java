package io.granary.cli;

import io.granary.node.Configuration;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** docs/configuration.md must keep up with the flags: a new flag without documentation fails here. */
class DocsTest
{
    private static final Path CONFIGURATION_MD = Path.of("..", "docs", "configuration.md");

    private static String configurationDoc() throws IOException
    {
        assertThat(CONFIGURATION_MD).as("docs/configuration.md next to the cli module").exists();
        return Files.readString(CONFIGURATION_MD);
    }

    @Test
    void shouldDocumentEveryMasterFlag() throws IOException, IllegalAccessException
    {
        final String doc = configurationDoc();

        for (final String flag : FlagParsingTest.masterFlags())
        {
            assertThat(doc).as("docs/configuration.md documents granary master " + flag).contains("`" + flag);
        }
    }

    @Test
    void shouldDocumentEveryFlagOfEveryCommand() throws IOException
    {
        final String doc = configurationDoc();

        for (final String command : new String[]{"master", "node", "put", "get", "rm", "ls", "stat", "demo", "bench"})
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
    void shouldDocumentEveryStorageNodeSystemProperty() throws IOException, IllegalAccessException
    {
        final String doc = configurationDoc();

        for (final Field field : Configuration.class.getFields())
        {
            if (Modifier.isStatic(field.getModifiers()) && field.getName().endsWith("_PROP_NAME"))
            {
                final Object property = field.get(null);
                assertThat(doc).as("docs/configuration.md documents " + property).contains("`" + property);
            }
        }
    }
}
