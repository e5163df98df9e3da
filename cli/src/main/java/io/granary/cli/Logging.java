package io.granary.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.OutputStreamAppender;
import org.slf4j.ILoggerFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;

import java.util.Iterator;
import java.util.Locale;
import java.util.Set;

/**
 * Sets up the stderr log (logback's root logger): its level from {@code --log-level} and its format from
 * {@code --log-format} (text lines, or one JSON object per line with logback's JsonEncoder).
 */
final class Logging
{
    static final String LEVELS = "error, warn, info, debug, trace";
    static final String FORMATS = "text, json";
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

    /**
     * Switches every appender of the root logger that writes to a stream to {@code format}: "text" keeps the
     * configured pattern, "json" writes one JSON object per event.
     *
     * @throws CommandLine.ParameterException for an unknown format.
     */
    static void setFormat(final CommandSpec spec, final String format)
    {
        final String name = format == null ? "" : format.trim().toLowerCase(Locale.ROOT);
        if (!"text".equals(name) && !"json".equals(name))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--log-format': '" + format + "'; use one of " + FORMATS);
        }
        final ILoggerFactory factory = LoggerFactory.getILoggerFactory();
        if (!"json".equals(name) || !(factory instanceof LoggerContext))
        {
            return;
        }
        final LoggerContext context = (LoggerContext)factory;
        final Iterator<Appender<ILoggingEvent>> appenders =
            context.getLogger(Logger.ROOT_LOGGER_NAME).iteratorForAppenders();
        while (appenders.hasNext())
        {
            final Appender<ILoggingEvent> appender = appenders.next();
            if (appender instanceof OutputStreamAppender)
            {
                final OutputStreamAppender<ILoggingEvent> stream = (OutputStreamAppender<ILoggingEvent>)appender;
                final JsonEncoder encoder = new JsonEncoder();
                encoder.setContext(context);
                // One readable message per event: the formatted text, not the pattern and its arguments.
                encoder.setWithSequenceNumber(false);
                encoder.setWithNanoseconds(false);
                encoder.setWithContext(false);
                encoder.setWithMessage(false);
                encoder.setWithArguments(false);
                encoder.setWithFormattedMessage(true);
                encoder.start();
                stream.stop();
                stream.setEncoder(encoder);
                stream.start();
            }
        }
    }
}
