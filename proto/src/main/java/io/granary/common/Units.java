package io.granary.common;

import java.time.Duration;
import java.util.Locale;

/** Parses and prints the human units used by flags and config files: durations ms/s/m/h, sizes k/m/g/t. */
public final class Units
{
    private Units()
    {
    }

    /**
     * Parses "250ms", "10s", "30m", "24h" (a bare number means milliseconds).
     *
     * @throws IllegalArgumentException with a readable message on bad input or a negative value.
     */
    public static Duration parseDuration(final String text)
    {
        if (text == null || text.isBlank())
        {
            throw new IllegalArgumentException("empty duration; expected e.g. 500ms, 10s, 30m, 24h");
        }
        final String s = text.trim().toLowerCase(Locale.ROOT);
        int split = 0;
        while (split < s.length() && (Character.isDigit(s.charAt(split))))
        {
            split++;
        }
        if (split == 0)
        {
            throw new IllegalArgumentException("bad duration '" + text + "'; expected e.g. 500ms, 10s, 30m, 24h");
        }
        final long amount;
        try
        {
            amount = Long.parseLong(s.substring(0, split));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("duration out of range: '" + text + "'");
        }
        final String unit = s.substring(split).trim();
        try
        {
            switch (unit)
            {
                case "":
                case "ms": return Duration.ofMillis(amount);
                case "s": return Duration.ofSeconds(amount);
                case "m": return Duration.ofMinutes(amount);
                case "h": return Duration.ofHours(amount);
                default:
                    throw new IllegalArgumentException(
                        "bad duration unit '" + unit + "' in '" + text + "'; use ms, s, m or h");
            }
        }
        catch (final ArithmeticException ex)
        {
            throw new IllegalArgumentException("duration out of range: '" + text + "'");
        }
    }

    /** Parses "4096", "64k", "1m", "1g", "2t" (binary multiples; an optional trailing "b"/"ib" is accepted). */
    public static long parseSize(final String text)
    {
        if (text == null || text.isBlank())
        {
            throw new IllegalArgumentException("empty size; expected e.g. 4096, 64k, 1m, 1g");
        }
        String s = text.trim().toLowerCase(Locale.ROOT);
        if (s.endsWith("ib"))
        {
            s = s.substring(0, s.length() - 2);
        }
        else if (s.endsWith("b"))
        {
            s = s.substring(0, s.length() - 1);
        }
        int split = 0;
        while (split < s.length() && Character.isDigit(s.charAt(split)))
        {
            split++;
        }
        if (split == 0)
        {
            throw new IllegalArgumentException("bad size '" + text + "'; expected e.g. 4096, 64k, 1m, 1g");
        }
        final long amount;
        try
        {
            amount = Long.parseLong(s.substring(0, split));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("size out of range: '" + text + "'");
        }
        final String unit = s.substring(split).trim();
        final int shift;
        switch (unit)
        {
            case "": shift = 0; break;
            case "k": shift = 10; break;
            case "m": shift = 20; break;
            case "g": shift = 30; break;
            case "t": shift = 40; break;
            default:
                throw new IllegalArgumentException("bad size unit '" + unit + "' in '" + text + "'; use k, m, g or t");
        }
        if (amount > (Long.MAX_VALUE >> shift))
        {
            throw new IllegalArgumentException("size out of range: '" + text + "'");
        }
        return amount << shift;
    }

    /** Formats a duration in the largest unit that represents it exactly (e.g. "30m", "1500ms"). */
    public static String formatDuration(final Duration d)
    {
        final long ms = d.toMillis();
        if (ms != 0 && ms % 3_600_000L == 0)
        {
            return ms / 3_600_000L + "h";
        }
        if (ms != 0 && ms % 60_000L == 0)
        {
            return ms / 60_000L + "m";
        }
        if (ms != 0 && ms % 1000L == 0)
        {
            return ms / 1000L + "s";
        }
        return ms + "ms";
    }

    /** Formats bytes with a binary unit for humans, e.g. "1.00 GiB". */
    public static String formatBytes(final long bytes)
    {
        if (bytes < 1024)
        {
            return bytes + " B";
        }
        final String[] units = {"KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = bytes;
        int u = -1;
        while (v >= 1024 && u < units.length - 1)
        {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.2f %s", v, units[u]);
    }
}
