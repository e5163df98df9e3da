package io.granary.cli;

import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** Flags, environment variables, --config files and defaults: precedence, refusals, the resolved-settings line. */
class ConfigurationSourcesTest
{
    @TempDir
    Path dir;

    private Path file(final String name, final String text) throws IOException
    {
        final Path path = dir.resolve(name);
        Files.writeString(path, text);
        return path;
    }

    @SuppressWarnings("unchecked")
    private static <T> T parse(final Map<String, String> env, final String... args)
    {
        final CommandLine.ParseResult result = Granary.newCommandLine(args, env).parseArgs(args);
        return (T)result.subcommand().commandSpec().userObject();
    }

    private static Duration leaseTtl(final Map<String, String> env, final String... args)
    {
        final MasterCommand command = parse(env, args);
        return command.context().leaseTtl();
    }

    @Test
    void shouldTakeFlagsOverEnvironmentOverFileOverDefaults() throws IOException
    {
        final Path config = file("master.properties", "lease-ttl=1s\n# a comment\nnode-ttl = 20s\n");
        final Map<String, String> env = Map.of("GRANARY_MASTER_LEASE_TTL", "2s");

        assertThat(leaseTtl(Map.of(), "master")).isEqualTo(Duration.ofSeconds(10));
        assertThat(leaseTtl(Map.of(), "master", "--config", config.toString())).isEqualTo(Duration.ofSeconds(1));
        assertThat(leaseTtl(env, "master", "--config", config.toString())).isEqualTo(Duration.ofSeconds(2));
        assertThat(leaseTtl(env, "master", "--config=" + config, "--lease-ttl", "3s")).isEqualTo(Duration.ofSeconds(3));

        final MasterCommand command = parse(env, "master", "--config", config.toString());
        assertThat(command.context().nodeTtl()).as("a file key the environment does not set").isEqualTo(
            Duration.ofSeconds(20));
        assertThat(command.context().port()).as("untouched by either").isEqualTo(new MasterServer.Context().port());
    }

    @Test
    void shouldReadYamlFilesIncludingListsAndRequiredFlags() throws IOException
    {
        final Path config = file("node.yaml", "# storage node\nmaster: 10.0.0.5:50051\nsegment-size: 2g\n" +
            "segments: 3\npre-touch: false\nname: \"node-7\"\n");

        final NodeCommand node = parse(Map.of(), "node", "--config", config.toString());
        final StorageNode.Context ctx = node.context().conclude();
        assertThat(ctx.masterAddress()).as("a required flag given only by the file").isEqualTo("10.0.0.5:50051");
        assertThat(ctx.segmentSizeBytes()).isEqualTo(2L << 30);
        assertThat(ctx.segmentCount()).isEqualTo(3);
        assertThat(ctx.preTouch()).isFalse();
        assertThat(ctx.name()).isEqualTo("node-7");

        final Path bench = file("bench.yml", "size: [4k, 64k]\ncount: 10\n");
        final String[] args = {"bench", "--config", bench.toString()};
        final CommandLine cmd = Granary.newCommandLine(args, Map.of());
        final CommandLine.ParseResult parsed = cmd.parseArgs(args);
        final List<Long> sizes = parsed.subcommand().commandSpec().findOption("--size").getValue();
        assertThat(sizes).as("a YAML list is a comma list").containsExactly(4096L, 65536L);
        assertThat((Integer)parsed.subcommand().commandSpec().findOption("--count").getValue()).isEqualTo(10);
    }

    @Test
    void shouldFindTheFileThroughItsEnvironmentVariable() throws IOException
    {
        final Path config = file("master.yaml", "lease-ttl: 750ms\n");

        assertThat(leaseTtl(Map.of("GRANARY_MASTER_CONFIG", config.toString()), "master"))
            .isEqualTo(Duration.ofMillis(750));
    }

    @Test
    void shouldRefuseAnUnknownFileKeyWithASuggestion() throws IOException
    {
        final Path config = file("master.properties", "lease-tl=1s\n");

        final CliRun run = CliRun.run(Map.of(), "master", "--config", config.toString());

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("unknown key 'lease-tl' in " + config)
            .contains("did you mean 'lease-ttl'?").doesNotContain("\tat ");
        assertThat(run.out()).doesNotContain("ready");
    }

    @Test
    void shouldRefuseAnUnknownEnvironmentVariableOfTheCommand()
    {
        final CliRun run = CliRun.run(Map.of("GRANARY_MASTER_LEASE_TL", "1s", "GRANARY_NODE_WHATEVER", "x",
            "GRANARY_JAVA_OPTS", "-Xmx1g"), "master", "--port", "-5");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("unknown environment variable GRANARY_MASTER_LEASE_TL")
            .contains("did you mean 'lease-ttl'?");
    }

    @Test
    void shouldNameTheSourceOfABadValue() throws IOException
    {
        final CliRun fromEnv = CliRun.run(Map.of("GRANARY_MASTER_LEASE_TTL", "10 parsecs"), "master");
        assertThat(fromEnv.exitCode()).as(fromEnv.toString()).isEqualTo(2);
        assertThat(fromEnv.err()).contains("--lease-ttl").contains("bad duration unit")
            .contains("(from environment variable GRANARY_MASTER_LEASE_TTL)");

        final Path config = file("master.properties", "soft-pin-default-ttl=25h\n");
        final CliRun fromFile = CliRun.run(Map.of(), "master", "--config", config.toString());
        assertThat(fromFile.exitCode()).as(fromFile.toString()).isEqualTo(2);
        assertThat(fromFile.err()).startsWith("error: --soft-pin-default-ttl")
            .contains("(from key 'soft-pin-default-ttl' in " + config + ")");

        final CliRun overridden = CliRun.run(Map.of("GRANARY_STAT_TIMEOUT", "soon"), "stat", "--timeout", "1s",
            "--master", "nowhere");
        assertThat(overridden.err()).as("a flag overrides a bad variable").doesNotContain("soon")
            .contains("--master must be host:port");
    }

    @Test
    void shouldRefuseAMissingOrMalformedFile() throws IOException
    {
        final CliRun missing = CliRun.run(Map.of(), "master", "--config", dir.resolve("nope.yaml").toString());
        assertThat(missing.exitCode()).isEqualTo(2);
        assertThat(missing.err()).contains("cannot read --config").contains("nope.yaml");

        final Path broken = file("broken.yaml", "lease-ttl: [1s\n");
        final CliRun malformed = CliRun.run(Map.of(), "master", "--config", broken.toString());
        assertThat(malformed.exitCode()).isEqualTo(2);
        assertThat(malformed.err()).contains("is not valid YAML");

        final Path nested = file("nested.yaml", "master:\n  lease-ttl: 1s\n");
        final CliRun map = CliRun.run(Map.of(), "node", "--config", nested.toString());
        assertThat(map.exitCode()).isEqualTo(2);
        assertThat(map.err()).contains("key 'master'").contains("not a map");

        final Path duplicate = file("dup.yaml", "lease-ttl: 1s\nlease-ttl: 2s\n");
        assertThat(CliRun.run(Map.of(), "master", "--config", duplicate.toString()).err()).contains("duplicate key");
    }

    @Test
    void shouldDescribeTheResolvedConfigurationWithSources() throws IOException
    {
        final Path config = file("master.properties", "node-ttl=20s\n");
        final String[] args = {"master", "--config", config.toString(), "--port", "0"};
        final CommandLine cmd = Granary.newCommandLine(args, Map.of("GRANARY_MASTER_LEASE_TTL", "2s"));
        cmd.parseArgs(args);
        final CommandLine.Model.CommandSpec spec = cmd.getSubcommands().get("master").getCommandSpec();

        final String described = ConfigDefaults.of(spec).describe(spec);

        assertThat(described)
            .contains("lease-ttl=2s (env GRANARY_MASTER_LEASE_TTL)")
            .contains("node-ttl=20s (file)")
            .contains("port=0 (flag)")
            .contains("admin-port=9003 (default)")
            .contains("log-format=text (default)")
            .contains("list-keys-limit=10000 (default)")
            .endsWith("[config file " + config + "]")
            .doesNotContain("help=").doesNotContain("config=");
    }

    @Test
    void shouldDeriveEnvironmentNamesAndKeysFromFlagNames()
    {
        assertThat(ConfigDefaults.envName("master", "--lease-ttl")).isEqualTo("GRANARY_MASTER_LEASE_TTL");
        assertThat(ConfigDefaults.envName("node", "--pre-touch")).isEqualTo("GRANARY_NODE_PRE_TOUCH");
        assertThat(ConfigDefaults.key("--allow-evict-soft-pinned")).isEqualTo("allow-evict-soft-pinned");
        assertThat(ConfigDefaults.configPath(new String[]{"master", "--", "--config", "x"})).isNull();
        assertThat(ConfigDefaults.configPath(new String[]{"master", "--config=a.yaml"})).isEqualTo("a.yaml");
    }

    /** A command with secrets, standing for flags other commands will grow (token keys, TLS passwords). */
    @Command(name = "secretive")
    static final class Secretive implements Runnable
    {
        @Option(names = "--token-key-file")
        String tokenKeyFile;

        @Option(names = "--tls-key-password")
        String password;

        @Option(names = "--client-secret")
        String secret;

        @Option(names = "--name", defaultValue = "visible")
        String name;

        @Override
        public void run()
        {
        }
    }

    @Test
    void shouldMaskSecretsAndConfigureAnyCommandWithoutCodePerFlag() throws IOException
    {
        final Path config = file("secretive.properties", "tls-key-password=hunter2\n");
        final Map<String, String> env = new HashMap<>(Map.of("GRANARY_SECRETIVE_TOKEN_KEY_FILE", "/etc/granary/key"));
        final String[] args = {"secretive", "--config", config.toString(), "--client-secret", "s3cr3t"};
        final CommandLine cmd = new CommandLine(new Secretive());
        ConfigDefaults.install(cmd, "secretive", env, args);
        cmd.parseArgs(List.of(args).subList(1, args.length).toArray(new String[0]));
        final Secretive secretive = cmd.getCommand();

        assertThat(secretive.tokenKeyFile).isEqualTo("/etc/granary/key");
        assertThat(secretive.password).isEqualTo("hunter2");
        assertThat(secretive.secret).isEqualTo("s3cr3t");
        final String described = ConfigDefaults.of(cmd.getCommandSpec()).describe(cmd.getCommandSpec());
        assertThat(described)
            .contains("token-key-file=**** (env GRANARY_SECRETIVE_TOKEN_KEY_FILE)")
            .contains("tls-key-password=**** (file)")
            .contains("client-secret=**** (flag)")
            .contains("name=visible (default)")
            .doesNotContain("hunter2").doesNotContain("s3cr3t").doesNotContain("/etc/granary/key");
    }
}
