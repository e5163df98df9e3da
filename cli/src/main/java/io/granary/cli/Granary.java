package io.granary.cli;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.master.MasterServer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.UnmatchedArgumentException;

import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.time.Duration;

/**
 * The {@code granary} command: runs a master or a storage node in the foreground, a self-checking demo, a
 * benchmark, and the client commands that talk to a running cluster. Exit codes: 0 success, 1 a failed
 * operation (one {@code error: CODE: message} line on stderr), 2 bad input (flags, settings).
 */
@Command(
    name = "granary",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    description = "Granary: a distributed KV-cache store for LLM inference.",
    synopsisSubcommandLabel = "COMMAND",
    subcommands = {
        MasterCommand.class,
        NodeCommand.class,
        DemoCommand.class,
        BenchCommand.class,
        PutCommand.class,
        GetCommand.class,
        RmCommand.class,
        LsCommand.class,
        StatCommand.class,
        CommandLine.HelpCommand.class
    })
public final class Granary implements Runnable
{
    /** Exit code of a failed operation. */
    public static final int EXIT_FAILED = 1;
    /** Exit code of bad input: an unknown flag, a malformed value, settings that contradict each other. */
    public static final int EXIT_BAD_INPUT = 2;

    private static final Logger LOG = LoggerFactory.getLogger(Granary.class);

    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    public static void main(final String[] args)
    {
        final int exitCode = newCommandLine().execute(args);
        System.exit(exitCode);
    }

    /** The command line with Granary's converters and error handling; tests redirect its out/err. */
    public static CommandLine newCommandLine()
    {
        final CommandLine commandLine = new CommandLine(new Granary());
        commandLine.registerConverter(Duration.class, new Converters.DurationConverter());
        commandLine.setParameterExceptionHandler(Granary::onBadInput);
        commandLine.setExecutionExceptionHandler(Granary::onFailure);
        commandLine.setUsageHelpWidth(100);
        return commandLine;
    }

    @Override
    public void run()
    {
        // "granary" alone: show what there is to run.
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    private static int onBadInput(final ParameterException ex, final String[] args)
    {
        final CommandLine cmd = ex.getCommandLine();
        final PrintWriter err = cmd.getErr();
        err.println("error: " + ex.getMessage());
        UnmatchedArgumentException.printSuggestions(ex, err);
        err.println("Try '" + cmd.getCommandSpec().qualifiedName() + " --help' for more information.");
        err.flush();
        return EXIT_BAD_INPUT;
    }

    private static int onFailure(final Exception ex, final CommandLine cmd, final ParseResult parseResult)
    {
        final PrintWriter err = cmd.getErr();
        final int exitCode;
        if (ex instanceof GranaryException)
        {
            err.println(errorLine((GranaryException)ex));
            exitCode = EXIT_FAILED;
        }
        else if (ex instanceof IllegalArgumentException)
        {
            err.println("error: " + ex.getMessage());
            exitCode = EXIT_BAD_INPUT;
        }
        else if (ex instanceof UncheckedIOException)
        {
            err.println("error: " + ex.getMessage() + ": " + ex.getCause().getMessage());
            exitCode = EXIT_FAILED;
        }
        else
        {
            err.println("error: " + ex + " (run with --log-level debug for the stack trace)");
            exitCode = EXIT_FAILED;
        }
        LOG.debug("{} failed", cmd.getCommandSpec().qualifiedName(), ex);
        err.flush();
        return exitCode;
    }

    /** {@code error: CODE: message}, the one line a failed store operation prints. */
    static String errorLine(final GranaryException ex)
    {
        return "error: " + ex.code().name() + ": " + detail(ex);
    }

    /** The exception's message without the "CODE (number): " prefix GranaryException puts in front. */
    static String detail(final GranaryException ex)
    {
        final ErrorCode code = ex.code();
        final String message = ex.getMessage() == null ? "" : ex.getMessage();
        final String prefix = code.name() + " (" + code.code() + ")";
        if (message.startsWith(prefix + ": "))
        {
            return message.substring(prefix.length() + 2);
        }
        return message.startsWith(prefix) ? message.substring(prefix.length()).trim() : message;
    }

    /** Prints the version of Granary and of the JVM. */
    static final class Version implements IVersionProvider
    {
        @Override
        public String[] getVersion()
        {
            return new String[]{
                "granary " + MasterServer.VERSION,
                "Java " + Runtime.version() + " (" + System.getProperty("java.vm.name") + ")"};
        }
    }
}
