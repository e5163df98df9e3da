package io.granary.it;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Waits for a condition with a deadline, polling with short parks: the only way these tests wait for
 * another process. Stateless; call from any thread.
 */
final class Await
{
    private static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(10);

    private Await()
    {
    }

    /**
     * Returns once {@code condition} holds.
     *
     * @throws AssertionError naming {@code description} when it still does not hold after {@code timeout}.
     */
    static void until(final Duration timeout, final BooleanSupplier condition, final Supplier<String> description)
    {
        value(timeout, () -> condition.getAsBoolean() ? Boolean.TRUE : null, description);
    }

    /** {@link #until(Duration, BooleanSupplier, Supplier)} with a fixed description. */
    static void until(final Duration timeout, final BooleanSupplier condition, final String description)
    {
        until(timeout, condition, () -> description);
    }

    /**
     * Returns the first non-null value {@code probe} gives.
     *
     * @throws AssertionError naming {@code description} when there is none after {@code timeout}.
     */
    static <T> T value(final Duration timeout, final Supplier<T> probe, final Supplier<String> description)
    {
        final long startNs = System.nanoTime();
        final long timeoutNs = timeout.toNanos();
        while (true)
        {
            final T value = probe.get();
            if (value != null)
            {
                return value;
            }
            if (System.nanoTime() - startNs > timeoutNs)
            {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " +
                    description.get());
            }
            LockSupport.parkNanos(POLL_NS);
        }
    }
}
