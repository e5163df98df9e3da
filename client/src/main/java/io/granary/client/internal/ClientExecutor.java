package io.granary.client.internal;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.Executor;
import java.util.concurrent.PriorityBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The client's own small pool of daemon threads ({@code granary-client-N}): runs the blocking master calls of
 * asynchronous calls and their steps after a transfer, so that engine I/O threads never block and callers'
 * callbacks never run on them. Steps of calls already under way ({@link #execute}) go before new calls
 * ({@link #startCall}), so a burst of new calls cannot hold back the PutEnd or the result of one whose transfers are
 * done (and whose buffers are still held). Threads start on first use, so a client used only synchronously starts
 * none. Thread safe.
 */
final class ClientExecutor implements Executor
{
    /** Threads per client; a constant until ClientConfig grows a setting for it. */
    static final int DEFAULT_THREADS = 2;

    private static final Logger LOG = LoggerFactory.getLogger(ClientExecutor.class);
    private static final AtomicInteger THREAD_IDS = new AtomicInteger();

    private static final int STEP = 0;
    private static final int CALL = 1;

    private final ThreadPoolExecutor pool;
    private final AtomicLong sequence = new AtomicLong();

    ClientExecutor(final int threads)
    {
        // The queue is unbounded on purpose: the transfer engine bounds what is in flight per storage node, and
        // refusing an asynchronous call here would turn a burst into failures the caller cannot tell apart.
        this.pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new PriorityBlockingQueue<>(),
            this::newThread, (task, executor) -> task.run()); // after shutdown: run on the submitting thread
    }

    private Thread newThread(final Runnable task)
    {
        final Thread thread = new ClientThread(this, task, "granary-client-" + THREAD_IDS.incrementAndGet());
        thread.setDaemon(true);
        return thread;
    }

    /** Runs a step of a call under way: before any new call, in order of arrival among steps. */
    @Override
    public void execute(final Runnable task)
    {
        pool.execute(new Task(task, STEP, sequence.getAndIncrement()));
    }

    /** Starts a new call once no step of an earlier one is waiting, in order of arrival among calls. */
    void startCall(final Runnable task)
    {
        pool.execute(new Task(task, CALL, sequence.getAndIncrement()));
    }

    /** Whether the calling thread is one of this pool's. */
    boolean isPoolThread()
    {
        final Thread current = Thread.currentThread();
        return current instanceof ClientThread && ((ClientThread)current).owner == this;
    }

    boolean isShutdown()
    {
        return pool.isShutdown();
    }

    /**
     * Stops taking tasks (later ones run on the submitting thread), lets the queued ones run and waits up to
     * {@code timeoutMs} for them, unless called from one of its own threads, which cannot wait for itself.
     */
    void shutdown(final long timeoutMs)
    {
        pool.shutdown();
        if (isPoolThread())
        {
            return;
        }
        try
        {
            if (!pool.awaitTermination(timeoutMs, TimeUnit.MILLISECONDS))
            {
                LOG.warn("client threads still busy {} ms after close; leaving them to finish", timeoutMs);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private record Task(Runnable body, int priority, long sequence) implements Runnable, Comparable<Task>
    {
        @Override
        public void run()
        {
            body.run();
        }

        @Override
        public int compareTo(final Task other)
        {
            return priority != other.priority ?
                Integer.compare(priority, other.priority) : Long.compare(sequence, other.sequence);
        }
    }

    private static final class ClientThread extends Thread
    {
        final ClientExecutor owner;

        ClientThread(final ClientExecutor owner, final Runnable task, final String name)
        {
            super(task, name);
            this.owner = owner;
        }
    }
}
