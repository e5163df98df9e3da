package io.granary.cli;

import io.granary.common.Units;
import io.granary.master.evict.EvictionPolicy;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Flag values in the human units of {@link Units} (durations ms/s/m/h, sizes k/m/g/t) and their exact
 * printed form for help text. A value that does not parse becomes a usage error naming the flag.
 */
final class Converters
{
    private Converters()
    {
    }

    /** "250ms", "10s", "30m", "24h"; a bare number is milliseconds. */
    static final class DurationConverter implements ITypeConverter<Duration>
    {
        @Override
        public Duration convert(final String value)
        {
            try
            {
                return Units.parseDuration(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new TypeConversionException(ex.getMessage());
            }
        }
    }

    /** "4096", "64k", "1m", "1g" (binary multiples). */
    static final class SizeConverter implements ITypeConverter<Long>
    {
        @Override
        public Long convert(final String value)
        {
            try
            {
                return Units.parseSize(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new TypeConversionException(ex.getMessage());
            }
        }
    }

    /** Byte quotas by tenant, as {@link TenantQuotasConverter} read them (a type of its own: not a picocli map option). */
    record TenantQuotas(Map<String, Long> bytes)
    {
    }

    /** "TENANT=SIZE[,TENANT=SIZE...]" (sizes as {@link SizeConverter} reads them; empty: no tenant). */
    static final class TenantQuotasConverter implements ITypeConverter<TenantQuotas>
    {
        @Override
        public TenantQuotas convert(final String value)
        {
            final Map<String, Long> quotas = new LinkedHashMap<>();
            if (value.isBlank())
            {
                return new TenantQuotas(quotas);
            }
            for (final String entry : value.split(",", -1))
            {
                final int eq = entry.indexOf('=');
                if (eq <= 0 || eq == entry.length() - 1)
                {
                    throw new TypeConversionException(
                        "expected TENANT=SIZE[,TENANT=SIZE...] (e.g. team-a=64g,team-b=8g), found '" + entry + "'");
                }
                final String tenant = entry.substring(0, eq).trim();
                final long bytes;
                try
                {
                    bytes = Units.parseSize(entry.substring(eq + 1).trim());
                }
                catch (final IllegalArgumentException ex)
                {
                    throw new TypeConversionException("tenant '" + tenant + "': " + ex.getMessage());
                }
                if (quotas.put(tenant, bytes) != null)
                {
                    throw new TypeConversionException("tenant '" + tenant + "' is named twice");
                }
            }
            return new TenantQuotas(quotas);
        }
    }

    /** "oldest-lease" or "prefix-leaf-first". */
    static final class EvictionPolicyConverter implements ITypeConverter<EvictionPolicy>
    {
        @Override
        public EvictionPolicy convert(final String value)
        {
            try
            {
                return EvictionPolicy.fromFlag(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new TypeConversionException(ex.getMessage());
            }
        }
    }

    /** The shortest exact size text that {@link Units#parseSize} reads back: 1073741824 is "1g". */
    static String formatSize(final long bytes)
    {
        final String[] units = {"t", "g", "m", "k"};
        final int[] shifts = {40, 30, 20, 10};
        for (int i = 0; i < units.length; i++)
        {
            final long unit = 1L << shifts[i];
            if (bytes != 0 && bytes % unit == 0)
            {
                return (bytes / unit) + units[i];
            }
        }
        return Long.toString(bytes);
    }

    /** The exact text of a duration that {@link Units#parseDuration} reads back. */
    static String formatDuration(final Duration duration)
    {
        return Units.formatDuration(duration);
    }

    /** A duration for people: "850ms", "9.2s", "3m05s", "2h10m". */
    static String humanDuration(final long millis)
    {
        if (millis < 1000)
        {
            return millis + "ms";
        }
        if (millis < 60_000)
        {
            return millis % 1000 == 0 ? millis / 1000 + "s" : String.format(Locale.ROOT, "%.1fs", millis / 1000.0);
        }
        if (millis < 3_600_000)
        {
            return String.format(Locale.ROOT, "%dm%02ds", millis / 60_000, (millis / 1000) % 60);
        }
        return String.format(Locale.ROOT, "%dh%02dm", millis / 3_600_000, (millis / 60_000) % 60);
    }
}
