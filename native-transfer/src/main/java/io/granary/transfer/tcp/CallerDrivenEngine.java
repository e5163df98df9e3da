package io.granary.transfer.tcp;

import io.granary.transfer.AdmissionStats;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Java TCP {@link TransferEngine} whose callers can move their own bytes: a thread that has opened a driver
 * ({@link #openDriver()}) submits onto its own {@link CallerLoop} and carries the transfers out itself while it
 * waits, so a synchronous get or put crosses no thread boundary on the client (the calling thread writes the
 * frames, sleeps in the selector and reads the answer straight into its buffer). Submits from other threads go to a
 * {@link NettyTransferEngine} made on first use. Loops (a selector and a connection per node each) are pooled and
 * lent to one thread at a time. Thread safe.
 */
public final class CallerDrivenEngine implements TransferEngine, AdmissionStats
{
    private static final Logger LOG = LoggerFactory.getLogger(CallerDrivenEngine.class);
    /** Idle loops kept (each holds a selector and a connection per node it has talked to). */
    static final int MAX_IDLE_LOOPS = 64;

    private final TransferConfig config;
    private final ThreadLocal<CallerLoop> current = new ThreadLocal<>();
    private final ConcurrentLinkedDeque<CallerLoop> idle = new ConcurrentLinkedDeque<>();
    private final AtomicInteger idleCount = new AtomicInteger();
    private final Set<CallerLoop> lent = ConcurrentHashMap.newKeySet();
    private final Object fallbackLock = new Object();
    private final LongAdder drivenTransfers = new LongAdder();
    private volatile NettyTransferEngine fallback;
    private volatile boolean closed;

    /** @throws IllegalArgumentException for a bad setting. */
    public CallerDrivenEngine(final TransferConfig config)
    {
        this.config = config.copy().conclude();
        if (this.config.tls().isEnabled())
        {
            throw new IllegalArgumentException("caller-driven transfers do not speak TLS; use the Netty engine");
        }
    }

    @Override
    public TransportKind kind()
    {
        return TransportKind.JAVA;
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        final CallerLoop loop = current.get();
        if (loop == null)
        {
            return fallback().submit(request);
        }
        if (closed)
        {
            return CompletableFuture.completedFuture(TRANSFER_FAIL_VALUE);
        }
        final byte[] token = request.accessToken();
        final FrameToken frameToken =
            token == null ? null : FrameToken.of(token, request.grantOffset(), request.grantLength());
        if ((token != null && (frameToken == null || !request.withinGrant())) ||
            (request.op() == TransferRequest.Op.READ && request.local().isReadOnly()))
        {
            return CompletableFuture.completedFuture(INVALID_PARAMS_VALUE);
        }
        drivenTransfers.increment();
        return loop.submit(request, frameToken);
    }

    /**
     * Lends this thread a loop until the driver is closed. A thread that already holds one gets a driver that leaves
     * it to the outer scope (nested calls share the outer loop). Null after {@link #close()} or when no selector can
     * be opened (the thread's transfers then go to the Netty engine).
     */
    @Override
    public Driver openDriver()
    {
        if (closed)
        {
            return null;
        }
        final CallerLoop held = current.get();
        if (held != null)
        {
            return new NestedDriver(held);
        }
        CallerLoop loop = idle.poll();
        if (loop != null)
        {
            idleCount.decrementAndGet();
        }
        else
        {
            try
            {
                loop = new CallerLoop(this, config);
            }
            catch (final IOException ex)
            {
                LOG.warn("cannot open a selector for a caller loop ({}); using the engine's threads", ex.toString());
                return null;
            }
        }
        lent.add(loop);
        current.set(loop);
        return loop;
    }

    /** A loop's driver was closed: the thread gives it back. */
    void release(final CallerLoop loop)
    {
        current.remove();
        lent.remove(loop);
        if (closed || idleCount.incrementAndGet() > MAX_IDLE_LOOPS)
        {
            idleCount.decrementAndGet();
            loop.destroy();
            return;
        }
        idle.push(loop);
        if (closed && idle.remove(loop))
        {
            idleCount.decrementAndGet();
            loop.destroy(); // raced with close()
        }
    }

    boolean isClosed()
    {
        return closed;
    }

    /** Transfers carried out by their callers' own threads so far. */
    public long drivenTransfers()
    {
        return drivenTransfers.sum();
    }

    /** Transfers admitted to a node's queue by the threaded engine (caller-driven ones have no queue). */
    @Override
    public long admittedTransfers()
    {
        final NettyTransferEngine engine = fallback;
        return engine == null ? 0 : engine.admittedTransfers();
    }

    /** Threaded-engine transfers refused with UNAVAILABLE_IN_CURRENT_STATUS at once (queue and admissions full). */
    @Override
    public long rejectedQueueFull()
    {
        final NettyTransferEngine engine = fallback;
        return engine == null ? 0 : engine.rejectedQueueFull();
    }

    /** Threaded-engine pending admissions that gave up after the admission timeout. */
    @Override
    public long rejectedAdmissionTimeout()
    {
        final NettyTransferEngine engine = fallback;
        return engine == null ? 0 : engine.rejectedAdmissionTimeout();
    }

    /** The engine used for submits outside a driver scope (the async API), or null if none was needed yet. */
    public NettyTransferEngine threadedEngineOrNull()
    {
        return fallback;
    }

    private NettyTransferEngine fallback()
    {
        NettyTransferEngine engine = fallback;
        if (engine == null)
        {
            synchronized (fallbackLock)
            {
                engine = fallback;
                if (engine == null)
                {
                    engine = new NettyTransferEngine(config);
                    fallback = engine;
                    if (closed)
                    {
                        engine.close();
                    }
                }
            }
        }
        return engine;
    }

    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        for (final CallerLoop loop : lent)
        {
            loop.wakeup(); // its owner fails what is open at its next drive
        }
        for (CallerLoop loop = idle.poll(); loop != null; loop = idle.poll())
        {
            idleCount.decrementAndGet();
            loop.destroy();
        }
        synchronized (fallbackLock)
        {
            if (fallback != null)
            {
                fallback.close();
            }
        }
    }

    /** The driver of a nested call: the outer scope's loop does the work and ends the scope. */
    private static final class NestedDriver implements Driver
    {
        private final CallerLoop loop;

        NestedDriver(final CallerLoop loop)
        {
            this.loop = loop;
        }

        @Override
        public boolean hasWork()
        {
            return loop.hasWork();
        }

        @Override
        public void drive(final long maxWaitNs)
        {
            loop.drive(maxWaitNs);
        }

        @Override
        public void wakeup()
        {
            loop.wakeup();
        }

        @Override
        public void close()
        {
        }
    }
}
