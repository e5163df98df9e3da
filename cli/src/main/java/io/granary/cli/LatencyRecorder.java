package io.granary.cli;

import org.HdrHistogram.Histogram;

import java.util.Locale;
import java.util.concurrent.TimeUnit;

/** Latencies of one kind of operation (an HdrHistogram in nanoseconds, 3 significant digits). Single-threaded. */
final class LatencyRecorder
{
    private static final long HIGHEST_NS = TimeUnit.MINUTES.toNanos(10);

    private final Histogram histogram = new Histogram(1, HIGHEST_NS, 3);

    void record(final long nanos)
    {
        histogram.recordValue(Math.max(1, Math.min(nanos, HIGHEST_NS)));
    }

    void add(final LatencyRecorder other)
    {
        histogram.add(other.histogram);
    }

    long count()
    {
        return histogram.getTotalCount();
    }

    /** Latency at {@code percentile} (0..100) in milliseconds. */
    double percentileMs(final double percentile)
    {
        return histogram.getValueAtPercentile(percentile) / 1e6;
    }

    double maxMs()
    {
        return histogram.getMaxValue() / 1e6;
    }

    /** "p50 1.234 ms  p99 5.678 ms". */
    String p50p99()
    {
        return String.format(Locale.ROOT, "p50 %.3f ms  p99 %.3f ms", percentileMs(50), percentileMs(99));
    }
}
