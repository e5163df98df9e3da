package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.master.Configuration;
import io.granary.protocol.Limits;
import io.granary.transfer.TransportKind;
import picocli.CommandLine;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.time.Duration;

/** The flags every command that talks to a running master shares: where it is, which tenant, how long to wait. */
final class ClientOptions
{
    static final String DEFAULT_MASTER = Configuration.HOST_DEFAULT + ":" + Configuration.PORT_DEFAULT;

    @Option(names = "--master", paramLabel = "HOST:PORT", defaultValue = DEFAULT_MASTER,
        description = "The master's gRPC address.")
    String master;

    @Option(names = "--tenant", paramLabel = "ID", defaultValue = Limits.DEFAULT_TENANT,
        description = "Key namespace; tenants never see each other's keys.")
    String tenant;

    @Option(names = "--timeout", paramLabel = "DURATION", defaultValue = "5s",
        description = "Deadline of each call to the master.")
    Duration timeout;

    @Option(names = "--transport", paramLabel = "KIND", defaultValue = "auto",
        converter = TransportConverter.class, description = "Data transport: auto, java, native or rdma.")
    TransportKind transport;

    @Option(names = "--log-level", paramLabel = "LEVEL", defaultValue = "warn",
        description = "Log level on stderr: " + Logging.LEVELS + ".")
    String logLevel;

    @Mixin
    TlsOptions tls;

    /**
     * The client settings of these flags, for {@code masterAddress}.
     *
     * @throws CommandLine.ParameterException naming the flag when a setting is bad.
     */
    ClientConfig config(final CommandLine commandLine, final String masterAddress)
    {
        try
        {
            return ClientConfig.builder()
                .masterAddress(masterAddress)
                .tenant(tenant)
                .rpcTimeout(timeout)
                .transport(transport)
                .tls(tls.settings(null))
                .build();
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(commandLine, flagMessage(ex.getMessage()));
        }
    }

    GranaryClient connect(final CommandLine commandLine, final String masterAddress)
    {
        return GranaryClient.connect(config(commandLine, masterAddress));
    }

    /** Names the flag instead of the ClientConfig setting in a build() message. */
    static String flagMessage(final String message)
    {
        final String[][] flagOfSetting = {
            {"masterAddress", "--master"}, {"tenant", "--tenant"}, {"rpcTimeout", "--timeout"}};
        for (final String[] pair : flagOfSetting)
        {
            if (message.startsWith(pair[0] + " "))
            {
                return pair[1] + message.substring(pair[0].length());
            }
        }
        return message;
    }

    /**
     * The same failure with a hint when the master could not be reached at all: people most often forgot to
     * start one, or point at the wrong port.
     */
    static GranaryException withHint(final GranaryException ex, final String masterAddress)
    {
        if (ex.code() != ErrorCode.RPC_FAIL && ex.code() != ErrorCode.RPC_TIMEOUT)
        {
            return ex;
        }
        return new GranaryException(ex.code(), Granary.detail(ex) + " (is a master running at " + masterAddress +
            "? start one with 'granary master', or pass --master HOST:PORT)", ex);
    }

    /**
     * A picocli converter over a parse method that throws IllegalArgumentException with a message (enum flags such as
     * --transport and --huge-pages): the message becomes picocli's, which names the flag.
     */
    abstract static class ParsingConverter<T> implements CommandLine.ITypeConverter<T>
    {
        private final java.util.function.Function<String, T> parse;

        ParsingConverter(final java.util.function.Function<String, T> parse)
        {
            this.parse = parse;
        }

        @Override
        public T convert(final String value)
        {
            try
            {
                return parse.apply(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }

    /** --transport values, case-insensitive. */
    static final class TransportConverter extends ParsingConverter<TransportKind>
    {
        TransportConverter()
        {
            super(TransportKind::parse);
        }
    }
}
