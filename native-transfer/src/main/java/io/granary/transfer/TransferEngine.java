package io.granary.transfer;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * Moves bytes between local memory and extents of storage-node segments; the one interface the
 * client (and later the storage node, for replication) uses, whatever transport is underneath.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li><b>Completion.</b> {@link #submit} never throws for a transfer failure and its future
 *   never completes exceptionally: it completes with an ErrorCode number — 0 (OK),
 *   TRANSFER_FAIL (-800) when the peer is unreachable or the connection broke, RPC_TIMEOUT (-901)
 *   when no answer came within the transfer timeout, UNAVAILABLE_IN_CURRENT_STATUS (-1010) when the
 *   peer's queue stayed full (backpressure: nothing was sent, the local buffer was not touched), or
 *   the status the node returned (SEGMENT_NOT_FOUND, INVALID_PARAMS for a range outside the
 *   segment, ...).</li>
 *   <li><b>Memory.</b> The caller keeps {@code request.local()} alive and untouched until the
 *   future completes. After completion the engine holds no reference to it. On a failed READ
 *   the destination range may hold partial data.</li>
 *   <li><b>Ordering.</b> None between requests, even to the same peer; requests are pipelined and
 *   may be split into slices spread over several connections.</li>
 *   <li><b>Commit.</b> A WRITE with a {@linkplain TransferRequest#commit() commit record} sends the
 *   COMMIT frame only on the same connection right behind a WRITE sent as one frame, or after every
 *   slice of a sliced WRITE succeeded; so a node never sees the COMMIT of bytes it did not receive. The
 *   future completes with OK only when the WRITE and the COMMIT both succeeded.</li>
 *   <li><b>Threading.</b> Thread safe. Futures complete on engine I/O threads: callbacks must
 *   not block.</li>
 *   <li><b>Lifecycle.</b> {@link #close()} fails every outstanding or waiting request with TRANSFER_FAIL and
 *   releases connections and native resources; later submits complete with TRANSFER_FAIL.</li>
 * </ul>
 */
public interface TransferEngine extends AutoCloseable
{
    /** The transport actually in use (never {@link TransportKind#AUTO}). */
    TransportKind kind();

    /** Starts one transfer; the future completes with an ErrorCode number (0 = OK). */
    CompletableFuture<Integer> submit(TransferRequest request);

    /**
     * Registers a direct buffer that many transfers will use (an inference engine's pool of KV pages): transfers
     * whose local range lies inside it skip per-transfer registration, and over RDMA its memory registration is
     * made once (on first one-sided use) instead of per transfer. Purely a speed-up: transfers are correct with or
     * without it. Until {@link #unregisterMemory} the engine holds the buffer (so its memory stays allocated).
     *
     * @return true when this engine keeps the registration, false when it has nothing to gain from one (the Java
     *         transports).
     * @throws IllegalArgumentException for a heap or empty buffer, or one overlapping a registered buffer.
     * @throws IllegalStateException when the engine holds as many registrations as it can.
     */
    default boolean registerMemory(final ByteBuffer buffer)
    {
        checkRegistrable(buffer);
        return false;
    }

    /** The check every {@link #registerMemory} makes first. @throws IllegalArgumentException as it says. */
    static void checkRegistrable(final ByteBuffer buffer)
    {
        if (buffer == null || !buffer.isDirect() || buffer.capacity() == 0)
        {
            throw new IllegalArgumentException("only a non-empty direct buffer can be registered");
        }
    }

    /**
     * Forgets a buffer of {@link #registerMemory}, named by it or a duplicate (with its RDMA registration). No transfer
     * on it may be outstanding. @return false when it was not registered.
     */
    default boolean unregisterMemory(final ByteBuffer buffer)
    {
        return false;
    }

    /**
     * Lets the calling thread move its own bytes: until {@link Driver#close()}, the transfers this thread submits are
     * carried out by this thread inside {@link Driver#drive}, with no hand-off to I/O threads and back (how the
     * synchronous client API moves its bytes). Their futures then complete on this thread, inside {@code drive}. Null
     * when the engine cannot do that (its futures complete on its own threads as usual).
     */
    default Driver openDriver()
    {
        return null;
    }

    /**
     * The I/O loop of one thread's transfers (see {@link #openDriver()}). Confined to the thread that opened it,
     * except {@link #wakeup()}.
     */
    interface Driver extends AutoCloseable
    {
        /** True while a transfer submitted under this driver has not completed yet. */
        boolean hasWork();

        /**
         * Sends what is queued, then waits up to {@code maxWaitNs} for answers and completes the transfers they finish
         * (timeouts included); returns early once something completed or after {@link #wakeup()}.
         */
        void drive(long maxWaitNs);

        /** Makes a {@link #drive} in progress return soon; safe from any thread. */
        void wakeup();

        /**
         * Ends the scope: transfers still open fail with TRANSFER_FAIL (their buffers are released first), and later
         * submits of this thread go to the engine's own threads again.
         */
        @Override
        void close();
    }

    @Override
    void close();
}
