package io.granary.examples;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;

/**
 * An engine that keeps its Granary settings in a properties file (examples/config/client.properties) and records the
 * client's metrics in its own Micrometer registry: load the file, add the registry, connect, and read the
 * per-operation latency and bytes back. Run: {@code java -cp ... io.granary.examples.ConfiguredClientExample
 * examples/config/client.properties 127.0.0.1:50051}.
 */
public final class ConfiguredClientExample
{
    private ConfiguredClientExample()
    {
    }

    public static void main(final String[] args)
    {
        final Path file = Path.of(args.length > 0 ? args[0] : "examples/config/client.properties");
        System.out.print(run(file, args.length > 1 ? args[1] : null, new SimpleMeterRegistry()));
    }

    /**
     * Connects with the settings of {@code file} (and {@code masterAddress} instead of the file's, when not null),
     * does a few operations and reports the client's metrics from {@code meters}.
     */
    public static String run(final Path file, final String masterAddress, final MeterRegistry meters)
    {
        final ClientConfig fromFile;
        try
        {
            fromFile = ClientConfig.fromFile(file);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot read " + file, ex);
        }
        final ClientConfig.Builder settings = fromFile.toBuilder().meterRegistry(meters);
        if (masterAddress != null)
        {
            settings.masterAddress(masterAddress);
        }
        final StringBuilder report = new StringBuilder();
        try (GranaryClient client = GranaryClient.connect(settings.build()))
        {
            report.append("tenant ").append(fromFile.tenant()).append('\n');
            final byte[] page = "a KV page".repeat(100).getBytes(StandardCharsets.UTF_8);
            for (int i = 0; i < 10; i++)
            {
                client.put("configured/" + i, page);
                client.get("configured/" + i);
            }
        }
        report.append(String.format(Locale.ROOT, "puts %d, gets %d, bytes written %.0f, bytes read %.0f%n",
            meters.get("granary.client.op").tag("op", "put").timer().count(),
            meters.get("granary.client.op").tag("op", "get").timer().count(),
            meters.get("granary.client.bytes").tag("direction", "written").counter().count(),
            meters.get("granary.client.bytes").tag("direction", "read").counter().count()));
        return report.toString();
    }
}
