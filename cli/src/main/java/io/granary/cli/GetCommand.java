package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.common.Units;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * {@code granary get KEY [--out FILE]}: reads one value. Text is printed; binary values are described
 * (size, sha256, first bytes) unless written to a file. A get grants a read lease, like any read.
 */
@Command(
    name = "get",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Read the value of KEY. UTF-8 text is printed (followed by a newline if it has none); a binary value is "
            + "described by its size, sha256 and first bytes. Use --out FILE for the exact bytes ('-' for stdout).",
        "Like every read, this grants a read lease (the master's --lease-ttl) during which the key cannot be "
            + "removed without --force."})
final class GetCommand extends ClientCommand
{
    private static final int PREVIEW_BYTES = 32;

    @Parameters(index = "0", paramLabel = "KEY")
    private String key;

    @Option(names = "--out", paramLabel = "FILE", description = "Write the value's bytes to FILE ('-': stdout).")
    private String outFile;

    @Override
    int run(final GranaryClient client, final PrintWriter out) throws IOException
    {
        final byte[] value = client.get(key);
        if ("-".equals(outFile))
        {
            out.flush();
            final OutputStream stdout = System.out;
            stdout.write(value);
            stdout.flush();
            return 0;
        }
        if (outFile != null)
        {
            Files.write(Path.of(outFile), value);
            out.println("wrote " + value.length + " bytes of \"" + key + "\" to " + outFile);
            return 0;
        }
        final String text = textOrNull(value);
        if (text != null)
        {
            out.print(text);
            if (!text.endsWith("\n"))
            {
                out.println();
            }
            return 0;
        }
        final int preview = Math.min(PREVIEW_BYTES, value.length);
        out.println("\"" + key + "\": " + value.length + " bytes" +
            (value.length >= 1024 ? " (" + Units.formatBytes(value.length) + ")" : "") + ", binary");
        out.println("  sha256 " + sha256(ByteBuffer.wrap(value)));
        out.println("  first " + preview + " bytes " + HexFormat.ofDelimiter(" ").formatHex(value, 0, preview));
        out.println("  (use --out FILE for the bytes)");
        return 0;
    }

    /** The value as text when it is UTF-8 without control characters other than tab and line ends, else null. */
    static String textOrNull(final byte[] value)
    {
        final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
        final CharBuffer chars;
        try
        {
            chars = decoder.decode(ByteBuffer.wrap(value));
        }
        catch (final CharacterCodingException ex)
        {
            return null;
        }
        for (int i = 0; i < chars.length(); i++)
        {
            final char c = chars.charAt(i);
            if (Character.isISOControl(c) && c != '\n' && c != '\r' && c != '\t')
            {
                return null;
            }
        }
        return chars.toString();
    }

    /** Hex sha256 of the buffer's remaining bytes (the buffer's position advances). */
    static String sha256(final ByteBuffer bytes)
    {
        try
        {
            final MessageDigest digest = MessageDigest.getInstance("SHA-256");
            digest.update(bytes);
            return HexFormat.of().formatHex(digest.digest());
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("every JVM has SHA-256", ex);
        }
    }
}
