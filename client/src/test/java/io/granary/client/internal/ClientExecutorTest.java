package io.granary.client.internal;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

class ClientExecutorTest
{
    @Test
    void shouldRunStepsOfCallsUnderWayBeforeNewCalls() throws Exception
    {
        final ClientExecutor executor = new ClientExecutor(1);
        final CountDownLatch busy = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final List<String> order = new CopyOnWriteArrayList<>();
        try
        {
            executor.startCall(() ->
            {
                busy.countDown();
                await(release);
            });
            assertThat(busy.await(10, TimeUnit.SECONDS)).isTrue();
            executor.startCall(() -> order.add("call-1"));
            executor.startCall(() -> order.add("call-2"));
            executor.execute(() -> order.add("step-1"));
            executor.execute(() -> order.add("step-2"));
            final CompletableFuture<Void> last = new CompletableFuture<>();
            executor.startCall(() -> last.complete(null));

            release.countDown();
            last.get(10, TimeUnit.SECONDS);

            assertThat(order).containsExactly("step-1", "step-2", "call-1", "call-2");
        }
        finally
        {
            release.countDown();
            executor.shutdown(10_000);
        }
    }

    @Test
    void shouldRunOnNamedDaemonThreadsItRecognises() throws Exception
    {
        final ClientExecutor executor = new ClientExecutor(2);
        try
        {
            final CompletableFuture<String> seen = new CompletableFuture<>();
            executor.execute(() -> seen.complete(Thread.currentThread().getName() + " daemon=" +
                Thread.currentThread().isDaemon() + " own=" + executor.isPoolThread()));

            assertThat(seen.get(10, TimeUnit.SECONDS)).matches("granary-client-\\d+ daemon=true own=true");
            assertThat(executor.isPoolThread()).isFalse();
        }
        finally
        {
            executor.shutdown(10_000);
        }
    }

    @Test
    void shouldRunTasksOnTheSubmittingThreadAfterShutdownAndNotWaitForItselfInShutdown() throws Exception
    {
        final ClientExecutor executor = new ClientExecutor(1);
        final CompletableFuture<Boolean> shutdownFromPool = new CompletableFuture<>();
        executor.execute(() ->
        {
            executor.shutdown(60_000); // must return at once: it cannot wait for its own thread
            shutdownFromPool.complete(executor.isShutdown());
        });
        assertThat(shutdownFromPool.get(10, TimeUnit.SECONDS)).isTrue();

        final String[] ranOn = new String[1];
        executor.execute(() -> ranOn[0] = Thread.currentThread().getName());

        assertThat(ranOn[0]).isEqualTo(Thread.currentThread().getName());
    }

    private static void await(final CountDownLatch latch)
    {
        try
        {
            latch.await(10, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
