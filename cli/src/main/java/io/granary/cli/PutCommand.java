package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.client.PutOptions;
import io.granary.client.SoftPinAction;
import io.granary.common.Units;
import picocli.CommandLine;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.SplittableRandom;

/** {@code granary put KEY (--value TEXT | --file PATH | --size N)}: stores one value. */
@Command(
    name = "put",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Store one value under KEY.",
        "Objects are immutable: putting a key that already exists succeeds and leaves the stored value as it was."})
final class PutCommand extends ClientCommand
{
    @Parameters(index = "0", paramLabel = "KEY", description = "The key (up to 4096 UTF-8 bytes).")
    private String key;

    @ArgGroup(exclusive = true, multiplicity = "1")
    private Source source;

    @Option(names = "--replicas", paramLabel = "N", defaultValue = "1",
        description = "Copies on distinct segments.")
    private int replicas;

    @Option(names = "--soft-pin", paramLabel = "TTL|default",
        description = "Soft-pin the object for TTL (from when it becomes readable), or for the master's "
            + "--soft-pin-default-ttl with 'default'. Soft-pinned objects are evicted last.")
    private String softPin;

    @Option(names = "--hard-pin", description = "Never evict the object (it can still be removed).")
    private boolean hardPin;

    @Option(names = "--group", paramLabel = "ID", description = "Eviction group: evicted together, leased together.")
    private String group;

    @Option(names = "--preferred-segment", paramLabel = "NAME", description = "Segment to try first (NODE/segN).")
    private String preferredSegment;

    /** Where the value comes from: exactly one of these. */
    static final class Source
    {
        @Option(names = "--value", paramLabel = "TEXT", required = true, description = "The value, as UTF-8 text.")
        String text;

        @Option(names = "--file", paramLabel = "PATH", required = true, description = "The value is this file's bytes.")
        Path file;

        @Option(names = "--size", paramLabel = "SIZE", required = true, converter = Converters.SizeConverter.class,
            description = "The value is SIZE random bytes (e.g. 1m).")
        Long randomBytes;
    }

    @Override
    int run(final GranaryClient client, final PrintWriter out) throws IOException
    {
        final PutOptions options = options();
        final ByteBuffer value = value();
        final int length = value.remaining();
        client.put(key, value, options);
        out.println("put \"" + key + "\": " + length + " bytes" +
            (length >= 1024 ? " (" + Units.formatBytes(length) + ")" : "") +
            (source.text == null ? ", sha256 " + GetCommand.sha256(value.duplicate()).substring(0, 16) : "") +
            ", " + replicas + (replicas == 1 ? " replica" : " replicas") +
            (hardPin ? ", hard-pinned" : "") + (softPin != null ? ", soft-pinned" : "") +
            (group != null ? ", group " + group : ""));
        return 0;
    }

    private PutOptions options()
    {
        final PutOptions.Builder builder = PutOptions.builder()
            .replicas(replicas)
            .hardPin(hardPin)
            .groupId(group)
            .preferredSegment(preferredSegment);
        if (softPin != null)
        {
            Duration ttl = null;
            if (!"default".equalsIgnoreCase(softPin.trim()))
            {
                try
                {
                    ttl = Units.parseDuration(softPin);
                }
                catch (final IllegalArgumentException ex)
                {
                    throw new CommandLine.ParameterException(spec.commandLine(),
                        "Invalid value for option '--soft-pin': " + ex.getMessage() + " (or 'default')");
                }
            }
            builder.softPin(SoftPinAction.ENABLE, ttl);
        }
        try
        {
            return builder.build();
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), ex.getMessage());
        }
    }

    private ByteBuffer value() throws IOException
    {
        if (source.text != null)
        {
            return ByteBuffer.wrap(source.text.getBytes(StandardCharsets.UTF_8));
        }
        if (source.file != null)
        {
            try (FileChannel channel = FileChannel.open(source.file, StandardOpenOption.READ))
            {
                final long size = channel.size();
                if (size > Integer.MAX_VALUE)
                {
                    throw new CommandLine.ParameterException(spec.commandLine(),
                        "--file " + source.file + " has " + size + " bytes; the CLI puts at most 2 GiB per value");
                }
                // A mapped buffer is direct, so the client sends it without another copy.
                return channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
            }
        }
        final long size = source.randomBytes;
        if (size > Integer.MAX_VALUE - 8)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "Invalid value for option '--size': the CLI puts at most 2 GiB per value");
        }
        final byte[] bytes = new byte[(int)size];
        new SplittableRandom().nextBytes(bytes);
        return ByteBuffer.wrap(bytes);
    }
}
