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
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Test double of a {@link TransferEngine}: keeps written extents in memory, keyed by endpoint, segment
 * and offset, and completes every transfer at once on the submitting thread. Endpoints can be told to
 * fail with a code. Records every request. Thread safe.
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

    @Override
    public TransportKind kind()
    {
        return TransportKind.JAVA;
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        synchronized (deferred)
        {
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
