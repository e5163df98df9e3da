package io.granary.common;

/**
 * Time source injected into every component that decides by time (leases, pins, timeouts), so
 * tests can control time instead of sleeping.
 */
public interface Clock
{
    /** Monotonic nanoseconds, for deadlines and durations. */
    long nanoTime();

    /** Wall-clock milliseconds since the epoch, for tokens and display only. */
    long epochMillis();

    Clock SYSTEM = new Clock()
    {
        @Override
        public long nanoTime()
        {
            return System.nanoTime();
        }

        @Override
        public long epochMillis()
        {
            return System.currentTimeMillis();
        }
    };
}
