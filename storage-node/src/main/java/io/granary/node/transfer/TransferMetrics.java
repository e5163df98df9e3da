package io.granary.node.transfer;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * The transfer server's latency histograms, registered up front so that the frame handlers record with one array
 * read and an atomic add: READ is the node's service time (header decoded to response queued), WRITE is the time
 * from the header to the last payload byte in segment memory (it includes the payload's time on the wire).
 * Counters of bytes, requests and rejections live in {@link TransferServer} and are exposed by the node's
 * metrics. Thread safe.
 */
public final class TransferMetrics
{
    /** Records nothing. */
    public static final TransferMetrics NONE = new TransferMetrics();

    static final Duration[] LATENCY_BUCKETS = {
        Duration.ofNanos(10_000), Duration.ofNanos(50_000), Duration.ofNanos(100_000), Duration.ofNanos(250_000),
        Duration.ofNanos(500_000), Duration.ofMillis(1), Duration.ofMillis(2), Duration.ofMillis(5),
        Duration.ofMillis(10), Duration.ofMillis(25), Duration.ofMillis(50), Duration.ofMillis(100),
        Duration.ofMillis(250), Duration.ofSeconds(1)};

    private final Timer read;
    private final Timer write;

    private TransferMetrics()
    {
        read = null;
        write = null;
    }

    /** Registers {@code granary.node.transfer} with op=read and op=write. */
    public TransferMetrics(final MeterRegistry registry)
    {
        read = timer(registry, "read");
        write = timer(registry, "write");
    }

    private static Timer timer(final MeterRegistry registry, final String op)
    {
        return Timer.builder("granary.node.transfer")
            .description("Transfer frames served: READ service time, WRITE header-to-last-payload-byte time")
            .tag("op", op)
            .serviceLevelObjectives(LATENCY_BUCKETS)
            .register(registry);
    }

    void recordRead(final long nanos)
    {
        if (read != null)
        {
            read.record(nanos, TimeUnit.NANOSECONDS);
        }
    }

    void recordWrite(final long nanos)
    {
        if (write != null)
        {
            write.record(nanos, TimeUnit.NANOSECONDS);
        }
    }
}
