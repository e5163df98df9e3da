package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.transfer.TransferEngine;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.locks.LockSupport;

/**
 * An executor whose tasks run on the thread that created it, while that thread waits in {@link #await}: the
 * synchronous API runs the steps after a transfer (a failover submit, PutEnd) this way, on the caller's own
 * thread, with no hand-off to a pool; with a transfer {@linkplain TransferEngine.Driver driver}, the waiting thread
 * also moves the call's bytes itself. {@link #execute} is thread safe (engine I/O threads call it); {@link #await}
 * is called once, by the creating thread. A task that arrives after the wait ended goes to the fallback executor.
 */
final class CallingThreadExecutor implements Executor
{
    private static final Logger LOG = LoggerFactory.getLogger(CallingThreadExecutor.class);
    /** Longest single wait in the transfers' selector; it returns earlier on every answer, timeout or task. */
    private static final long DRIVE_WAIT_NS = 100_000_000L;

    private final Thread owner = Thread.currentThread();
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final Executor fallback;
    private volatile boolean waiting = true;
    private volatile TransferEngine.Driver driver;

    CallingThreadExecutor(final Executor fallback)
    {
        this.fallback = fallback;
    }

    @Override
    public void execute(final Runnable task)
    {
        if (!waiting)
        {
            fallback.execute(task);
            return;
        }
        tasks.add(task);
        if (!waiting && tasks.remove(task))
        {
            fallback.execute(task); // the owner left between the check and the add
            return;
        }
        if (Thread.currentThread() != owner)
        {
            LockSupport.unpark(owner);
            final TransferEngine.Driver d = driver;
            if (d != null)
            {
                d.wakeup(); // the owner may be waiting in its transfers' selector
            }
        }
    }

    /**
     * Runs tasks on this thread until {@code future} is complete and returns its value. Not interruptible (like
     * {@link CompletableFuture#join()}); an interrupt is kept for the caller.
     *
     * @throws RuntimeException the failure the future completed with, unwrapped from CompletionException.
     */
    <T> T await(final CompletableFuture<T> future)
    {
        return await(future, null);
    }

    /**
     * {@link #await(CompletableFuture)} that, while {@code transfers} (may be null) has transfers open, waits by driving
     * them instead of parking: this thread then writes their frames and reads their answers itself.
     */
    <T> T await(final CompletableFuture<T> future, final TransferEngine.Driver transfers)
    {
        driver = transfers;
        // Completion, wherever it happens, lands here as a task, so the loop below never misses a wake-up.
        final CompletableFuture<T> delivered = future.whenCompleteAsync((value, ex) -> { }, this);
        boolean interrupted = false;
        try
        {
            while (!delivered.isDone())
            {
                final Runnable task = tasks.poll();
                if (task != null)
                {
                    run(task);
                    continue;
                }
                if (transfers != null && transfers.hasWork())
                {
                    transfers.drive(DRIVE_WAIT_NS);
                    continue;
                }
                LockSupport.park(this);
                interrupted |= Thread.interrupted();
            }
        }
        finally
        {
            driver = null;
            abandon();
            if (interrupted)
            {
                owner.interrupt();
            }
        }
        try
        {
            return future.join();
        }
        catch (final CompletionException ex)
        {
            throw rethrowable(ex);
        }
    }

    /** Ends the wait: tasks queued now or later go to the fallback executor. */
    void abandon()
    {
        waiting = false;
        for (Runnable late = tasks.poll(); late != null; late = tasks.poll())
        {
            fallback.execute(late);
        }
    }

    private static void run(final Runnable task)
    {
        try
        {
            task.run();
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("client task failed", ex); // our tasks complete their futures themselves; this is a bug
        }
    }

    /** The cause under CompletionException layers. */
    static Throwable unwrap(final Throwable ex)
    {
        Throwable cause = ex;
        while (cause instanceof CompletionException && cause.getCause() != null)
        {
            cause = cause.getCause();
        }
        return cause;
    }

    /** The failure to throw on the caller's thread: the unwrapped cause, an Error rethrown as it is. */
    static RuntimeException rethrowable(final Throwable ex)
    {
        final Throwable cause = unwrap(ex);
        if (cause instanceof RuntimeException)
        {
            return (RuntimeException)cause;
        }
        if (cause instanceof Error)
        {
            throw (Error)cause;
        }
        return new GranaryException(ErrorCode.INTERNAL_ERROR, "unexpected failure: " + cause, cause);
    }
}
