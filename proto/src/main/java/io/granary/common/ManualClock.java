package io.granary.common;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** A {@link Clock} that only moves when told to; thread safe. */
public final class ManualClock implements Clock
{
    private final AtomicLong nanos;
    private final long epochBaseMs;

    public ManualClock()
    {
        this(1_000_000_000L, 1_700_000_000_000L);
    }

    public ManualClock(final long startNanos, final long epochBaseMs)
    {
        this.nanos = new AtomicLong(startNanos);
        this.epochBaseMs = epochBaseMs;
    }

    @Override
    public long nanoTime()
    {
        return nanos.get();
    }

    @Override
    public long epochMillis()
    {
        return epochBaseMs + nanos.get() / 1_000_000L;
    }

    public ManualClock advance(final Duration d)
    {
        nanos.addAndGet(d.toNanos());
        return this;
    }

    public ManualClock advanceMillis(final long ms)
    {
        nanos.addAndGet(ms * 1_000_000L);
        return this;
    }
}
