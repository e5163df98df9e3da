package io.granary.node;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Waits for a condition with a deadline instead of sleeping for a guessed time. */
public final class Await
{
    public static final long DEFAULT_TIMEOUT_MS = 10_000;

    private Await()
    {
    }

    public static void until(final String what, final BooleanSupplier condition)
    {
        until(what, DEFAULT_TIMEOUT_MS, condition);
    }

    public static void until(final String what, final long timeoutMs, final BooleanSupplier condition)
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() - deadlineNs > 0)
            {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for: " + what);
            }
            try
            {
                Thread.sleep(2);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for: " + what);
            }
        }
    }
}
