package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.util.concurrent.Callable;

/**
 * A command that connects to a running master, does one thing and exits: 0 when it worked, 1 with one
 * {@code error: CODE: message} line when the store refused or could not be reached.
 */
abstract class ClientCommand implements Callable<Integer>
{
    @Spec
    CommandSpec spec;

    @Mixin
    ClientOptions clientOptions;

    @Override
    public final Integer call() throws Exception
    {
        Logging.setLevel(spec, clientOptions.logLevel);
        final GranaryClient connected = clientOptions.connect(spec.commandLine(), clientOptions.master);
        try (connected)
        {
            return run(connected, spec.commandLine().getOut());
        }
        catch (final GranaryException ex)
        {
            throw ClientOptions.withHint(ex, clientOptions.master);
        }
        finally
        {
            spec.commandLine().getOut().flush();
        }
    }

    /** Does the command's work. @return the exit code. */
    abstract int run(GranaryClient client, PrintWriter out) throws Exception;
}
