package io.granary.client.internal;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Completes {@link #done()} once every operation a batch started has finished: created armed (one count held by the
 * batch itself), {@link #add()} once per operation before it starts, {@link #run()} by each operation when it is
 * done and once by the batch after the last start (so that operations finishing while others are still being
 * started cannot complete it early). The future completes on the thread of the last {@link #run()}. Thread safe.
 */
final class Countdown implements Runnable
{
    private final AtomicInteger left = new AtomicInteger(1);
    private final CompletableFuture<Void> done = new CompletableFuture<>();

    void add()
    {
        left.incrementAndGet();
    }

    @Override
    public void run()
    {
        if (left.decrementAndGet() == 0)
        {
            done.complete(null);
        }
    }

    CompletableFuture<Void> done()
    {
        return done;
    }
}
