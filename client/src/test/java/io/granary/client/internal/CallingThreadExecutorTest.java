package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

class CallingThreadExecutorTest
{
    private final ExecutorService other = Executors.newSingleThreadExecutor(r -> new Thread(r, "other"));

    @AfterEach
    void tearDown()
    {
        other.shutdownNow();
    }

    @Test
    void shouldRunTasksFromOtherThreadsOnTheWaitingThread()
    {
        final List<String> fallback = new CopyOnWriteArrayList<>();
        final CallingThreadExecutor here = new CallingThreadExecutor(task -> fallback.add("used"));
        final CompletableFuture<Integer> transfer = new CompletableFuture<>();
        final CompletableFuture<String> step = transfer.thenApplyAsync(
            code -> Thread.currentThread().getName() + ":" + code, here);

        other.execute(() -> transfer.complete(7)); // as an engine I/O thread completes a transfer

        assertThat(here.await(step)).isEqualTo(Thread.currentThread().getName() + ":7");
        assertThat(fallback).isEmpty();
    }

    @Test
    void shouldThrowTheFailureUnwrapped()
    {
        final CallingThreadExecutor here = new CallingThreadExecutor(Runnable::run);
        final GranaryException failure = new GranaryException(ErrorCode.TRANSFER_FAIL, "boom");
        final CompletableFuture<Object> step = CompletableFuture.completedFuture(1).thenApplyAsync(v ->
        {
            throw failure;
        }, here);

        assertThat(catchThrowable(() -> here.await(step))).isSameAs(failure);
        assertThat(CallingThreadExecutor.unwrap(new CompletionException(new CompletionException(failure))))
            .isSameAs(failure);
    }

    @Test
    void shouldHandLateTasksToTheFallbackAndKeepAnInterrupt()
    {
        final List<Runnable> fallback = new CopyOnWriteArrayList<>();
        final CallingThreadExecutor here = new CallingThreadExecutor(fallback::add);
        Thread.currentThread().interrupt();

        assertThat(here.await(CompletableFuture.completedFuture("done"))).isEqualTo("done");
        assertThat(Thread.interrupted()).isTrue();
        final Runnable late = () -> { };
        here.execute(late);
        assertThat(fallback).containsExactly(late);
    }
}
