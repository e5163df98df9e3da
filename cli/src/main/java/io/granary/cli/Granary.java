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
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

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
    synopsisSubcommandLabel = "COMMAND")
public final class Granary implements Runnable
{
    /** Exit code of a failed operation. */
    public static final int EXIT_FAILED = 1;
    /** Exit code of bad input: an unknown flag, a malformed value, settings that contradict each other. */
    public static final int EXIT_BAD_INPUT = 2;

    @CommandLine.Spec
    private CommandLine.Model.CommandSpec spec;

    /** Every command, in the order help lists them. */
    private static final Map<String, Supplier<Object>> COMMANDS = commands();

    private static Map<String, Supplier<Object>> commands()
    {
        final Map<String, Supplier<Object>> commands = new LinkedHashMap<>();
        commands.put("master", MasterCommand::new);
        commands.put("node", NodeCommand::new);
        commands.put("demo", DemoCommand::new);
        commands.put("bench", BenchCommand::new);
        commands.put("put", PutCommand::new);
        commands.put("get", GetCommand::new);
        commands.put("rm", RmCommand::new);
        commands.put("ls", LsCommand::new);
        commands.put("stat", StatCommand::new);
        commands.put("events", EventsCommand::new);
        commands.put("help", CommandLine.HelpCommand::new);
        return commands;
    }

    public static void main(final String[] args)
    {
        final int exitCode = newCommandLine(args, System.getenv()).execute(args);
        System.exit(exitCode);
    }

    /**
     * The command line with every command, Granary's converters and error handling; tests redirect out/err. Flags
     * take defaults from the environment (see {@link ConfigDefaults}); {@code --config} files need
     * {@link #newCommandLine(String[], Map)}, which reads the file named on the command line.
     */
    public static CommandLine newCommandLine()
    {
        return newCommandLine(null, System.getenv());
    }

    /**
     * The command line for running {@code args}: only the named command's model is built (picocli builds models by
     * reflection, which is most of a short command's start-up time), else all. Every command's flags take their
     * defaults from {@code env} and from the {@code --config} file named in {@code args}.
     */
    public static CommandLine newCommandLine(final String[] args, final Map<String, String> env)
    {
        final String command = args != null && args.length > 0 ? args[0] : null;
        final CommandLine commandLine = new CommandLine(new Granary());
        final boolean single = command != null && !"help".equals(command) && COMMANDS.containsKey(command);
        for (final Map.Entry<String, Supplier<Object>> entry : COMMANDS.entrySet())
        {
            if (!single || entry.getKey().equals(command))
            {
                commandLine.addSubcommand(entry.getKey(), entry.getValue().get());
                if (!"help".equals(entry.getKey()))
                {
                    ConfigDefaults.install(commandLine.getSubcommands().get(entry.getKey()), entry.getKey(), env,
                        entry.getKey().equals(command) ? args : null);
                }
            }
        }
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
        final ConfigDefaults config = ConfigDefaults.of(cmd.getCommandSpec());
        final String origin = config != null && ex.getArgSpec() instanceof CommandLine.Model.OptionSpec ?
            config.origin(((CommandLine.Model.OptionSpec)ex.getArgSpec()).longestName()) : "";
        err.println("error: " + ex.getMessage() + origin);
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
            final ConfigDefaults config = ConfigDefaults.of(cmd.getCommandSpec());
            err.println("error: " + (config == null ? ex.getMessage() : config.withOrigins(ex.getMessage(),
                cmd.getCommandSpec())));
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
        // Not a static field: --version and --help then skip setting up logging.
        final Logger log = LoggerFactory.getLogger(Granary.class);
        log.debug("{} failed", cmd.getCommandSpec().qualifiedName(), ex);
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
