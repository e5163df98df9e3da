package io.granary.transfer;

/**
 * Settings of a client-side {@link TransferEngine}; fluent setters, {@link #conclude()} validates.
 * Defaults live here, next to their names (see docs/configuration.md).
 */
public final class TransferConfig
{
    public static final int DEFAULT_LANES_PER_PEER = 2;
    public static final int MAX_LANES_PER_PEER = 64;
    public static final int DEFAULT_SLICE_BYTES = 1 << 20;
    public static final int DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER = 4096;
    public static final long DEFAULT_TRANSFER_TIMEOUT_MS = 10_000;
    public static final long DEFAULT_CONNECT_TIMEOUT_MS = 3_000;

    private int lanesPerPeer = DEFAULT_LANES_PER_PEER;
    private int sliceBytes = DEFAULT_SLICE_BYTES;
    private int maxQueuedTransfersPerPeer = DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER;
    private long transferTimeoutMs = DEFAULT_TRANSFER_TIMEOUT_MS;
    private long connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS;
    private int ioThreads = Math.min(2, Runtime.getRuntime().availableProcessors());
    private boolean preferEpoll = true;

    /** Persistent connections per storage node; requests are pipelined on each. */
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

    /** Most frames outstanding to one peer; beyond it submits wait or fail (see the engine). */
    public int maxQueuedTransfersPerPeer()
    {
        return maxQueuedTransfersPerPeer;
    }

    public TransferConfig maxQueuedTransfersPerPeer(final int maxQueuedTransfersPerPeer)
    {
        this.maxQueuedTransfersPerPeer = maxQueuedTransfersPerPeer;
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

    /** Validates; returns this. @throws IllegalArgumentException naming the bad setting. */
    public TransferConfig conclude()
    {
        require(lanesPerPeer >= 1 && lanesPerPeer <= MAX_LANES_PER_PEER,
            "lanesPerPeer must be in 1.." + MAX_LANES_PER_PEER + ", was " + lanesPerPeer);
        require(sliceBytes >= 4096, "sliceBytes must be at least 4096, was " + sliceBytes);
        require(maxQueuedTransfersPerPeer >= 1, "maxQueuedTransfersPerPeer must be positive, was " + maxQueuedTransfersPerPeer);
        require(transferTimeoutMs > 0, "transferTimeoutMs must be positive, was " + transferTimeoutMs);
        require(connectTimeoutMs > 0, "connectTimeoutMs must be positive, was " + connectTimeoutMs);
        require(ioThreads >= 1 && ioThreads <= 256, "ioThreads must be in 1..256, was " + ioThreads);
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
        c.transferTimeoutMs = transferTimeoutMs;
        c.connectTimeoutMs = connectTimeoutMs;
        c.ioThreads = ioThreads;
        c.preferEpoll = preferEpoll;
        return c;
    }
}
