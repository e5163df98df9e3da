package io.granary.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import org.slf4j.ILoggerFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;

import java.util.Locale;
import java.util.Set;

/** Sets the level of the stderr log (logback's root logger) from {@code --log-level}. */
final class Logging
{
    static final String LEVELS = "error, warn, info, debug, trace";
    private static final Set<String> NAMES = Set.of("off", "error", "warn", "info", "debug", "trace");

    private Logging()
    {
    }

    /** @throws CommandLine.ParameterException for an unknown level name. */
    static void setLevel(final CommandSpec spec, final String level)
    {
        final String name = level == null ? "" : level.trim().toLowerCase(Locale.ROOT);
        if (!NAMES.contains(name))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--log-level': '" + level + "'; use one of " + LEVELS);
        }
        final ILoggerFactory factory = LoggerFactory.getILoggerFactory();
        if (factory instanceof LoggerContext)
        {
            ((LoggerContext)factory).getLogger(Logger.ROOT_LOGGER_NAME).setLevel(Level.toLevel(name));
        }
    }
}
