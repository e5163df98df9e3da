package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Test double of a {@link TransferEngine}: keeps written extents in memory, keyed by endpoint, segment
 * and offset, and completes every transfer at once on the submitting thread, or on a given executor (standing in
 * for engine I/O threads), or when a test releases the transfers it holds. Endpoints can be told to fail with a
 * code. Records every request, the threads that submitted them and the most transfers in flight at once. Thread
 * safe.
 */
final class InMemoryTransferEngine implements TransferEngine
{
    record Extent(String endpoint, int segmentId, long offset)
    {
    }

    private final Map<Extent, byte[]> extents = new ConcurrentHashMap<>();
    private final Map<String, Integer> failing = new ConcurrentHashMap<>();
    private final List<TransferRequest> requests = new CopyOnWriteArrayList<>();
    private volatile Consumer<TransferRequest> beforeCompletion = r -> { };
    private volatile Predicate<TransferRequest> failWhen = r -> false;
    private volatile int failWhenCode;
    private volatile boolean closed;
    private final List<Runnable> deferred = new ArrayList<>();
    private int deferUntil;
    private final List<Runnable> held = new ArrayList<>(); // guarded by deferred
    private boolean holding; // guarded by deferred
    private final List<String> submitThreads = new CopyOnWriteArrayList<>();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger maxInFlight = new AtomicInteger();
    private volatile Executor completions = Runnable::run;

    @Override
    public TransportKind kind()
    {
        return TransportKind.JAVA;
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        submitThreads.add(Thread.currentThread().getName());
        maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
        final CompletableFuture<Integer> result = new CompletableFuture<>();
        complete(request).thenAccept(code -> completions.execute(() ->
        {
            inFlight.decrementAndGet();
            result.complete(code);
        }));
        return result;
    }

    private CompletableFuture<Integer> complete(final TransferRequest request)
    {
        synchronized (deferred)
        {
            if (holding)
            {
                final CompletableFuture<Integer> future = new CompletableFuture<>();
                held.add(() -> execute(request).thenAccept(future::complete));
                return future;
            }
            if (deferUntil > 0)
            {
                // Hold this transfer open until enough have arrived, then finish them all (as if in flight together).
                final CompletableFuture<Integer> future = new CompletableFuture<>();
                deferred.add(() -> execute(request).thenAccept(future::complete));
                if (deferred.size() >= deferUntil)
                {
                    deferUntil = 0;
                    final List<Runnable> ready = new ArrayList<>(deferred);
                    deferred.clear();
                    ready.forEach(Runnable::run);
                }
                return future;
            }
        }
        return execute(request);
    }

    private CompletableFuture<Integer> execute(final TransferRequest request)
    {
        requests.add(request);
        beforeCompletion.accept(request);
        if (closed)
        {
            return CompletableFuture.completedFuture(ErrorCode.TRANSFER_FAIL.code());
        }
        final Integer failure = failing.get(request.endpoint());
        if (failure != null)
        {
            return CompletableFuture.completedFuture(failure);
        }
        if (failWhen.test(request))
        {
            return CompletableFuture.completedFuture(failWhenCode);
        }
        final Extent extent = new Extent(request.endpoint(), request.segmentId(), request.remoteOffset());
        final ByteBuffer local = request.local().duplicate();
        if (request.op() == TransferRequest.Op.WRITE)
        {
            final byte[] bytes = new byte[request.length()];
            local.get(bytes);
            extents.put(extent, bytes);
            return CompletableFuture.completedFuture(0);
        }
        final byte[] stored = extents.get(extent);
        if (stored == null || stored.length != request.length())
        {
            return CompletableFuture.completedFuture(ErrorCode.INVALID_PARAMS.code());
        }
        local.put(stored);
        return CompletableFuture.completedFuture(0);
    }

    @Override
    public void close()
    {
        closed = true;
        releaseHeld(); // like a real engine, close fails what is outstanding (execute sees closed)
    }

    /** Every transfer submitted from now on stays in flight until {@link #releaseHeld()} or {@link #close()}. */
    void holdCompletions()
    {
        synchronized (deferred)
        {
            holding = true;
        }
    }

    /** Stops holding and completes every held transfer. */
    void releaseHeld()
    {
        final List<Runnable> ready;
        synchronized (deferred)
        {
            holding = false;
            ready = new ArrayList<>(held);
            held.clear();
        }
        ready.forEach(Runnable::run);
    }

    /** Completes transfers on {@code executor} from now on, as an engine completes them on its I/O threads. */
    void completeOn(final Executor executor)
    {
        completions = executor;
    }

    /** Transfers submitted and not completed yet. */
    int inFlight()
    {
        return inFlight.get();
    }

    /** The most transfers that were in flight at once. */
    int maxInFlight()
    {
        return maxInFlight.get();
    }

    /** The names of the threads that called submit, in order. */
    List<String> submitThreads()
    {
        return List.copyOf(submitThreads);
    }

    boolean isClosed()
    {
        return closed;
    }

    /** The next {@code transfers} submits stay in flight until the last of them arrives. */
    void holdInFlightUntil(final int transfers)
    {
        synchronized (deferred)
        {
            deferUntil = transfers;
        }
    }

    /** Every transfer to {@code endpoint} completes with {@code code}. */
    void fail(final String endpoint, final ErrorCode code)
    {
        failing.put(endpoint, code.code());
    }

    /** Every transfer matching {@code condition} completes with {@code code}. */
    void failWhen(final Predicate<TransferRequest> condition, final ErrorCode code)
    {
        failWhenCode = code.code();
        failWhen = condition;
    }

    void heal(final String endpoint)
    {
        failing.remove(endpoint);
    }

    /** Runs {@code hook} on each submit before it completes (e.g. to move a ManualClock). */
    void beforeCompletion(final Consumer<TransferRequest> hook)
    {
        beforeCompletion = hook;
    }

    List<TransferRequest> requests()
    {
        return List.copyOf(requests);
    }

    List<TransferRequest> requests(final TransferRequest.Op op)
    {
        return requests.stream().filter(r -> r.op() == op).toList();
    }

    /** The bytes written to an extent, or null. */
    byte[] stored(final String endpoint, final int segmentId, final long offset)
    {
        return extents.get(new Extent(endpoint, segmentId, offset));
    }

    /** Puts bytes into an extent directly, as if a node held them. */
    void store(final String endpoint, final int segmentId, final long offset, final byte[] bytes)
    {
        extents.put(new Extent(endpoint, segmentId, offset), bytes.clone());
    }
}
