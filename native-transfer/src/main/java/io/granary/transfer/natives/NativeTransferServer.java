package io.granary.transfer.natives;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/**
 * The native TCP transfer server of libgranary_transfer: serves segment memory the owner registers with
 * {@link #segments} over the data-plane frame protocol, checking access tokens under the key of {@link #tokenKey},
 * and asks its {@link Handler} for the decisions that belong to the owner (the ledger) before any byte of a WRITE
 * moves and when a COMMIT arrives. Each of its event loops runs on a thread of its own ("granary-native-node-N"; the
 * first also accepts and spreads connections over the loops) and calls its own handler, for its own connections
 * only; with several loops the handlers run concurrently, so what they share must be thread safe. The table and key
 * may be replaced from any thread.
 */
public final class NativeTransferServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(NativeTransferServer.class);
    private static final long STOP_TIMEOUT_MS = 5_000;

    /** The owner's side of the frames, called on its event loop's thread; must not block and must not throw. */
    public interface Handler
    {
        /** {@link #onCommit}'s token status when the server did not check the token (GT_COMMIT_TOKEN_UNCHECKED). */
        int COMMIT_TOKEN_UNCHECKED = 1;
        /** Bytes of one entry of {@link #onWriteVector}. */
        int VECTOR_WRITE_ENTRY = 16;
        /** Bytes of an entry's COMMIT header in {@link #onCommitVector}. */
        int VECTOR_COMMIT_HEADER = 64;

        /**
         * A WRITE passed decode, status, token, segment and range checks: forget the ledger entries its range
         * overlaps. @return 0 to let its bytes land, else the ErrorCode number to answer (the payload is discarded).
         */
        int onWrite(int segmentId, long offset, int length);

        /**
         * A COMMIT arrived: its 64-byte request header, its payload (null when longer than 16 KiB or empty), the
         * status of a refused WRITE of the same extent on this connection (0 if none), and the server's verdict on
         * its token as the WRITE token of the committed extent: 0 (also while no token key is installed),
         * ACCESS_DENIED or TOKEN_EXPIRED, or {@link #COMMIT_TOKEN_UNCHECKED} when the payload is no record whose value
         * length the server could read. @return the answer's status.
         */
        int onCommit(byte[] header, byte[] payload, int failedWriteStatus, int tokenStatus);

        /** A connection ended: {@code reason} says why it was closed for a protocol error, null for a normal end. */
        void onClose(String peer, String reason);

        /**
         * The WRITE parts of one WRITEV that passed their checks, in one call before any of their bytes move
         * (docs/protocol.md, "WRITEV"): {@code count} entries of 16 bytes from index 0 (segment id, length as an
         * unsigned int, offset; big-endian), then {@code count} int32 statuses to write, each as {@link #onWrite}
         * returns it. The buffer is valid during the call only. By default {@link #onWrite} per entry.
         */
        default void onWriteVector(final ByteBuffer entries, final int count)
        {
            for (int i = 0; i < count; i++)
            {
                final int at = i * VECTOR_WRITE_ENTRY;
                entries.putInt(count * VECTOR_WRITE_ENTRY + i * 4,
                    onWrite(entries.getInt(at), entries.getLong(at + 8), entries.getInt(at + 4)));
            }
        }

        /**
         * The COMMITs of one WRITEV whose bytes landed, in one call: {@code count} int32 statuses to write from index
         * 0, each as {@link #onCommit} returns it; then per entry its 64-byte COMMIT header, its token status (as
         * {@link #onCommit} takes it), its record's length (int32 each, big-endian) and the record. No refused WRITE
         * precedes any of them. The buffer is valid during the call only. By default {@link #onCommit} per entry.
         */
        default void onCommitVector(final ByteBuffer entries, final int count)
        {
            int at = count * 4;
            for (int i = 0; i < count; i++)
            {
                final byte[] header = new byte[VECTOR_COMMIT_HEADER];
                entries.get(at, header);
                final int tokenStatus = entries.getInt(at + VECTOR_COMMIT_HEADER);
                final byte[] record = new byte[entries.getInt(at + VECTOR_COMMIT_HEADER + 4)];
                entries.get(at + VECTOR_COMMIT_HEADER + 8, record);
                at += VECTOR_COMMIT_HEADER + 8 + record.length;
                entries.putInt(i * 4, onCommit(header, record, 0, tokenStatus));
            }
        }

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
        long writeVectors,
        long errorResponses,
        long protocolErrors,
        long connectionsOpened,
        long connectionsClosed,
        long tokensVerified,
        long tokensMissing,
        long tokensInvalid,
        long tokensExpired)
    {
        static final int COUNT = 13;
    }

    /** Most event loops a server runs. */
    public static final int MAX_IO_THREADS = 256;

    private final long handle;
    private final int ioThreads;
    private final CountDownLatch stopped;
    private volatile boolean closed;

    /**
     * Binds at once and starts serving on one event-loop thread.
     *
     * @param port     0 for an ephemeral port.
     * @param ownClock tokens expire by {@link Handler#epochMillis()} (an injected clock) instead of the system clock.
     * @throws UnsatisfiedLinkError when the library is not available.
     * @throws IllegalStateException when the address cannot be bound.
     */
    public NativeTransferServer(
        final String host, final int port, final int maxFrameBytes, final boolean ownClock, final Handler handler)
    {
        this(host, port, maxFrameBytes, ownClock, 1, loop -> handler);
    }

    /**
     * Binds at once and starts serving on {@code ioThreads} event-loop threads.
     *
     * @param ioThreads 1..{@value #MAX_IO_THREADS} event loops; connections are spread over them round-robin.
     * @param handlers  the handler of each loop (by index), called on that loop's thread only.
     * @throws IllegalArgumentException for a bad setting.
     */
    public NativeTransferServer(
        final String host,
        final int port,
        final int maxFrameBytes,
        final boolean ownClock,
        final int ioThreads,
        final IntFunction<Handler> handlers)
    {
        this(host, port, maxFrameBytes, ownClock, ioThreads, false, handlers);
    }

    /**
     * As {@link #NativeTransferServer(String, int, int, boolean, int, IntFunction)}, and with {@code localTransfers}
     * LOCAL_CONNECT is answered for clients on this host (docs/protocol.md "LOCAL_CONNECT"), else refused.
     */
    public NativeTransferServer(
        final String host,
        final int port,
        final int maxFrameBytes,
        final boolean ownClock,
        final int ioThreads,
        final boolean localTransfers,
        final IntFunction<Handler> handlers)
    {
        NativeTransfer.ensureAvailability();
        if (ioThreads < 1 || ioThreads > MAX_IO_THREADS)
        {
            throw new IllegalArgumentException("ioThreads must be in 1.." + MAX_IO_THREADS + ", was " + ioThreads);
        }
        final Handler[] loopHandlers = new Handler[ioThreads];
        for (int i = 0; i < ioThreads; i++)
        {
            loopHandlers[i] = handlers.apply(i);
        }
        this.handle = NativeTransferJni.serverCreate(host, port, maxFrameBytes, ownClock, ioThreads, localTransfers);
        this.ioThreads = ioThreads;
        this.stopped = new CountDownLatch(ioThreads);
        for (int i = 0; i < ioThreads; i++)
        {
            final int loop = i;
            final Thread thread = new Thread(() ->
            {
                try
                {
                    final int result = NativeTransferJni.serverRun(handle, loop, loopHandlers[loop]);
                    if (result != 0)
                    {
                        LOG.error("native transfer server loop {} stopped with code {}", loop, result);
                        NativeTransferJni.serverStop(handle); // the others stop too: the node sees a dead server
                    }
                }
                finally
                {
                    stopped.countDown();
                }
            }, "granary-native-node-" + i);
            thread.setDaemon(true);
            thread.start();
        }
    }

    /** The number of event-loop threads. */
    public int ioThreads()
    {
        return ioThreads;
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
        return new Stats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]);
    }

    /** True once every event-loop thread returned: no byte of segment memory is touched by them any more. */
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
            LOG.warn("native transfer server threads did not stop within {} ms; its memory is not freed",
                STOP_TIMEOUT_MS);
        }
    }
}
