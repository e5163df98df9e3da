package io.granary.cli;

import sun.misc.Signal;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Turns SIGTERM and SIGINT into a request to stop, so that a foreground service closes itself in order and
 * exits 0 (the JVM's own handlers would exit 143/130). A shutdown hook still closes the service on any
 * other way out. Thread safe; signal handlers only count a latch down.
 */
final class Termination
{
    private final CountDownLatch requested = new CountDownLatch(1);

    private Termination()
    {
    }

    /** Installs the handlers; from now on SIGTERM/SIGINT only release {@link #await()}. */
    static Termination install()
    {
        final Termination termination = new Termination();
        for (final String name : new String[]{"TERM", "INT"})
        {
            try
            {
                Signal.handle(new Signal(name), signal -> termination.requested.countDown());
            }
            catch (final IllegalArgumentException ex)
            {
                // The signal is reserved here (e.g. the JVM runs with -Xrs); the shutdown hook still closes.
            }
        }
        return termination;
    }

    /** Blocks until a stop was requested. */
    void await() throws InterruptedException
    {
        requested.await();
    }

    /** @return true when a stop was requested within the timeout. */
    boolean await(final long timeout, final TimeUnit unit) throws InterruptedException
    {
        return requested.await(timeout, unit);
    }

    /** Runs {@code closer} if the JVM exits before the service closed itself. @return the hook, for removal. */
    static Thread closeOnExit(final String name, final AutoCloseable closer)
    {
        final Thread hook = new Thread(() ->
        {
            try
            {
                closer.close();
            }
            catch (final Exception ex)
            {
                System.err.println("error: closing " + name + " failed: " + ex);
            }
        }, name + "-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        return hook;
    }

    /** Removes a hook from {@link #closeOnExit}; a no-op once the JVM is shutting down. */
    static void removeHook(final Thread hook)
    {
        try
        {
            Runtime.getRuntime().removeShutdownHook(hook);
        }
        catch (final IllegalStateException ex)
        {
            // Shutdown in progress: the hook runs, and closing twice is harmless.
        }
    }
}
