package io.granary.transfer;

import io.granary.common.tls.TlsSettings;
import io.granary.protocol.FrameDescriptor;

/**
 * Settings of a client-side {@link TransferEngine}; fluent setters, {@link #conclude()} validates.
 * Defaults live here, next to their names (see docs/configuration.md).
 */
public final class TransferConfig
{
    public static final int DEFAULT_LANES_PER_PEER = 2;
    public static final int MAX_LANES_PER_PEER = 64;
    public static final int DEFAULT_SLICE_BYTES = 512 << 10;
    public static final int DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER = 4096;
    /** Upper bound of the per-peer queue and pending-admission settings (Mooncake's current maximum). */
    public static final int MAX_QUEUE_LIMIT_PER_PEER = 1 << 20;
    public static final int DEFAULT_MAX_PENDING_ADMISSIONS_PER_PEER = 1024;
    public static final long DEFAULT_ADMISSION_TIMEOUT_MS = 1_000;
    public static final long MAX_ADMISSION_TIMEOUT_MS = 600_000;
    public static final long DEFAULT_TRANSFER_TIMEOUT_MS = 10_000;
    public static final long DEFAULT_CONNECT_TIMEOUT_MS = 3_000;
    public static final int DEFAULT_MAX_VECTOR_ENTRIES = 256;
    /**
     * In a synchronous (caller-driven) call, frames of at least this many bytes (bigger than any READV entry: the
     * slices of big values) go round-robin over the lanes to a node; smaller ones keep to its first lane.
     */
    public static final int CALLER_SPREAD_MIN_BYTES = (64 << 10) + 1;
    /** Smallest WRITE that moves by process_vm_writev to a node on this host (see localTransfers). */
    public static final int DEFAULT_LOCAL_MIN_BYTES = 64 << 10;

    private int lanesPerPeer = DEFAULT_LANES_PER_PEER;
    private int sliceBytes = DEFAULT_SLICE_BYTES;
    private int maxQueuedTransfersPerPeer = DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER;
    private int maxPendingAdmissionsPerPeer = DEFAULT_MAX_PENDING_ADMISSIONS_PER_PEER;
    private long admissionTimeoutMs = DEFAULT_ADMISSION_TIMEOUT_MS;
    private long transferTimeoutMs = DEFAULT_TRANSFER_TIMEOUT_MS;
    private long connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS;
    private int ioThreads = Math.min(2, Runtime.getRuntime().availableProcessors());
    private boolean preferEpoll = true;
    private TlsSettings tls = TlsSettings.DISABLED;
    private int maxVectorEntries = DEFAULT_MAX_VECTOR_ENTRIES;
    private boolean callerDriven = true;
    private boolean writeCommits = true;
    private boolean localTransfers = true;
    private int localMinBytes = DEFAULT_LOCAL_MIN_BYTES;

    /** Persistent connections per storage node (Mooncake's MC_TCP_LANES_PER_PEER); requests are pipelined on each. */
    public int lanesPerPeer()
    {
        return lanesPerPeer;
    }

    public TransferConfig lanesPerPeer(final int lanesPerPeer)
    {
        this.lanesPerPeer = lanesPerPeer;
        return this;
    }

    /** Largest range one frame carries; bigger transfers are split into slices spread over lanes. */
    public int sliceBytes()
    {
        return sliceBytes;
    }

    public TransferConfig sliceBytes(final int sliceBytes)
    {
        this.sliceBytes = sliceBytes;
        return this;
    }

    /**
     * Most small READs (up to 64 KiB each) that one READV frame carries when they are queued for a lane together,
     * as the reads of a batch are, and likewise most small WRITE_COMMITs (values up to 64 KiB) that one WRITEV frame
     * carries; 1 sends every READ and WRITE_COMMIT as a frame of its own. At most
     * {@link io.granary.protocol.FrameDescriptor#MAX_VECTOR_ENTRIES}.
     */
    public int maxVectorEntries()
    {
        return maxVectorEntries;
    }

    public TransferConfig maxVectorEntries(final int maxVectorEntries)
    {
        this.maxVectorEntries = maxVectorEntries;
        return this;
    }

    /**
     * Whether the engines send a one-frame WRITE together with its COMMIT record, when that is ready, as one
     * WRITE_COMMIT frame (docs/protocol.md, "WRITE_COMMIT"; default true): one frame and one answer per small value
     * instead of two. Storage nodes older than the opcode close a connection that sends one, so set false while any
     * remain.
     */
    public boolean writeCommits()
    {
        return writeCommits;
    }

    public TransferConfig writeCommits(final boolean writeCommits)
    {
        this.writeCommits = writeCommits;
        return this;
    }

    /**
     * Whether the native engine moves READs of any size, and WRITEs of at least {@link #localMinBytes()}, to a storage
     * node on this host with process_vm_readv / process_vm_writev, one copy between the two address spaces instead of
     * loopback TCP (docs/protocol.md, "LOCAL_CONNECT"; default true); the small READs of one call to one segment move
     * with one system call. It does so only where the node agrees and this process may read and write the node's
     * memory (the same user, ptrace permitted); everything else, and every refusal or failed copy, takes TCP. A
     * WRITE's COMMIT always goes over TCP. The Java engines always use TCP.
     */
    public boolean localTransfers()
    {
        return localTransfers;
    }

    public TransferConfig localTransfers(final boolean localTransfers)
    {
        this.localTransfers = localTransfers;
        return this;
    }

    /**
     * Smallest WRITE that goes local (see {@link #localTransfers()}); smaller ones keep to TCP, where their COMMIT
     * rides in the same frame. READs go local at every size.
     */
    public int localMinBytes()
    {
        return localMinBytes;
    }

    public TransferConfig localMinBytes(final int localMinBytes)
    {
        this.localMinBytes = localMinBytes;
        return this;
    }

    /**
     * Most frames (slices) outstanding to one peer (Mooncake's MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER); a transfer
     * that does not fit waits as a pending admission or fails with UNAVAILABLE_IN_CURRENT_STATUS.
     */
    public int maxQueuedTransfersPerPeer()
    {
        return maxQueuedTransfersPerPeer;
    }

    public TransferConfig maxQueuedTransfersPerPeer(final int maxQueuedTransfersPerPeer)
    {
        this.maxQueuedTransfersPerPeer = maxQueuedTransfersPerPeer;
        return this;
    }

    /**
     * Most transfers per peer waiting for room in its queue (Mooncake's MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER);
     * beyond it a submit fails at once with UNAVAILABLE_IN_CURRENT_STATUS. 0 = never wait.
     */
    public int maxPendingAdmissionsPerPeer()
    {
        return maxPendingAdmissionsPerPeer;
    }

    public TransferConfig maxPendingAdmissionsPerPeer(final int maxPendingAdmissionsPerPeer)
    {
        this.maxPendingAdmissionsPerPeer = maxPendingAdmissionsPerPeer;
        return this;
    }

    /**
     * How long a pending admission waits for room before it fails with UNAVAILABLE_IN_CURRENT_STATUS
     * (Mooncake's MC_TCP_ADMISSION_TIMEOUT_MS). The transfer timeout starts only once a slice is sent.
     */
    public long admissionTimeoutMs()
    {
        return admissionTimeoutMs;
    }

    public TransferConfig admissionTimeoutMs(final long admissionTimeoutMs)
    {
        this.admissionTimeoutMs = admissionTimeoutMs;
        return this;
    }

    /** A transfer without an answer after this long completes with RPC_TIMEOUT. */
    public long transferTimeoutMs()
    {
        return transferTimeoutMs;
    }

    public TransferConfig transferTimeoutMs(final long transferTimeoutMs)
    {
        this.transferTimeoutMs = transferTimeoutMs;
        return this;
    }

    public long connectTimeoutMs()
    {
        return connectTimeoutMs;
    }

    public TransferConfig connectTimeoutMs(final long connectTimeoutMs)
    {
        this.connectTimeoutMs = connectTimeoutMs;
        return this;
    }

    /** Event-loop threads of the engine. */
    public int ioThreads()
    {
        return ioThreads;
    }

    public TransferConfig ioThreads(final int ioThreads)
    {
        this.ioThreads = ioThreads;
        return this;
    }

    /** Use Netty's native epoll transport when it is available (Linux), else NIO. */
    public boolean preferEpoll()
    {
        return preferEpoll;
    }

    public TransferConfig preferEpoll(final boolean preferEpoll)
    {
        this.preferEpoll = preferEpoll;
        return this;
    }

    /**
     * TLS on every lane (default off): the engine verifies each storage node's certificate against the trust
     * anchors and its endpoint host, and presents a client certificate when one is configured.
     */
    public TlsSettings tls()
    {
        return tls;
    }

    public TransferConfig tls(final TlsSettings tls)
    {
        this.tls = tls == null ? TlsSettings.DISABLED : tls;
        return this;
    }

    /**
     * Let threads that open a {@linkplain io.granary.transfer.TransferEngine#openDriver() driver} (the synchronous
     * client calls) move their own bytes, with no hand-off to the engine's event loops (default on). Off, or with
     * TLS, every transfer goes through the event loops.
     */
    public boolean callerDriven()
    {
        return callerDriven;
    }

    public TransferConfig callerDriven(final boolean callerDriven)
    {
        this.callerDriven = callerDriven;
        return this;
    }

    /** Validates; returns this. @throws IllegalArgumentException naming the bad setting. */
    public TransferConfig conclude()
    {
        require(lanesPerPeer >= 1 && lanesPerPeer <= MAX_LANES_PER_PEER,
            "lanesPerPeer must be in 1.." + MAX_LANES_PER_PEER + ", was " + lanesPerPeer);
        require(sliceBytes >= 4096, "sliceBytes must be at least 4096, was " + sliceBytes);
        require(maxQueuedTransfersPerPeer >= 1 && maxQueuedTransfersPerPeer <= MAX_QUEUE_LIMIT_PER_PEER,
            "maxQueuedTransfersPerPeer must be in 1.." + MAX_QUEUE_LIMIT_PER_PEER + ", was " +
            maxQueuedTransfersPerPeer);
        require(maxPendingAdmissionsPerPeer >= 0 && maxPendingAdmissionsPerPeer <= MAX_QUEUE_LIMIT_PER_PEER,
            "maxPendingAdmissionsPerPeer must be in 0.." + MAX_QUEUE_LIMIT_PER_PEER + ", was " +
            maxPendingAdmissionsPerPeer);
        require(admissionTimeoutMs >= 1 && admissionTimeoutMs <= MAX_ADMISSION_TIMEOUT_MS,
            "admissionTimeoutMs must be in 1.." + MAX_ADMISSION_TIMEOUT_MS + ", was " + admissionTimeoutMs);
        require(transferTimeoutMs > 0, "transferTimeoutMs must be positive, was " + transferTimeoutMs);
        require(connectTimeoutMs > 0, "connectTimeoutMs must be positive, was " + connectTimeoutMs);
        require(ioThreads >= 1 && ioThreads <= 256, "ioThreads must be in 1..256, was " + ioThreads);
        require(maxVectorEntries >= 1 && maxVectorEntries <= FrameDescriptor.MAX_VECTOR_ENTRIES,
            "maxVectorEntries must be in 1.." + FrameDescriptor.MAX_VECTOR_ENTRIES + ", was " + maxVectorEntries);
        require(localMinBytes >= 1, "localMinBytes must be positive, was " + localMinBytes);
        return this;
    }

    private static void require(final boolean condition, final String message)
    {
        if (!condition)
        {
            throw new IllegalArgumentException(message);
        }
    }

    public TransferConfig copy()
    {
        final TransferConfig c = new TransferConfig();
        c.lanesPerPeer = lanesPerPeer;
        c.sliceBytes = sliceBytes;
        c.maxQueuedTransfersPerPeer = maxQueuedTransfersPerPeer;
        c.maxPendingAdmissionsPerPeer = maxPendingAdmissionsPerPeer;
        c.admissionTimeoutMs = admissionTimeoutMs;
        c.transferTimeoutMs = transferTimeoutMs;
        c.connectTimeoutMs = connectTimeoutMs;
        c.ioThreads = ioThreads;
        c.preferEpoll = preferEpoll;
        c.tls = tls;
        c.maxVectorEntries = maxVectorEntries;
        c.callerDriven = callerDriven;
        c.writeCommits = writeCommits;
        c.localTransfers = localTransfers;
        c.localMinBytes = localMinBytes;
        return c;
    }
}
