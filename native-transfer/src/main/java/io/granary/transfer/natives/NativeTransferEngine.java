package io.granary.transfer.natives;

import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.AdmissionStats;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;

/**
 * The native TCP {@link TransferEngine}: the C engine of libgranary_transfer moves the bytes (epoll, lanes per peer,
 * frames sent from and received into the caller's memory, slicing, admission, timeouts, the COMMIT after a WRITE),
 * one Java thread runs its event loop and completes the futures. A heap buffer is staged through a direct copy;
 * direct buffers are used in place. Thread safe: submit never blocks on I/O; futures complete on the engine thread.
 */
public final class NativeTransferEngine implements TransferEngine, AdmissionStats
{
    private static final Logger LOG = LoggerFactory.getLogger(NativeTransferEngine.class);
    private static final int POLL_BATCH = 256;
    private static final int POLL_TIMEOUT_MS = 100;
    private static final int OP_READ = 1;
    private static final int OP_WRITE = 2;

    private final TransferConfig config;
    private final long handle;
    private final Thread loop;
    private final ConcurrentHashMap<Long, Pending> pending = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Integer> peers = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);
    /** Submits hold the read side while they call into C; close takes the write side before freeing the engine. */
    private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
    private volatile boolean closed;
    private final LongAdder submitted = new LongAdder();
    private final LongAdder rejectedUnavailable = new LongAdder();
    /** The C engine's counters as last read: what a scrape sees once the engine is closed. */
    private volatile long[] lastCounters = new long[4];

    /** One transfer in flight: its future and, for a heap buffer, the direct copy the bytes go through. */
    private static final class Pending
    {
        final CompletableFuture<Integer> future = new CompletableFuture<>();
        final TransferRequest request;
        final ByteBuffer staging;

        Pending(final TransferRequest request, final ByteBuffer staging)
        {
            this.request = request;
            this.staging = staging;
        }
    }

    /**
     * @throws UnsatisfiedLinkError when the library is not available.
     * @throws IllegalArgumentException for a bad setting, or TLS (the native transport speaks plain TCP only).
     */
    public NativeTransferEngine(final TransferConfig config)
    {
        NativeTransfer.ensureAvailability();
        if (config.tls().isEnabled())
        {
            throw new IllegalArgumentException("the native transport has no TLS; use --transport java with TLS");
        }
        this.config = config.copy().conclude();
        this.handle = NativeTransferJni.engineCreate(this.config.lanesPerPeer(), this.config.sliceBytes(),
            this.config.maxQueuedTransfersPerPeer(), this.config.maxPendingAdmissionsPerPeer(),
            this.config.admissionTimeoutMs(), this.config.transferTimeoutMs(), this.config.connectTimeoutMs());
        this.loop = new Thread(this::run, "granary-native-transfer");
        this.loop.setDaemon(true);
        this.loop.start();
        LOG.debug("native TCP transfer engine started: {} lanes per peer, slices of {} bytes",
            this.config.lanesPerPeer(), this.config.sliceBytes());
    }

    @Override
    public TransportKind kind()
    {
        return TransportKind.NATIVE;
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        final byte[] token = request.accessToken();
        if ((token != null && !validToken(request)) ||
            (request.op() == TransferRequest.Op.READ && request.local().isReadOnly()))
        {
            return CompletableFuture.completedFuture(INVALID_PARAMS_VALUE);
        }
        final ByteBuffer local = request.local();
        final int length = request.length();
        final ByteBuffer staging = local.isDirect() || length == 0 ? null :
            ByteBuffer.allocateDirect(length);
        if (staging != null && request.op() == TransferRequest.Op.WRITE)
        {
            staging.put(0, local, local.position(), length);
        }
        final ByteBuffer memory = staging != null ? staging : local;
        final int position = staging != null ? 0 : local.position();

        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            if (closed)
            {
                return CompletableFuture.completedFuture(TRANSFER_FAIL_VALUE);
            }
            final int peer = peerOf(request.endpoint());
            if (peer < 0)
            {
                return CompletableFuture.completedFuture(peer);
            }
            final long id = nextId.getAndIncrement();
            final Pending entry = new Pending(request, staging);
            pending.put(id, entry);
            // A commit record still being made (the client fills its CRC32C while the WRITE is in flight) is handed
            // over when ready: the C engine holds the COMMIT back until then, on the WRITE's connection.
            final CompletableFuture<byte[]> commit = request.commit();
            final byte[] ready = commit != null && commit.isDone() && !commit.isCompletedExceptionally() ?
                commit.join() : null;
            final boolean later = commit != null && ready == null;
            final int result = NativeTransferJni.engineSubmit(handle, id, peer,
                request.op() == TransferRequest.Op.READ ? OP_READ : OP_WRITE, length == 0 ? null : memory, position,
                length, request.segmentId(), request.remoteOffset(), request.grantOffset(), request.grantLength(),
                token, ready, later);
            if (result != 0)
            {
                pending.remove(id);
                return CompletableFuture.completedFuture(result);
            }
            submitted.increment();
            if (later)
            {
                commit.whenComplete((record, error) -> provideCommit(id, error == null ? record : null));
            }
            return entry.future;
        }
        finally
        {
            lock.unlock();
        }
    }

    /** Hands a late commit record to the C engine; null (the record could not be made) fails the transfer. */
    private void provideCommit(final long id, final byte[] record)
    {
        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            if (!closed)
            {
                // INVALID_PARAMS here means the transfer already ended (its WRITE failed): nothing to send.
                NativeTransferJni.engineProvideCommit(handle, id, record);
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    private static boolean validToken(final TransferRequest request)
    {
        final byte[] token = request.accessToken();
        if (token.length != FrameDescriptor.ACCESS_TOKEN_LENGTH || request.grantLength() <= 0 ||
            request.grantLength() > FrameDescriptor.MAX_GRANT_LENGTH || !request.withinGrant())
        {
            return false;
        }
        return (token[0] | token[1] | token[2] | token[3]) != 0;
    }

    /** The C engine's peer id for an endpoint, or a negative ErrorCode number (not cached: it may work later). */
    private int peerOf(final String endpoint)
    {
        final Integer known = peers.get(endpoint);
        if (known != null)
        {
            return known;
        }
        final InetSocketAddress address = NettyTransferEngine.parseEndpoint(endpoint);
        if (address == null)
        {
            return INVALID_PARAMS_VALUE;
        }
        final int id = NativeTransferJni.engineConnect(handle, address.getHostString(), address.getPort());
        if (id <= 0)
        {
            return id == INVALID_PARAMS_VALUE ? INVALID_PARAMS_VALUE : TRANSFER_FAIL_VALUE;
        }
        peers.putIfAbsent(endpoint, id);
        return id;
    }

    private void run()
    {
        final ByteBuffer completions = ByteBuffer.allocateDirect(POLL_BATCH * 16).order(ByteOrder.nativeOrder());
        while (!closed)
        {
            final int n = NativeTransferJni.enginePoll(handle, completions, POLL_BATCH, POLL_TIMEOUT_MS);
            if (n < 0)
            {
                LOG.error("native transfer engine loop failed with code {}; closing it", n);
                break;
            }
            for (int i = 0; i < n; i++)
            {
                final long id = completions.getLong(i * 16);
                final int status = completions.getInt(i * 16 + 8);
                final Pending entry = pending.remove(id);
                if (entry != null)
                {
                    complete(entry, status);
                }
            }
        }
    }

    private void complete(final Pending entry, final int status)
    {
        if (status == UNAVAILABLE_IN_CURRENT_STATUS_VALUE)
        {
            rejectedUnavailable.increment();
        }
        final TransferRequest request = entry.request;
        if (entry.staging != null && request.op() == TransferRequest.Op.READ && status == 0)
        {
            request.local().put(request.local().position(), entry.staging, 0, request.length());
        }
        entry.future.complete(status);
    }

    /** Frames admitted to {@code endpoint} and not yet completed (0 for an unknown peer). */
    public int outstandingFrames(final String endpoint)
    {
        return (int)(peerStats(endpoint) >>> 32);
    }

    /** Transfers to {@code endpoint} waiting for room in its queue (0 for an unknown peer). */
    public int pendingAdmissions(final String endpoint)
    {
        return (int)peerStats(endpoint);
    }

    private long peerStats(final String endpoint)
    {
        final Integer peer = peers.get(endpoint);
        if (peer == null)
        {
            return 0;
        }
        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            if (closed)
            {
                return 0;
            }
            final long stats = NativeTransferJni.enginePeerStats(handle, peer);
            return stats < 0 ? 0 : stats;
        }
        finally
        {
            lock.unlock();
        }
    }

    @Override
    public long admittedTransfers()
    {
        return counters()[0];
    }

    @Override
    public long rejectedQueueFull()
    {
        return counters()[1];
    }

    @Override
    public long rejectedAdmissionTimeout()
    {
        return counters()[2];
    }

    private long[] counters()
    {
        final long[] out = new long[4];
        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            if (!closed)
            {
                NativeTransferJni.engineCounters(handle, out);
                lastCounters = out;
            }
            return lastCounters;
        }
        finally
        {
            lock.unlock();
        }
    }

    /** Memory regions the C engine holds now: one per transfer in flight, none once every transfer completed. */
    public long registeredRegions()
    {
        return counters()[3];
    }

    /** Transfers handed to the C engine so far. */
    public long submittedTransfers()
    {
        return submitted.sum();
    }

    /** Transfers that completed with UNAVAILABLE_IN_CURRENT_STATUS (queue full or admission timeout). */
    public long rejectedUnavailable()
    {
        return rejectedUnavailable.sum();
    }

    /** Fails every outstanding transfer with TRANSFER_FAIL and frees the C engine; idempotent. */
    @Override
    public void close()
    {
        final ReentrantReadWriteLock.WriteLock lock = lifecycle.writeLock();
        lock.lock();
        try
        {
            if (closed)
            {
                return;
            }
            closed = true;
            NativeTransferJni.engineWakeup(handle);
        }
        finally
        {
            lock.unlock();
        }
        try
        {
            loop.join(5_000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        if (loop.isAlive())
        {
            LOG.warn("native transfer engine thread did not stop; its memory is not freed");
        }
        else
        {
            // No thread is inside the engine now: freeing it closes the sockets, so no byte moves afterwards.
            NativeTransferJni.engineDestroy(handle);
        }
        final ArrayList<Pending> left = new ArrayList<>(pending.values());
        pending.clear();
        for (final Pending entry : left)
        {
            entry.future.complete(TRANSFER_FAIL_VALUE);
        }
    }
}
