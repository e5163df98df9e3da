package io.granary.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.LoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.OutputStreamAppender;
import ch.qos.logback.core.encoder.Encoder;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;

import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** --log-format: text keeps the pattern, json switches the stderr appender to one JSON object per event. */
class LoggingTest
{
    private static OutputStreamAppender<ILoggingEvent> stderrAppender(final LoggerContext context)
    {
        final Iterator<Appender<ILoggingEvent>> it = context.getLogger(Logger.ROOT_LOGGER_NAME).iteratorForAppenders();
        while (it.hasNext())
        {
            final Appender<ILoggingEvent> appender = it.next();
            if (appender instanceof OutputStreamAppender)
            {
                return (OutputStreamAppender<ILoggingEvent>)appender;
            }
        }
        throw new AssertionError("no stream appender on the root logger");
    }

    @Test
    void shouldSwitchTheStderrLogToJsonLines()
    {
        final LoggerContext context = (LoggerContext)LoggerFactory.getILoggerFactory();
        final OutputStreamAppender<ILoggingEvent> appender = stderrAppender(context);
        final Encoder<ILoggingEvent> original = appender.getEncoder();
        final CommandLine.Model.CommandSpec spec = Granary.newCommandLine().getSubcommands().get("master")
            .getCommandSpec();
        try
        {
            Logging.setFormat(spec, "text");
            assertThat(appender.getEncoder()).as("text keeps the configured encoder").isSameAs(original);

            Logging.setFormat(spec, "JSON");
            assertThat(appender.getEncoder()).isInstanceOf(JsonEncoder.class);
            assertThat(appender.isStarted()).isTrue();
            final LoggingEvent event = new LoggingEvent(LoggingTest.class.getName(),
                context.getLogger("io.granary.master.MasterServer"), Level.INFO, "master ready: grpc={}",
                null, new Object[]{"127.0.0.1:50051"});
            final String line = new String(appender.getEncoder().encode(event), StandardCharsets.UTF_8);
            assertThat(line).startsWith("{").endsWith("}\n").doesNotContain("\n{")
                .contains("\"level\":\"INFO\"")
                .contains("\"loggerName\":\"io.granary.master.MasterServer\"")
                .contains("\"formattedMessage\":\"master ready: grpc=127.0.0.1:50051\"")
                .doesNotContain("sequenceNumber").doesNotContain("\"arguments\"");
        }
        finally
        {
            appender.stop();
            appender.setEncoder(original);
            appender.start();
        }
        assertThatThrownBy(() -> Logging.setFormat(spec, "xml"))
            .isInstanceOf(CommandLine.ParameterException.class).hasMessageContaining("--log-format");
    }
}
