package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.master.Configuration;
import io.granary.master.MasterServer;
import io.granary.master.evict.EvictionPolicy;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class FlagParsingTest
{
    /** "--lease-ttl", ... : every master setting Configuration declares. */
    static List<String> masterFlags() throws IllegalAccessException
    {
        final List<String> flags = new ArrayList<>();
        for (final Field field : Configuration.class.getFields())
        {
            if (Modifier.isStatic(field.getModifiers()) && field.getName().endsWith("_PROP"))
            {
                flags.add("--" + field.get(null));
            }
        }
        return flags;
    }

    /** The command object of the subcommand {@code args} select, with {@code args} parsed into it. */
    @SuppressWarnings("unchecked")
    static <T> T parse(final String... args)
    {
        final CommandLine.ParseResult result = Granary.newCommandLine().parseArgs(args);
        return (T)result.subcommand().commandSpec().userObject();
    }

    @Test
    void shouldOfferEveryMasterSettingAsAFlagInHelp() throws IllegalAccessException
    {
        final CliRun run = CliRun.run("master", "--help");

        assertThat(run.exitCode()).isZero();
        assertThat(masterFlags()).hasSizeGreaterThanOrEqualTo(16);
        for (final String flag : masterFlags())
        {
            assertThat(run.out()).as("help of granary master lists " + flag).contains(flag + "=");
        }
    }

    @Test
    void shouldTakeEveryMasterDefaultFromConfiguration() throws IllegalAccessException
    {
        final MasterCommand command = parse("master");
        final MasterServer.Context ctx = command.context();
        final MasterServer.Context defaults = new MasterServer.Context();

        assertThat(MasterCommand.Defaults.fromConfiguration().keySet())
            .containsExactlyInAnyOrderElementsOf(masterFlags());
        assertThat(ctx.host()).isEqualTo(defaults.host());
        assertThat(ctx.port()).isEqualTo(defaults.port());
        assertThat(ctx.adminPort()).isEqualTo(defaults.adminPort());
        assertThat(ctx.leaseTtl()).isEqualTo(defaults.leaseTtl());
        assertThat(ctx.softPinDefaultTtl()).isEqualTo(defaults.softPinDefaultTtl());
        assertThat(ctx.softPinMaxTtl()).isEqualTo(defaults.softPinMaxTtl());
        assertThat(ctx.allowEvictSoftPinned()).isEqualTo(defaults.allowEvictSoftPinned());
        assertThat(ctx.evictionHighWatermark()).isEqualTo(defaults.evictionHighWatermark());
        assertThat(ctx.evictionRatio()).isEqualTo(defaults.evictionRatio());
        assertThat(ctx.evictionPolicy()).isEqualTo(EvictionPolicy.OLDEST_LEASE).isEqualTo(defaults.evictionPolicy());
        assertThat(ctx.nodeTtl()).isEqualTo(defaults.nodeTtl());
        assertThat(ctx.heartbeatInterval()).isEqualTo(defaults.heartbeatInterval());
        assertThat(ctx.putDiscardTimeout()).isEqualTo(defaults.putDiscardTimeout());
        assertThat(ctx.putReleaseTimeout()).isEqualTo(defaults.putReleaseTimeout());
        assertThat(ctx.metadataShards()).isEqualTo(defaults.metadataShards());
        assertThat(ctx.maxObjects()).isEqualTo(defaults.maxObjects()).isZero();
        assertThat(ctx.tenantQuotas()).isEqualTo(defaults.tenantQuotas()).isEmpty();
        assertThat(ctx.defaultTenantQuota()).isEqualTo(defaults.defaultTenantQuota()).isZero();
        assertThat(ctx.allocationGranularity()).isEqualTo(defaults.allocationGranularity());
        assertThat(ctx.listKeysLimit()).isEqualTo(defaults.listKeysLimit());
    }

    @Test
    void shouldApplyMasterFlagsInTheIssuesUnits()
    {
        final MasterCommand command = parse("master", "--port", "50052", "--admin-port", "-1",
            "--lease-ttl", "500ms", "--soft-pin-default-ttl", "30m", "--soft-pin-max-ttl", "24h",
            "--allow-evict-soft-pinned", "false", "--eviction-high-watermark", "0.8", "--eviction-ratio", "0.1",
            "--node-ttl", "10s", "--put-discard-timeout", "30s", "--put-release-timeout", "10m",
            "--eviction-policy", "prefix-leaf-first", "--max-objects", "250000000");
        final MasterServer.Context ctx = command.context().conclude();

        assertThat(ctx.maxObjects()).isEqualTo(250_000_000L);
        assertThat(ctx.effectiveMaxObjects()).isEqualTo(250_000_000L);

        assertThat(ctx.evictionPolicy()).isEqualTo(EvictionPolicy.PREFIX_LEAF_FIRST);
        assertThat(ctx.port()).isEqualTo(50052);
        assertThat(ctx.adminPort()).isEqualTo(-1);
        assertThat(ctx.leaseTtl()).isEqualTo(Duration.ofMillis(500));
        assertThat(ctx.allowEvictSoftPinned()).isFalse();
        assertThat(ctx.evictionHighWatermark()).isEqualTo(0.8);
        assertThat(ctx.evictionRatio()).isEqualTo(0.1);
        assertThat(ctx.putReleaseTimeout()).isEqualTo(Duration.ofMinutes(10));
    }

    @Test
    void shouldRefuseAMalformedDurationNamingTheFlagWithoutAStackTrace()
    {
        final CliRun run = CliRun.run("master", "--lease-ttl", "10 parsecs");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("--lease-ttl").contains("bad duration unit");
        assertThat(run.err()).doesNotContain("\tat ").doesNotContain("Exception");
        assertThat(run.out()).isEmpty();
    }

    @Test
    void shouldRefuseANegativeOrMalformedObjectBudgetNamingTheFlag()
    {
        final CliRun negative = CliRun.run("master", "--max-objects", "-5", "--port", "0", "--lookup-port", "-1",
            "--admin-port", "-1");
        final CliRun malformed = CliRun.run("master", "--max-objects", "lots");

        assertThat(negative.exitCode()).as(negative.toString()).isNotZero();
        assertThat(negative.err()).contains("--max-objects must be 0 (from the heap) or positive, was -5")
            .doesNotContain("\tat ");
        assertThat(malformed.exitCode()).as(malformed.toString()).isEqualTo(2);
        assertThat(malformed.err()).contains("--max-objects").contains("lots").doesNotContain("\tat ");
    }

    @Test
    void shouldReadTenantQuotasAndRefuseMalformedOnesNamingTheFlag()
    {
        final MasterCommand command = parse("master", "--tenant-quotas", "team-a=64g, batch.jobs=512m",
            "--default-tenant-quota", "1g");
        final MasterServer.Context ctx = command.context().conclude();
        assertThat(ctx.tenantQuotas()).containsExactlyInAnyOrderEntriesOf(
            java.util.Map.of("team-a", 64L << 30, "batch.jobs", 512L << 20));
        assertThat(ctx.defaultTenantQuota()).isEqualTo(1L << 30);

        final String[][] bad = {
            {"--tenant-quotas", "team-a"}, {"--tenant-quotas", "team-a=64g,=1g"}, {"--tenant-quotas", "team-a=lots"},
            {"--tenant-quotas", "a=1g,a=2g"}, {"--default-tenant-quota", "-1"}};
        for (final String[] flags : bad)
        {
            final CliRun run = CliRun.run("master", flags[0], flags[1]);
            assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
            assertThat(run.err()).as(flags[1]).contains(flags[0]).doesNotContain("\tat ");
        }
        final CliRun badTenant = CliRun.run("master", "--tenant-quotas", "no spaces=1g", "--port", "0",
            "--lookup-port", "-1", "--admin-port", "-1");
        assertThat(badTenant.exitCode()).as(badTenant.toString()).isNotZero();
        assertThat(badTenant.err()).contains("--tenant-quotas names an invalid tenant 'no spaces'")
            .doesNotContain("\tat ");
        final CliRun zero = CliRun.run("master", "--tenant-quotas", "team-a=0", "--port", "0", "--lookup-port", "-1",
            "--admin-port", "-1");
        assertThat(zero.err()).contains("--tenant-quotas must give tenant 'team-a' a quota > 0 bytes, was 0");
    }

    @Test
    void shouldRefuseAnUnknownEvictionPolicyNamingTheChoices()
    {
        final CliRun run = CliRun.run("master", "--eviction-policy", "lfu");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("--eviction-policy").contains("oldest-lease or prefix-leaf-first")
            .doesNotContain("\tat ");
        assertThat(run.out()).isEmpty();
    }

    @Test
    void shouldRefuseAMalformedSizeNamingTheFlag()
    {
        final CliRun run = CliRun.run("node", "--master", "127.0.0.1:1", "--segment-size", "lots");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("--segment-size").contains("bad size 'lots'").doesNotContain("\tat ");
    }

    @Test
    void shouldRefuseAnUnknownFlagWithExitCodeTwo()
    {
        final CliRun run = CliRun.run("master", "--lease-tll", "10s");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("Unknown option").contains("--lease-tll").contains("--lease-ttl");
    }

    @Test
    void shouldRefuseAnUnknownCommand()
    {
        final CliRun run = CliRun.run("mastre");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("mastre").contains("master");
    }

    @Test
    void shouldReportTheContextRuleASoftPinDefaultAboveTheMaxBreaks()
    {
        final CliRun run = CliRun.run("master", "--soft-pin-default-ttl", "25h");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err().strip()).startsWith("error: --soft-pin-default-ttl").contains("--soft-pin-max-ttl");
        assertThat(run.err().strip().lines()).hasSize(1);
        assertThat(run.out()).doesNotContain("ready");
    }

    @Test
    void shouldNameTheNodeFlagInASettingsError()
    {
        final CliRun run = CliRun.run("node", "--master", "127.0.0.1:1", "--segment-size", "4k");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err().strip()).startsWith("error: --segment-size must be in");
    }

    @Test
    void shouldRequireTheMasterAddressOfANode()
    {
        final CliRun run = CliRun.run("node");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("--master");
    }

    @Test
    void shouldRefuseAnUnknownLogLevel()
    {
        final CliRun run = CliRun.run("master", "--log-level", "loud", "--soft-pin-default-ttl", "25h");

        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("--log-level").contains("loud");
    }

    @Test
    void shouldApplyNodeFlagsToTheNodeContext()
    {
        final NodeCommand command = parse("node", "--master", "10.0.0.1:50051", "--segment-size", "2g",
            "--port", "7000", "--name", "n1", "--heartbeat-interval", "500ms", "--max-frame", "4m", "--pre-touch");
        final StorageNode.Context ctx = command.context().conclude();

        assertThat(ctx.masterAddress()).isEqualTo("10.0.0.1:50051");
        assertThat(ctx.segmentSizeBytes()).isEqualTo(2L << 30);
        assertThat(ctx.transferPort()).isEqualTo(7000);
        assertThat(ctx.name()).isEqualTo("n1");
        assertThat(ctx.heartbeatIntervalMs()).isEqualTo(500);
        assertThat(ctx.maxFrameBytes()).isEqualTo(4 << 20);
        assertThat(ctx.preTouch()).isTrue();
        assertThat(ctx.segmentCount()).isEqualTo(1);
        assertThat(ctx.ioThreads()).isEqualTo(io.granary.node.Configuration.IO_THREADS_DEFAULT);
    }

    @Test
    void shouldPreTouchByDefaultAndLetItBeTurnedOff()
    {
        final NodeCommand byDefault = parse("node", "--master", "10.0.0.1:50051");
        final NodeCommand off = parse("node", "--master", "10.0.0.1:50051", "--pre-touch=false");
        final NodeCommand offSpaced = parse("node", "--master", "10.0.0.1:50051", "--pre-touch", "false");
        assertThat(byDefault.context().conclude().preTouch()).isTrue();
        assertThat(off.context().conclude().preTouch()).isFalse();
        assertThat(offSpaced.context().conclude().preTouch()).isFalse();
    }

    @Test
    void shouldAdviseHugePagesWhereAvailableByDefaultAndTakeTheFlag()
    {
        final NodeCommand byDefault = parse("node", "--master", "10.0.0.1:50051");
        final NodeCommand off = parse("node", "--master", "10.0.0.1:50051", "--huge-pages", "OFF");
        final NodeCommand on = parse("node", "--master", "10.0.0.1:50051", "--huge-pages", "on");
        assertThat(byDefault.context().conclude().hugePages()).isEqualTo(io.granary.node.segment.HugePages.AUTO);
        assertThat(off.context().conclude().hugePages()).isEqualTo(io.granary.node.segment.HugePages.OFF);
        assertThat(on.context().conclude().hugePages()).isEqualTo(io.granary.node.segment.HugePages.ON);

        final CliRun run = CliRun.run("node", "--master", "127.0.0.1:1", "--huge-pages", "sometimes");
        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("--huge-pages").contains("auto, on or off").contains("'sometimes'")
            .doesNotContain("\tat ");
    }

    @Test
    void shouldDefaultTheClientTimeoutToTheClientLibrarysDefault()
    {
        final ClientCommand command = parse("get", "some-key");

        assertThat(command.clientOptions.timeout).isEqualTo(ClientConfig.DEFAULT_RPC_TIMEOUT);
        assertThat(command.clientOptions.master).isEqualTo("127.0.0.1:" + Configuration.PORT_DEFAULT);
    }

    @Test
    void shouldRefuseABadMasterAddressNamingTheFlag()
    {
        final CliRun run = CliRun.run("stat", "--master", "nowhere");

        assertThat(run.exitCode()).as(run.toString()).isEqualTo(2);
        assertThat(run.err()).contains("--master must be host:port");
    }

    @Test
    void shouldRenderTheHelpOfEveryCommandWithoutPicocliWarnings()
    {
        final PrintStream stderr = System.err;
        final ByteArrayOutputStream warnings = new ByteArrayOutputStream();
        System.setErr(new PrintStream(warnings, true, StandardCharsets.UTF_8));
        try
        {
            for (final String command : Granary.newCommandLine().getSubcommands().keySet())
            {
                final CliRun run = CliRun.run(command, "--help");
                assertThat(run.exitCode()).as(command).isZero();
                assertThat(run.out()).as(command).contains("Usage: granary " + command);
            }
        }
        finally
        {
            System.setErr(stderr);
        }
        assertThat(warnings.toString(StandardCharsets.UTF_8)).doesNotContain("picocli");
    }

    @Test
    void shouldPrintTheVersion()
    {
        final CliRun run = CliRun.run("--version");

        assertThat(run.exitCode()).isZero();
        assertThat(run.out()).startsWith("granary " + MasterServer.VERSION);
    }
}
