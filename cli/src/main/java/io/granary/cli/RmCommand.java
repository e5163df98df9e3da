package io.granary.cli;

import io.granary.client.GranaryClient;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;

/** {@code granary rm KEY [--force] | --regex R | --all}: removes objects. */
@Command(
    name = "rm",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Remove KEY, every key matching --regex, or --all keys of the tenant.",
        "A leased key (read within the master's --lease-ttl) is refused with OBJECT_HAS_LEASE unless --force; "
            + "--regex and --all skip leased keys and report how many were removed."})
final class RmCommand extends ClientCommand
{
    @Parameters(index = "0", arity = "0..1", paramLabel = "KEY", description = "The key to remove.")
    private String key;

    @Option(names = "--force", description = "Remove KEY even while it is leased.")
    private boolean force;

    @Option(names = "--regex", paramLabel = "REGEX", description = "Remove the unleased keys matching REGEX "
        + "(Java syntax, whole key).")
    private String regex;

    @Option(names = "--all", description = "Remove every unleased key of the tenant.")
    private boolean all;

    @Override
    int run(final GranaryClient client, final PrintWriter out)
    {
        final int modes = (key != null ? 1 : 0) + (regex != null ? 1 : 0) + (all ? 1 : 0);
        if (modes != 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "give exactly one of KEY, --regex REGEX or --all");
        }
        if (force && key == null)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--force applies to a single KEY only");
        }
        if (key != null)
        {
            client.remove(key, force);
            out.println("removed \"" + key + "\"");
        }
        else if (regex != null)
        {
            final long removed = client.removeByRegex(regex);
            out.println("removed " + removed + (removed == 1 ? " key" : " keys") + " matching '" + regex +
                "' (leased keys are skipped)");
        }
        else
        {
            final long removed = client.removeAll();
            out.println("removed " + removed + (removed == 1 ? " key" : " keys") + " of tenant " +
                clientOptions.tenant + " (leased keys are skipped)");
        }
        return 0;
    }
}
