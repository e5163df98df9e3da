package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The client's front of its {@link TransferEngine}: counts transfers in flight per endpoint (the load
 * the replica choice reads) and turns any engine misbehaviour into a TRANSFER_FAIL code, so every
 * returned future completes normally with an ErrorCode number. Thread safe.
 */
final class TransferDispatcher implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(TransferDispatcher.class);
    private static final int TRANSFER_FAIL = ErrorCode.TRANSFER_FAIL.code();
    private static final int UNAVAILABLE = ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS.code();
    private static final CompletableFuture<Integer> CLOSED = CompletableFuture.completedFuture(UNAVAILABLE);

    private final TransferEngine engine;
    private final ConcurrentHashMap<String, AtomicInteger> inFlight = new ConcurrentHashMap<>();
    private volatile boolean closed;

    TransferDispatcher(final TransferEngine engine)
    {
        this.engine = engine;
    }

    /** {@link TransferEngine#registerMemory}. */
    boolean registerMemory(final ByteBuffer buffer)
    {
        TransferEngine.checkRegistrable(buffer);
        if (closed)
        {
            throw new IllegalStateException("the client is closed");
        }
        return engine.registerMemory(buffer);
    }

    /** {@link TransferEngine#unregisterMemory}. */
    boolean unregisterMemory(final ByteBuffer buffer)
    {
        return engine.unregisterMemory(buffer);
    }

    /** Where {@link #submit(TransferRequest, Outcome, int)} reports a transfer's ErrorCode number. */
    interface Outcome
    {
        /** Transfer {@code index} finished with {@code code} (0 = OK); runs on the thread that finished it. */
        void settled(int index, int code);
    }

    /**
     * Submits {@code request}; the future completes normally with an ErrorCode number (0 = OK), or at once with
     * UNAVAILABLE_IN_CURRENT_STATUS after {@link #close()}.
     */
    CompletableFuture<Integer> submit(final TransferRequest request)
    {
        if (closed)
        {
            return CLOSED;
        }
        final AtomicInteger counter = counted(request);
        final CompletableFuture<Integer> future = engineSubmit(request, counter);
        if (future == null)
        {
            return CompletableFuture.completedFuture(TRANSFER_FAIL);
        }
        return future.handle((code, ex) -> settle(request, counter, code, ex));
    }

    /**
     * {@link #submit(TransferRequest)} reporting the code to {@code outcome} as transfer {@code index} instead of
     * through a future of its own (a batch's writes: one callback each, no future chain); it may run before this
     * returns.
     */
    void submit(final TransferRequest request, final Outcome outcome, final int index)
    {
        if (closed)
        {
            outcome.settled(index, UNAVAILABLE);
            return;
        }
        final AtomicInteger counter = counted(request);
        final CompletableFuture<Integer> future = engineSubmit(request, counter);
        if (future == null)
        {
            outcome.settled(index, TRANSFER_FAIL);
            return;
        }
        future.whenComplete((code, ex) -> outcome.settled(index, settle(request, counter, code, ex)));
    }

    private AtomicInteger counted(final TransferRequest request)
    {
        final AtomicInteger counter = inFlight.computeIfAbsent(request.endpoint(), e -> new AtomicInteger());
        counter.incrementAndGet();
        return counter;
    }

    /** The engine's future, or null (the counter put back) when the engine refused or threw. */
    private CompletableFuture<Integer> engineSubmit(final TransferRequest request, final AtomicInteger counter)
    {
        CompletableFuture<Integer> future;
        try
        {
            future = engine.submit(request);
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("transfer engine refused {}", request, ex);
            future = null;
        }
        if (future == null)
        {
            counter.decrementAndGet();
        }
        return future;
    }

    private static int settle(
        final TransferRequest request, final AtomicInteger counter, final Integer code, final Throwable ex)
    {
        counter.decrementAndGet();
        if (ex != null || code == null)
        {
            LOG.warn("transfer engine broke its contract for {}", request, ex);
            return TRANSFER_FAIL;
        }
        return code;
    }

    /** Lets this thread drive its own transfers until the driver is closed; null when the engine cannot. */
    TransferEngine.Driver openDriver()
    {
        if (closed)
        {
            return null;
        }
        try
        {
            return engine.openDriver();
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("transfer engine could not open a driver", ex);
            return null;
        }
    }

    /** Transfers this client has in flight to {@code endpoint}. */
    int inFlight(final String endpoint)
    {
        final AtomicInteger counter = inFlight.get(endpoint);
        return counter == null ? 0 : counter.get();
    }

    @Override
    public void close()
    {
        closed = true;
        engine.close();
    }
}
