package io.granary.transfer.natives;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The native TCP transfer server of libgranary_transfer: serves segment memory the owner registers with
 * {@link #segments} over the data-plane frame protocol, checking access tokens under the key of {@link #tokenKey},
 * and asks its {@link Handler} for the decisions that belong to the owner (the ledger) before any byte of a WRITE
 * moves and when a COMMIT arrives. One thread ("granary-native-node") runs the server and calls the handler; the
 * table and key may be replaced from any thread.
 */
public final class NativeTransferServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(NativeTransferServer.class);
    private static final long STOP_TIMEOUT_MS = 5_000;

    /** The owner's side of the frames, called on the server thread; must not block and must not throw. */
    public interface Handler
    {
        /**
         * A WRITE passed decode, status, token, segment and range checks: forget the ledger entries its range
         * overlaps. @return 0 to let its bytes land, else the ErrorCode number to answer (the payload is discarded).
         */
        int onWrite(int segmentId, long offset, int length);

        /**
         * A COMMIT arrived: its 64-byte request header, its payload (null when longer than 16 KiB or empty), and the
         * status of a refused WRITE of the same extent on this connection (0 if none). @return the answer's status.
         */
        int onCommit(byte[] header, byte[] payload, int failedWriteStatus);

        /** A connection ended: {@code reason} says why it was closed for a protocol error, null for a normal end. */
        void onClose(String peer, String reason);

        /**
         * Service times, batched: each sample is {@code (op << 62) | nanoseconds} with op 1 for a READ (header to
         * response queued) and 2 for a WRITE (header to last byte landed).
         */
        default void onLatencies(long[] samples)
        {
        }

        /** The time tokens expire by, when the server was made with {@code ownClock} (else the system clock's). */
        default long epochMillis()
        {
            return System.currentTimeMillis();
        }
    }

    /** The server's counters, as {@link #stats()} returns them. */
    public record Stats(
        long bytesIn,
        long bytesOut,
        long requests,
        long readVectors,
        long errorResponses,
        long protocolErrors,
        long connectionsOpened,
        long connectionsClosed,
        long tokensVerified,
        long tokensMissing,
        long tokensInvalid,
        long tokensExpired)
    {
        static final int COUNT = 12;
    }

    private final long handle;
    private final Thread thread;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean closed;

    /**
     * Binds at once and starts serving on its own thread.
     *
     * @param port     0 for an ephemeral port.
     * @param ownClock tokens expire by {@link Handler#epochMillis()} (an injected clock) instead of the system clock.
     * @throws UnsatisfiedLinkError when the library is not available.
     * @throws IllegalStateException when the address cannot be bound.
     */
    public NativeTransferServer(
        final String host, final int port, final int maxFrameBytes, final boolean ownClock, final Handler handler)
    {
        NativeTransfer.ensureAvailability();
        this.handle = NativeTransferJni.serverCreate(host, port, maxFrameBytes, ownClock);
        this.thread = new Thread(() ->
        {
            try
            {
                final int result = NativeTransferJni.serverRun(handle, handler);
                if (result != 0)
                {
                    LOG.error("native transfer server stopped with code {}", result);
                }
            }
            finally
            {
                stopped.countDown();
            }
        }, "granary-native-node");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    /** The bound port. */
    public int port()
    {
        return NativeTransferJni.serverPort(handle);
    }

    /** Replaces the table of segments served: ids, base addresses and sizes, index by index. */
    public synchronized void segments(final int[] ids, final long[] addresses, final long[] sizes)
    {
        if (!closed)
        {
            NativeTransferJni.serverSetSegments(handle, ids, addresses, sizes);
        }
    }

    /** Installs the 32-byte data-token key, or removes it ({@code null}: frames without a token are served). */
    public synchronized void tokenKey(final byte[] keyOrNull)
    {
        if (!closed)
        {
            NativeTransferJni.serverSetTokenKey(handle, keyOrNull);
        }
    }

    public synchronized Stats stats()
    {
        final long[] v = new long[Stats.COUNT];
        if (!closed)
        {
            NativeTransferJni.serverStats(handle, v);
        }
        return new Stats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]);
    }

    /** True once the server thread returned: no byte of segment memory is touched by it any more. */
    public boolean isTerminated()
    {
        return stopped.getCount() == 0;
    }

    /** Stops serving, closes every connection and frees the server (bounded wait); idempotent. */
    @Override
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        NativeTransferJni.serverStop(handle);
        boolean done = false;
        try
        {
            done = stopped.await(STOP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        closed = true;
        if (done)
        {
            NativeTransferJni.serverDestroy(handle);
        }
        else
        {
            LOG.warn("native transfer server thread did not stop within {} ms; its memory is not freed",
                STOP_TIMEOUT_MS);
        }
    }
}
