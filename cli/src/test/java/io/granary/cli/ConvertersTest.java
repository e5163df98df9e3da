package io.granary.cli;

import org.junit.jupiter.api.Test;
import picocli.CommandLine.TypeConversionException;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConvertersTest
{
    private final Converters.DurationConverter durations = new Converters.DurationConverter();
    private final Converters.SizeConverter sizes = new Converters.SizeConverter();

    @Test
    void shouldParseDurationsInEveryUnit()
    {
        assertThat(durations.convert("250ms")).isEqualTo(Duration.ofMillis(250));
        assertThat(durations.convert("10s")).isEqualTo(Duration.ofSeconds(10));
        assertThat(durations.convert("30m")).isEqualTo(Duration.ofMinutes(30));
        assertThat(durations.convert("24h")).isEqualTo(Duration.ofHours(24));
        assertThat(durations.convert("1500")).isEqualTo(Duration.ofMillis(1500));
    }

    @Test
    void shouldRefuseMalformedDurationsWithAReadableMessage()
    {
        assertThatThrownBy(() -> durations.convert("10 parsecs"))
            .isInstanceOf(TypeConversionException.class)
            .hasMessageContaining("bad duration unit");
        assertThatThrownBy(() -> durations.convert("soon"))
            .isInstanceOf(TypeConversionException.class)
            .hasMessageContaining("bad duration 'soon'");
        assertThatThrownBy(() -> durations.convert("-5s")).isInstanceOf(TypeConversionException.class);
    }

    @Test
    void shouldParseSizesInBinaryUnits()
    {
        assertThat(sizes.convert("4096")).isEqualTo(4096L);
        assertThat(sizes.convert("64k")).isEqualTo(64L << 10);
        assertThat(sizes.convert("1m")).isEqualTo(1L << 20);
        assertThat(sizes.convert("1g")).isEqualTo(1L << 30);
        assertThat(sizes.convert("2GiB")).isEqualTo(2L << 30);
    }

    @Test
    void shouldRefuseMalformedSizes()
    {
        assertThatThrownBy(() -> sizes.convert("1q")).isInstanceOf(TypeConversionException.class)
            .hasMessageContaining("bad size unit");
        assertThatThrownBy(() -> sizes.convert("big")).isInstanceOf(TypeConversionException.class);
        assertThatThrownBy(() -> sizes.convert("99999999999t")).isInstanceOf(TypeConversionException.class)
            .hasMessageContaining("out of range");
    }

    @Test
    void shouldFormatSizesSoThatTheyParseBackExactly()
    {
        for (final long bytes : new long[]{1, 4095, 4096, 64L << 10, 1L << 20, 3L << 30, 1L << 40, (1L << 30) + 1})
        {
            assertThat(sizes.convert(Converters.formatSize(bytes))).isEqualTo(bytes);
        }
        assertThat(Converters.formatSize(1L << 30)).isEqualTo("1g");
        assertThat(Converters.formatSize(16L << 20)).isEqualTo("16m");
    }

    @Test
    void shouldFormatDurationsForPeople()
    {
        assertThat(Converters.humanDuration(850)).isEqualTo("850ms");
        assertThat(Converters.humanDuration(9_240)).isEqualTo("9.2s");
        assertThat(Converters.humanDuration(10_000)).isEqualTo("10s");
        assertThat(Converters.humanDuration(185_000)).isEqualTo("3m05s");
        assertThat(Converters.humanDuration(7_800_000)).isEqualTo("2h10m");
    }
}
