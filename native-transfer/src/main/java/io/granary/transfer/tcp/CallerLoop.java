package io.granary.transfer.tcp;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * The I/O loop of one calling thread ({@link TransferEngine.Driver}): a selector, connections to the storage nodes
 * the thread has talked to, and the transfers submitted since the driver was opened. Frames above 64 KiB (the slices
 * of big values) go round-robin over up to {@code lanesPerPeer} connections per node, so several of the node's
 * threads serve one value; smaller frames keep to the first connection, where another would add system calls and
 * no parallelism. Pooled by its
 * {@link CallerDrivenEngine} and lent to one thread at a time; confined to that thread except {@link #wakeup()} and
 * {@link #execute(Runnable)}.
 */
final class CallerLoop implements TransferEngine.Driver
{
    private static final Logger LOG = LoggerFactory.getLogger(CallerLoop.class);

    private final CallerDrivenEngine engine;
    private final TransferConfig config;
    private final Selector selector;
    /** By {@link #key(String, int)}. */
    private final HashMap<String, DirectConnection> connections = new HashMap<>();
    /** A copy of the connections to walk: a failing connection may replace itself in the map meanwhile. */
    private final ArrayList<DirectConnection> walk = new ArrayList<>();
    private final HashMap<String, InetSocketAddress> addresses = new HashMap<>();
    private final Set<DirectTransfer> open = new LinkedHashSet<>();
    private final ArrayList<CompletableFuture<Integer>> finishedFutures = new ArrayList<>();
    private final ArrayList<Integer> finishedCodes = new ArrayList<>();
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final long transferTimeoutNs;
    private final long connectTimeoutNs;
    private int refusal;
    private int nextLane;
    private boolean destroyed;

    CallerLoop(final CallerDrivenEngine engine, final TransferConfig config) throws IOException
    {
        this.engine = engine;
        this.config = config;
        this.selector = Selector.open();
        this.transferTimeoutNs = TimeUnit.MILLISECONDS.toNanos(config.transferTimeoutMs());
        this.connectTimeoutNs = TimeUnit.MILLISECONDS.toNanos(config.connectTimeoutMs());
    }

    /** Starts a transfer on this loop; it moves when the owner drives the loop. */
    CompletableFuture<Integer> submit(final TransferRequest request, final FrameToken token)
    {
        final DirectConnection connection = connectionTo(request.endpoint(), 0);
        if (connection == null)
        {
            return CompletableFuture.completedFuture(refusal);
        }
        final DirectTransfer transfer =
            new DirectTransfer(this, connection, request, token, config.sliceBytes(), config.writeCommits());
        open.add(transfer);
        transfer.start();
        return transfer.future;
    }

    /**
     * The connection to {@code endpoint}: the pooled one if it is still good, else a new one; null (with the code in
     * {@link #refusal}) when there can be none: INVALID_PARAMS for a malformed endpoint, TRANSFER_FAIL when the host
     * does not resolve or the socket cannot be opened.
     */
    private DirectConnection connectionTo(final String endpoint, final int lane)
    {
        final String key = key(endpoint, lane);
        final DirectConnection existing = connections.get(key);
        if (existing != null)
        {
            if (!existing.isBroken() && (!existing.isIdle() || existing.stillUsable()))
            {
                return existing;
            }
            connections.remove(key);
        }
        InetSocketAddress address = addresses.get(endpoint);
        if (address == null)
        {
            address = NettyTransferEngine.parseEndpoint(endpoint);
            if (address == null)
            {
                refusal = INVALID_PARAMS_VALUE;
                return null;
            }
            if (address.isUnresolved())
            {
                refusal = TRANSFER_FAIL_VALUE; // not remembered: name resolution may work later
                return null;
            }
            addresses.put(endpoint, address);
        }
        try
        {
            final DirectConnection fresh = new DirectConnection(this, endpoint, lane, address, selector,
                config.maxVectorEntries(),
                transferTimeoutNs, connectTimeoutNs, System.nanoTime());
            connections.put(key, fresh);
            return fresh;
        }
        catch (final IOException | RuntimeException ex)
        {
            LOG.debug("connect to {} failed: {}", endpoint, ex.toString());
            refusal = TRANSFER_FAIL_VALUE;
            return null;
        }
    }

    /**
     * Frames of a pooled connection that turned out stale go out again, once, on a fresh connection (which is not
     * retried again); they fail with TRANSFER_FAIL if none can be opened.
     */
    void resend(final String endpoint, final int lane, final List<DirectFrame.Slice> frames)
    {
        connections.remove(key(endpoint, lane));
        if (frames.isEmpty())
        {
            return;
        }
        final DirectConnection fresh = connectionTo(endpoint, lane);
        for (final DirectFrame.Slice frame : frames)
        {
            if (fresh == null)
            {
                frame.finish(TRANSFER_FAIL_VALUE);
            }
            else
            {
                frame.requestId = 0;
                fresh.enqueue(frame);
            }
        }
    }

    /**
     * The connection for a frame of {@code length} bytes to the node of {@code first} (its lane 0): {@code first} for
     * a frame below {@link TransferConfig#CALLER_SPREAD_MIN_BYTES}, else the next lane round-robin ({@code first}
     * again when that lane's connection cannot be opened).
     */
    DirectConnection laneFor(final DirectConnection first, final int length)
    {
        if (length < TransferConfig.CALLER_SPREAD_MIN_BYTES)
        {
            return first;
        }
        final int lane = Math.floorMod(nextLane++, config.lanesPerPeer());
        if (lane == 0)
        {
            return first;
        }
        final DirectConnection other = connectionTo(first.endpoint, lane);
        return other != null ? other : first;
    }

    /** The key of {@link #connections} (a malformed endpoint never gets one, so no two can clash). */
    private static String key(final String endpoint, final int lane)
    {
        return lane == 0 ? endpoint : endpoint + '\n' + lane;
    }

    /** A transfer finished: its future completes when the driving thread runs completions (never mid-I/O). */
    void complete(final CompletableFuture<Integer> future, final int status)
    {
        finishedFutures.add(future);
        finishedCodes.add(status);
    }

    /** Runs {@code task} on the driving thread at its next {@link #drive}; safe from any thread. */
    void execute(final Runnable task)
    {
        tasks.add(task);
        selector.wakeup();
    }

    @Override
    public boolean hasWork()
    {
        return !open.isEmpty() || !finishedFutures.isEmpty() || !tasks.isEmpty();
    }

    @Override
    public void drive(final long maxWaitNs)
    {
        if (engine.isClosed())
        {
            failAll("the transfer engine was closed");
            runCompletions();
            return;
        }
        runTasks();
        for (final DirectConnection connection : connections())
        {
            connection.flush();
        }
        if (finishedFutures.isEmpty())
        {
            long deadline = Long.MAX_VALUE;
            final long now = System.nanoTime();
            for (final DirectConnection connection : connections())
            {
                deadline = Math.min(deadline, connection.checkTimeouts(now));
            }
            if (finishedFutures.isEmpty() && tasks.isEmpty())
            {
                select(Math.min(Math.max(0, maxWaitNs), deadline == Long.MAX_VALUE ? Long.MAX_VALUE : deadline - now));
                final long after = System.nanoTime();
                for (final DirectConnection connection : connections())
                {
                    connection.checkTimeouts(after);
                }
            }
        }
        runCompletions();
    }

    private List<DirectConnection> connections()
    {
        walk.clear();
        walk.addAll(connections.values());
        return walk;
    }

    private void select(final long waitNs)
    {
        try
        {
            final int ready = waitNs <= 0 ? selector.selectNow() :
                selector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(waitNs + 999_999)));
            if (ready == 0)
            {
                return;
            }
            final Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext())
            {
                final SelectionKey key = it.next();
                it.remove();
                if (key.isValid())
                {
                    ((DirectConnection)key.attachment()).onReady(key);
                }
            }
        }
        catch (final IOException ex)
        {
            failAll("selector failed: " + ex);
        }
    }

    private void runTasks()
    {
        for (Runnable task = tasks.poll(); task != null; task = tasks.poll())
        {
            task.run();
        }
    }

    private void runCompletions()
    {
        // Completing runs the callers' continuations, which may submit more: take this round's list first.
        while (!finishedFutures.isEmpty())
        {
            final ArrayList<CompletableFuture<Integer>> futures = new ArrayList<>(finishedFutures);
            final ArrayList<Integer> codes = new ArrayList<>(finishedCodes);
            finishedFutures.clear();
            finishedCodes.clear();
            for (int i = 0; i < futures.size(); i++)
            {
                futures.get(i).complete(codes.get(i));
            }
        }
    }

    /** {@code transfer} is done (called by it right before {@link #complete}). */
    void forget(final DirectTransfer transfer)
    {
        open.remove(transfer);
    }

    @Override
    public void wakeup()
    {
        selector.wakeup();
    }

    /** Fails every transfer still open and closes every connection. */
    private void failAll(final String reason)
    {
        for (final DirectConnection connection : connections())
        {
            connection.close();
        }
        connections.clear();
        for (final DirectTransfer transfer : new ArrayList<>(open))
        {
            transfer.abandon(TRANSFER_FAIL_VALUE);
        }
    }

    @Override
    public void close()
    {
        runTasks();
        // Whatever is still open (a call that gave up early) must let go of the callers' buffers now.
        if (!open.isEmpty())
        {
            for (final DirectConnection connection : connections())
            {
                if (!connection.isIdle())
                {
                    connection.close(); // closing never sends anything again
                    connections.remove(key(connection.endpoint, connection.lane), connection);
                }
            }
            for (final DirectTransfer transfer : new ArrayList<>(open))
            {
                transfer.abandon(TRANSFER_FAIL_VALUE);
            }
        }
        connections.values().removeIf(connection ->
        {
            if (connection.isReusable())
            {
                return false;
            }
            connection.close();
            return true;
        });
        runCompletions();
        tasks.clear();
        engine.release(this);
    }

    /** Closes the selector and every connection; the loop is not used again. */
    void destroy()
    {
        if (destroyed)
        {
            return;
        }
        destroyed = true;
        for (final DirectConnection connection : connections.values())
        {
            connection.close();
        }
        connections.clear();
        try
        {
            selector.close();
        }
        catch (final IOException ex)
        {
            LOG.debug("closing a caller loop's selector: {}", ex.toString());
        }
    }
}
