package io.granary.transfer.natives;

import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.AdmissionStats;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.netty.util.internal.PlatformDependent;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;

/**
 * The native TCP {@link TransferEngine}: C engines of libgranary_transfer move the bytes (epoll, lanes per peer,
 * frames sent from and received into the caller's memory, slicing, admission, timeouts, the COMMIT after a WRITE,
 * small READs of one call as READVs of up to {@link TransferConfig#maxVectorEntries()} entries).
 * A thread that opens a {@linkplain #openDriver() driver} (the synchronous client calls) gets a C engine of its own
 * from a pool and runs it inside {@link Driver#drive}: no hand-off between threads on its path. Other submits go to
 * a shared C engine run by one thread ("granary-native-transfer"), which completes their futures. A heap buffer is
 * staged through a direct copy (from a {@link StagingPool}); direct buffers are used in place. Thread safe: submit never blocks on I/O.
 */
public final class NativeTransferEngine implements TransferEngine, AdmissionStats
{
    private static final Logger LOG = LoggerFactory.getLogger(NativeTransferEngine.class);
    private static final int POLL_BATCH = 256;
    /** Slots of a loop's table of transfers in flight (more in flight at once go to its overflow map). */
    private static final int PENDING_SLOTS = 4096;
    /** Idle direct buffers kept for staging heap-buffer transfers. */
    private static final long STAGING_POOL_BYTES = 32L << 20;
    private static final int POLL_TIMEOUT_MS = 100;
    private static final int OP_READ = 1;
    private static final int OP_WRITE = 2;
    /** A completion without a CRC32C (any real one is an unsigned 32-bit value). */
    private static final long NO_CRC = -1L;
    /** Idle caller loops kept (with their connections) for the next calls; more are freed. */
    private static final int MAX_IDLE_LOOPS = 64;

    private final TransferConfig config;
    private final StagingPool stagingPool = new StagingPool(STAGING_POOL_BYTES);
    private final Loop shared;
    private final Thread sharedThread;
    private final ThreadLocal<Loop> current = new ThreadLocal<>();
    private final ConcurrentLinkedDeque<Loop> idle = new ConcurrentLinkedDeque<>();
    private final AtomicInteger idleCount = new AtomicInteger();
    private final Set<Loop> lent = ConcurrentHashMap.newKeySet();
    private final AtomicLong nextId = new AtomicLong(1);
    /**
     * JNI calls hold the read side; close and release take the write side before they free C engines. A loop lent to a
     * thread is freed only by that thread ({@link #release}), so that thread calls into it without the lock (the read
     * side costs a shared counter and thread-local bookkeeping per call, a few per cent of a batch of small puts);
     * every other thread that touches it takes the read side.
     */
    private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
    private volatile boolean closed;
    private final LongAdder submitted = new LongAdder();
    private final LongAdder driven = new LongAdder();
    private final LongAdder rejectedUnavailable = new LongAdder();
    /**
     * engineCounters: admitted, queue full, admission timeout, regions now (not summed when retired), RDMA reads done
     * and failed, local reads, local writes, local fallbacks.
     */
    private static final int COUNTERS = 9;
    private static final int REGIONS_NOW = 3;
    /** Counters of the loops freed so far: they keep counting. */
    private final long[] retiredCounters = new long[COUNTERS];
    private final boolean rdmaReads;
    /** Whether the line about token-carrying READs on TCP is a warning (RDMA by name) or information (by auto). */
    private final boolean warnOfTokenReads;
    /** Most buffers {@link #registerMemory} holds (the C engine's GT_MAX_PINNED). */
    public static final int MAX_REGISTERED_BUFFERS = 64;
    /** Guards {@link #pinned} and {@link #liveLoops}: every live C engine pins every registered buffer. */
    private final Object pinLock = new Object();
    private final ArrayList<ByteBuffer> pinned = new ArrayList<>();
    private final ArrayList<Loop> liveLoops = new ArrayList<>();
    /** Racy on purpose: at worst a few threads log the same warning once each. */
    private volatile boolean warnedTokenReads;

    /** One transfer in flight: its id, its future and, for a heap buffer, the direct copy the bytes go through. */
    private static final class Pending
    {
        final long id;
        final CompletableFuture<Integer> future = new CompletableFuture<>();
        final TransferRequest request;
        final ByteBuffer staging;

        Pending(final long id, final TransferRequest request, final ByteBuffer staging)
        {
            this.id = id;
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
        this(config, false);
    }

    /**
     * @param rdmaReads READs without an access token go one-sided over RDMA where this machine has a device and the
     *                  node agrees to a queue pair for the segment (RDMA_CONNECT); every other transfer, and every
     *                  READ the node refuses RDMA for, goes over TCP. {@link #kind()} is then RDMA.
     * @throws IllegalStateException when rdmaReads is asked for and there is no RDMA device.
     */
    public NativeTransferEngine(final TransferConfig config, final boolean rdmaReads)
    {
        this(config, rdmaReads, true);
    }

    /**
     * @param rdmaReads         as {@link #NativeTransferEngine(TransferConfig, boolean)}
     * @param warnOfTokenReads  whether the one line saying that READs carrying access tokens go over TCP is a warning
     *                          (RDMA asked for by name) or information (RDMA chosen by {@code auto})
     */
    public NativeTransferEngine(final TransferConfig config, final boolean rdmaReads, final boolean warnOfTokenReads)
    {
        NativeTransfer.ensureAvailability();
        if (rdmaReads && !NativeTransfer.isRdmaAvailable())
        {
            throw new IllegalStateException("RDMA is not available: " + NativeTransfer.rdmaUnavailabilityCause());
        }
        this.rdmaReads = rdmaReads;
        this.warnOfTokenReads = warnOfTokenReads;
        if (config.tls().isEnabled())
        {
            throw new IllegalArgumentException("the native transport has no TLS; use --transport java with TLS");
        }
        this.config = config.copy().conclude();
        this.shared = new Loop(this.config.lanesPerPeer(), 0);
        this.sharedThread = new Thread(this::runShared, "granary-native-transfer");
        this.sharedThread.setDaemon(true);
        this.sharedThread.start();
        LOG.debug("native TCP transfer engine started: {} lanes per peer, slices of {} bytes",
            this.config.lanesPerPeer(), this.config.sliceBytes());
    }

    @Override
    public TransportKind kind()
    {
        return rdmaReads ? TransportKind.RDMA : TransportKind.NATIVE;
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
        if (rdmaReads && token != null && request.op() == TransferRequest.Op.READ && !warnedTokenReads)
        {
            warnedTokenReads = true;
            final String line = "transport rdma: READs carry data-plane access tokens, so they go over TCP (one-sided " +
                "READs would bypass the tokens); run the master with --data-tokens false on a trusted network for RDMA";
            if (warnOfTokenReads)
            {
                LOG.warn(line);
            }
            else
            {
                LOG.info(line);
            }
        }
        final Loop own = current.get();
        if (own != null)
        {
            if (closed || own.destroyed)
            {
                return CompletableFuture.completedFuture(TRANSFER_FAIL_VALUE);
            }
            final CompletableFuture<Integer> future = own.submit(request); // this thread's own loop: no lock
            driven.increment();
            return future;
        }
        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            if (closed || shared.destroyed)
            {
                return CompletableFuture.completedFuture(TRANSFER_FAIL_VALUE);
            }
            return shared.submit(request);
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

    /**
     * Lends this thread a C engine of its own until the driver is closed (a thread that holds one already gets a
     * driver that leaves it to the outer scope). Null once the engine is closed, or with
     * {@link TransferConfig#callerDriven()} off.
     */
    @Override
    public Driver openDriver()
    {
        if (closed || !config.callerDriven())
        {
            return null; // callerDriven off: every transfer goes through the shared engine's thread
        }
        final Loop held = current.get();
        if (held != null)
        {
            return new CallerDriver(held, false);
        }
        Loop loop = idle.poll();
        if (loop != null)
        {
            idleCount.decrementAndGet();
        }
        else
        {
            final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
            lock.lock();
            try
            {
                if (closed)
                {
                    return null;
                }
                // The slices of a big value spread over the lanes, so several of the node's threads serve one value;
                // small frames keep to the first lane: the calling thread has only its own call's frames in flight,
                // and a second connection would add system calls, not parallelism (docs/architecture.md).
                loop = new Loop(config.lanesPerPeer(), TransferConfig.CALLER_SPREAD_MIN_BYTES);
            }
            finally
            {
                lock.unlock();
            }
        }
        lent.add(loop);
        current.set(loop);
        return new CallerDriver(loop, true);
    }

    private void runShared()
    {
        while (!closed)
        {
            final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
            lock.lock();
            final int n;
            try
            {
                if (closed)
                {
                    break;
                }
                n = shared.poll(POLL_TIMEOUT_MS);
            }
            finally
            {
                lock.unlock();
            }
            shared.completeDone(); // callbacks run outside the lock: one may close the engine
            if (n < 0)
            {
                LOG.error("native transfer engine loop failed with code {}; its transfers fail", n);
                break;
            }
        }
    }

    /** Frames admitted to {@code endpoint} by the shared engine and not yet completed (0 for an unknown peer). */
    public int outstandingFrames(final String endpoint)
    {
        return (int)(peerStats(endpoint) >>> 32);
    }

    /** Transfers to {@code endpoint} waiting for room in the shared engine's queue (0 for an unknown peer). */
    public int pendingAdmissions(final String endpoint)
    {
        return (int)peerStats(endpoint);
    }

    private long peerStats(final String endpoint)
    {
        final Integer peer = shared.peers.get(endpoint);
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
            final long stats = NativeTransferJni.enginePeerStats(shared.handle, peer);
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

    /**
     * Memory regions the C engines hold now: one per transfer in flight outside registered buffers, and one per
     * registered buffer in each C engine (shared, idle and lent); none of the first kind once every transfer completed.
     */
    public long registeredRegions()
    {
        return counters()[REGIONS_NOW];
    }

    @Override
    public boolean registerMemory(final ByteBuffer buffer)
    {
        TransferEngine.checkRegistrable(buffer);
        final long address = PlatformDependent.directBufferAddress(buffer);
        synchronized (pinLock)
        {
            if (closed)
            {
                throw new IllegalStateException("the transfer engine is closed");
            }
            for (final ByteBuffer other : pinned)
            {
                final long start = PlatformDependent.directBufferAddress(other);
                if (address < start + other.capacity() && start < address + buffer.capacity())
                {
                    throw new IllegalArgumentException("the buffer overlaps one registered before");
                }
            }
            if (pinned.size() == MAX_REGISTERED_BUFFERS)
            {
                throw new IllegalStateException("at most " + MAX_REGISTERED_BUFFERS + " buffers can be registered");
            }
            for (int i = 0; i < liveLoops.size(); i++)
            {
                final int result = NativeTransferJni.enginePinMemory(liveLoops.get(i).handle, buffer);
                if (result != 0)
                {
                    for (int j = 0; j < i; j++)
                    {
                        NativeTransferJni.engineUnpinMemory(liveLoops.get(j).handle, buffer);
                    }
                    throw new IllegalStateException("the native engine refused the registration (code " + result +
                        ")");
                }
            }
            pinned.add(buffer);
            return true;
        }
    }

    @Override
    public boolean unregisterMemory(final ByteBuffer buffer)
    {
        synchronized (pinLock)
        {
            final long address =
                buffer == null || !buffer.isDirect() ? 0 : PlatformDependent.directBufferAddress(buffer);
            for (int i = 0; i < pinned.size(); i++)
            {
                // The buffer registered, or a duplicate of it (the same memory).
                if (address != 0 && PlatformDependent.directBufferAddress(pinned.get(i)) == address &&
                    pinned.get(i).capacity() == buffer.capacity())
                {
                    for (final Loop loop : liveLoops)
                    {
                        NativeTransferJni.engineUnpinMemory(loop.handle, pinned.get(i));
                    }
                    pinned.remove(i);
                    return true;
                }
            }
            return false;
        }
    }

    /** Buffers held by {@link #registerMemory} now. */
    public int registeredBuffers()
    {
        synchronized (pinLock)
        {
            return pinned.size();
        }
    }

    /** READs completed one-sided over RDMA with success so far (0 without {@code rdmaReads}). */
    public long rdmaReads()
    {
        return counters()[4];
    }

    /** READs that failed on their RDMA path so far (a broken queue pair, a remote access error, a timeout). */
    public long rdmaFailedReads()
    {
        return counters()[5];
    }

    /**
     * READs and WRITEs whose bytes moved with process_vm_readv/writev to a node on this host so far (see
     * {@link TransferConfig#localTransfers()}).
     */
    public long localTransfers()
    {
        final long[] c = counters();
        return c[6] + c[7];
    }

    /** Transfers that could have gone local but took TCP (the node refused, its table changed, a copy failed). */
    public long localFallbacks()
    {
        return counters()[8];
    }

    /**
     * Admitted, refused at once, timed out, regions registered, RDMA reads done and failed, local reads, writes and
     * fallbacks: summed over the shared, lent and idle engines.
     */
    private long[] counters()
    {
        final long[] sum = new long[COUNTERS];
        final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
        lock.lock();
        try
        {
            synchronized (retiredCounters)
            {
                System.arraycopy(retiredCounters, 0, sum, 0, COUNTERS);
            }
            if (closed)
            {
                return sum;
            }
            final long[] one = new long[COUNTERS];
            final ArrayList<Loop> loops = new ArrayList<>(lent);
            loops.addAll(idle);
            loops.add(shared);
            for (final Loop loop : loops)
            {
                if (!loop.destroyed)
                {
                    NativeTransferJni.engineCounters(loop.handle, one);
                    for (int i = 0; i < COUNTERS; i++)
                    {
                        sum[i] += one[i];
                    }
                }
            }
            return sum;
        }
        finally
        {
            lock.unlock();
        }
    }

    /** Transfers handed to the C engines so far. */
    public long submittedTransfers()
    {
        return submitted.sum();
    }

    /** Transfers carried out by their callers' own threads (inside a driver) so far. */
    public long drivenTransfers()
    {
        return driven.sum();
    }

    /** Transfers that completed with UNAVAILABLE_IN_CURRENT_STATUS (queue full or admission timeout). */
    public long rejectedUnavailable()
    {
        return rejectedUnavailable.sum();
    }

    /** Fails every outstanding transfer with TRANSFER_FAIL and frees the C engines; idempotent. */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        NativeTransferJni.engineWakeup(shared.handle);
        for (final Loop loop : lent)
        {
            loop.wakeup(); // its owner fails what is open at its next drive or close
        }
        try
        {
            sharedThread.join(5_000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        final ReentrantReadWriteLock.WriteLock lock = lifecycle.writeLock();
        lock.lock();
        try
        {
            if (sharedThread.isAlive())
            {
                LOG.warn("native transfer engine thread did not stop; its memory is not freed");
                shared.failAll();
            }
            else
            {
                shared.destroyAndFail();
            }
            for (Loop loop = idle.poll(); loop != null; loop = idle.poll())
            {
                idleCount.decrementAndGet();
                loop.destroyAndFail();
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    /** A caller loop whose driver closed: kept (with its connections) for the next call, or freed. */
    private void release(final Loop loop)
    {
        // set(null), not remove(): the thread's next call reads `current` again, and a get() after remove() builds
        // the thread's map entry anew each time (about 1 % of a caller's CPU in 4 KiB put batches, by a profile).
        current.set(null);
        lent.remove(loop);
        if (!closed && !loop.destroyed && loop.pending.isEmpty())
        {
            if (idleCount.incrementAndGet() <= MAX_IDLE_LOOPS)
            {
                idle.push(loop);
                if (!closed || !idle.remove(loop))
                {
                    return; // kept; or close() took it from the pool and freed it
                }
            }
            idleCount.decrementAndGet();
        }
        final ReentrantReadWriteLock.WriteLock lock = lifecycle.writeLock();
        lock.lock();
        try
        {
            // Open transfers fail, but only once their C engine is gone: their buffers are let go first.
            loop.destroyAndFail();
        }
        finally
        {
            lock.unlock();
        }
    }

    /** One C engine, its peers and its transfers in flight. */
    private final class Loop
    {
        final long handle;
        final PendingTable<Pending> pending = new PendingTable<>(PENDING_SLOTS, entry -> entry.id);
        final ConcurrentHashMap<String, Integer> peers = new ConcurrentHashMap<>();
        final ByteBuffer completions = ByteBuffer.allocateDirect(POLL_BATCH * NativeTransferJni.COMPLETION_BYTES)
            .order(ByteOrder.nativeOrder());
        final Pending[] doneEntries = new Pending[POLL_BATCH];
        final int[] doneStatuses = new int[POLL_BATCH];
        /** The CRC32C a READ's completion carried, or {@link #NO_CRC}. */
        final long[] doneCrcs = new long[POLL_BATCH];
        int doneCount;
        volatile boolean destroyed;

        Loop(final int lanesPerPeer, final int spreadMinBytes)
        {
            handle = NativeTransferJni.engineCreate(lanesPerPeer, config.sliceBytes(),
                config.maxQueuedTransfersPerPeer(), config.maxPendingAdmissionsPerPeer(), config.admissionTimeoutMs(),
                config.transferTimeoutMs(), config.connectTimeoutMs(), config.maxVectorEntries(), rdmaReads,
                spreadMinBytes, config.writeCommits(), config.localTransfers(), config.localMinBytes());
            synchronized (pinLock)
            {
                for (final ByteBuffer buffer : pinned)
                {
                    NativeTransferJni.enginePinMemory(handle, buffer); // accepted by every engine before
                }
                liveLoops.add(this);
            }
        }

        /** Under the lifecycle read lock, or on the thread this loop is lent to. */
        CompletableFuture<Integer> submit(final TransferRequest request)
        {
            final ByteBuffer local = request.local();
            final int length = request.length();
            final ByteBuffer staging = local.isDirect() || length == 0 ? null : stagingPool.acquire(length);
            if (staging != null && request.op() == TransferRequest.Op.WRITE)
            {
                staging.put(0, local, local.position(), length);
            }
            final ByteBuffer memory = staging != null ? staging : local;
            final int position = staging != null ? 0 : local.position();
            final int peer = peerOf(request.endpoint());
            if (peer < 0)
            {
                releaseStaging(staging);
                return CompletableFuture.completedFuture(peer);
            }
            final long id = nextId.getAndIncrement();
            final Pending entry = new Pending(id, request, staging);
            pending.add(id, entry);
            // A commit record still being made (the client fills its CRC32C while the WRITE is in flight) is handed
            // over when ready: the C engine holds the COMMIT back until then, on the WRITE's connection.
            final CompletableFuture<byte[]> commit = request.commit();
            final byte[] ready = commit != null && commit.isDone() && !commit.isCompletedExceptionally() ?
                commit.join() : null;
            final boolean later = commit != null && ready == null;
            final int flags = (later ? NativeTransferJni.SUBMIT_COMMIT_LATER : 0) |
                (request.wantsReceivedCrc32c() ? NativeTransferJni.SUBMIT_CRC32C : 0);
            final int result = NativeTransferJni.engineSubmit(handle, id, peer,
                request.op() == TransferRequest.Op.READ ? OP_READ : OP_WRITE, length == 0 ? null : memory, position,
                length, request.segmentId(), request.remoteOffset(), request.grantOffset(), request.grantLength(),
                request.accessToken(), ready, flags);
            if (result != 0)
            {
                pending.remove(id);
                releaseStaging(staging); // refused before the C engine took it
                return CompletableFuture.completedFuture(result);
            }
            submitted.increment();
            if (later)
            {
                commit.whenComplete((record, error) -> provideCommit(id, error == null ? record : null));
            }
            return entry.future;
        }

        /** Hands a late commit record to the C engine; null (the record could not be made) fails the transfer. */
        private void provideCommit(final long id, final byte[] record)
        {
            if (current.get() == this)
            {
                if (!destroyed) // lent to this thread: only this thread frees it
                {
                    NativeTransferJni.engineProvideCommit(handle, id, record);
                }
                return;
            }
            final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
            lock.lock();
            try
            {
                if (!destroyed)
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

        /**
         * Runs the C engine's I/O for up to {@code timeoutMs} and collects what finished for {@link #completeDone};
         * by the one thread that runs this loop (under the read lock unless the loop is lent to it).
         */
        int poll(final int timeoutMs)
        {
            final int n = NativeTransferJni.enginePoll(handle, completions, POLL_BATCH, timeoutMs);
            for (int i = 0; i < n; i++)
            {
                final int at = i * NativeTransferJni.COMPLETION_BYTES;
                final Pending entry = pending.remove(completions.getLong(at));
                if (entry != null)
                {
                    doneEntries[doneCount] = entry;
                    doneCrcs[doneCount] = completions.getInt(at + 12) != 0 ?
                        Integer.toUnsignedLong(completions.getInt(at + 16)) : NO_CRC;
                    doneStatuses[doneCount++] = completions.getInt(at + 8);
                }
            }
            return n;
        }

        /** Completes what the last {@link #poll} collected (outside the lock: callbacks may call the engine). */
        void completeDone()
        {
            for (int i = 0; i < doneCount; i++)
            {
                final Pending entry = doneEntries[i];
                doneEntries[i] = null;
                complete(entry, doneStatuses[i], doneCrcs[i]);
            }
            doneCount = 0;
        }

        void wakeup()
        {
            final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
            lock.lock();
            try
            {
                if (!destroyed)
                {
                    NativeTransferJni.engineWakeup(handle);
                }
            }
            finally
            {
                lock.unlock();
            }
        }

        /** Frees the C engine (its sockets close, so no byte moves any more), then fails what was open. */
        void destroyAndFail()
        {
            if (!destroyed)
            {
                destroyed = true;
                final long[] last = new long[COUNTERS];
                NativeTransferJni.engineCounters(handle, last);
                last[REGIONS_NOW] = 0; /* a freed engine holds none */
                synchronized (pinLock)
                {
                    liveLoops.remove(this);
                }
                synchronized (retiredCounters)
                {
                    for (int i = 0; i < COUNTERS; i++)
                    {
                        retiredCounters[i] += last[i];
                    }
                }
                NativeTransferJni.engineDestroy(handle);
            }
            failAll(true);
        }

        void failAll()
        {
            failAll(false);
        }

        /** @param engineGone the C engine is destroyed, so staging buffers may be reused (otherwise they are dropped). */
        private void failAll(final boolean engineGone)
        {
            for (final Pending entry : pending.drain())
            {
                if (engineGone)
                {
                    releaseStaging(entry.staging);
                }
                entry.future.complete(TRANSFER_FAIL_VALUE);
            }
        }
    }

    private void complete(final Pending entry, final int status, final long crc)
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
        releaseStaging(entry.staging); // the C engine reported the transfer: it no longer touches the buffer
        if (status == 0 && crc != NO_CRC && request.wantsReceivedCrc32c())
        {
            request.receivedCrc32c((int)crc); // of the staging buffer's bytes, which are now the destination's too
        }
        entry.future.complete(status);
    }

    private void releaseStaging(final ByteBuffer staging)
    {
        if (staging != null)
        {
            stagingPool.release(staging);
        }
    }

    /** One turn of a caller loop's I/O on its owner's thread, then its completions there. */
    private void driveLoop(final Loop loop, final long maxWaitNs)
    {
        final int timeoutMs = (int)Math.min(POLL_TIMEOUT_MS, Math.max(0, (maxWaitNs + 999_999) / 1_000_000));
        // Closed: nothing polls this C engine any more, so no byte moves; it is freed when the scope ends.
        final boolean failed;
        if (current.get() == loop)
        {
            failed = closed || loop.destroyed || loop.poll(timeoutMs) < 0; // lent to this thread: no lock
        }
        else
        {
            final ReentrantReadWriteLock.ReadLock lock = lifecycle.readLock();
            lock.lock();
            try
            {
                failed = closed || loop.destroyed || loop.poll(timeoutMs) < 0;
            }
            finally
            {
                lock.unlock();
            }
        }
        loop.completeDone();
        if (failed)
        {
            loop.failAll();
        }
    }

    /**
     * The driver of a thread's C engine: that thread runs its I/O inside {@link #drive}. A nested call's driver drives
     * the outer scope's loop and leaves ending it to the outer scope.
     */
    private final class CallerDriver implements Driver
    {
        private final Loop loop;
        private final boolean ownsLoop;
        private boolean open = true;

        CallerDriver(final Loop loop, final boolean ownsLoop)
        {
            this.loop = loop;
            this.ownsLoop = ownsLoop;
        }

        @Override
        public boolean hasWork()
        {
            return !loop.pending.isEmpty();
        }

        @Override
        public void drive(final long maxWaitNs)
        {
            driveLoop(loop, maxWaitNs);
        }

        @Override
        public void wakeup()
        {
            loop.wakeup();
        }

        @Override
        public void close()
        {
            if (open && ownsLoop)
            {
                open = false;
                release(loop);
            }
        }
    }
}
