package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.client.KeyInfo;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.util.List;

/** {@code granary ls [--regex R] [--limit N]}: lists keys with size, status, replicas, lease, pins and group. */
@Command(
    name = "ls",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "List the tenant's keys, sorted: size, status, replicas, read lease left, pins, eviction group. "
            + "Listing takes no lease."})
final class LsCommand extends ClientCommand
{
    @Option(names = "--regex", paramLabel = "REGEX", description = "Only keys matching REGEX (Java syntax, whole key).")
    private String regex;

    @Option(names = "--limit", paramLabel = "N", defaultValue = "1000",
        description = "Show at most N keys (the master also caps a listing at its --list-keys-limit).")
    private int limit;

    @Override
    int run(final GranaryClient client, final PrintWriter out)
    {
        if (limit < 1 || limit == Integer.MAX_VALUE)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--limit': must be in 1.." + (Integer.MAX_VALUE - 1) + ", was " + limit);
        }
        // One more than shown tells whether there are more.
        final List<KeyInfo> keys = client.listKeys(regex, limit + 1);
        final boolean truncated = keys.size() > limit;
        final int shown = Math.min(limit, keys.size());
        final Table table = new Table("KEY", ">SIZE", "STATUS", ">REPLICAS", ">LEASE-LEFT", "PINS", "GROUP");
        for (int i = 0; i < shown; i++)
        {
            final KeyInfo k = keys.get(i);
            table.row(k.key(), k.valueLength(), k.status(), k.replicas(),
                k.leaseRemainingMs() > 0 ? Converters.humanDuration(k.leaseRemainingMs()) : "-",
                pins(k), k.groupId());
        }
        if (shown > 0)
        {
            table.print(out, "");
        }
        if (truncated)
        {
            out.println(shown + " keys shown; more match (narrow with --regex or raise --limit)");
        }
        else
        {
            out.println(shown + (shown == 1 ? " key" : " keys") + (regex == null ? "" : " matching '" + regex + "'"));
        }
        return 0;
    }

    private static String pins(final KeyInfo k)
    {
        if (k.hardPinned() && k.softPinned())
        {
            return "hard,soft";
        }
        return k.hardPinned() ? "hard" : k.softPinned() ? "soft" : "-";
    }
}
