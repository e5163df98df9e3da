package io.granary.transfer.natives;

import java.nio.ByteBuffer;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Direct buffers that heap-buffer transfers are staged through, reused instead of allocated per transfer: a
 * {@link ByteBuffer#allocateDirect} costs microseconds (reservation, zeroing, a cleaner the GC has to process), which
 * for a batch of small heap-buffer reads (the client's {@code getBatch} into {@code byte[]}s) was most of the call.
 * Buffers come in power-of-two sizes from {@value #MIN_BYTES} to {@value #MAX_POOLED_BYTES} bytes; larger transfers
 * get a buffer of their own, as before. At most {@link #capacityBytes()} bytes of idle buffers are kept; what comes back
 * beyond that is left to the GC. Thread safe.
 *
 * <p>A buffer must come back only once nothing can write into it any more: after the C engine reported its transfer
 * done, or after the engine was destroyed.
 */
final class StagingPool
{
    static final int MIN_BYTES = 4096;
    static final int MAX_POOLED_BYTES = 1 << 20;
    private static final int MIN_SHIFT = Integer.numberOfTrailingZeros(MIN_BYTES);
    private static final int CLASSES = Integer.numberOfTrailingZeros(MAX_POOLED_BYTES) - MIN_SHIFT + 1;

    private final long capacityBytes;
    private final ArrayBlockingQueue<ByteBuffer>[] idle;
    private final AtomicLong idleBytes = new AtomicLong();

    /** @param capacityBytes most bytes of idle buffers kept (at least one buffer of the largest class fits). */
    @SuppressWarnings("unchecked")
    StagingPool(final long capacityBytes)
    {
        if (capacityBytes < MAX_POOLED_BYTES)
        {
            throw new IllegalArgumentException("a staging pool holds at least " + MAX_POOLED_BYTES + " bytes, was " +
                capacityBytes);
        }
        this.capacityBytes = capacityBytes;
        idle = new ArrayBlockingQueue[CLASSES];
        for (int c = 0; c < CLASSES; c++)
        {
            idle[c] = new ArrayBlockingQueue<>((int)Math.max(1, Math.min(4096, capacityBytes >>> (c + MIN_SHIFT))));
        }
    }

    long capacityBytes()
    {
        return capacityBytes;
    }

    /** Bytes of the idle buffers held now. */
    long idleBytes()
    {
        return idleBytes.get();
    }

    /** A direct buffer of at least {@code length} bytes (position 0, limit its capacity); its content is undefined. */
    ByteBuffer acquire(final int length)
    {
        if (length > MAX_POOLED_BYTES)
        {
            return ByteBuffer.allocateDirect(length);
        }
        final int c = classOf(length);
        final ByteBuffer reused = idle[c].poll();
        if (reused != null)
        {
            idleBytes.addAndGet(-reused.capacity());
            return reused.clear();
        }
        return ByteBuffer.allocateDirect(MIN_BYTES << c);
    }

    /** Takes back a buffer of {@link #acquire}; nothing may write into it any more. */
    void release(final ByteBuffer buffer)
    {
        final int capacity = buffer.capacity();
        if (capacity > MAX_POOLED_BYTES || capacity < MIN_BYTES || Integer.bitCount(capacity) != 1 ||
            !buffer.isDirect())
        {
            return; // a buffer of its own (a large transfer): the GC frees it
        }
        if (idleBytes.addAndGet(capacity) > capacityBytes)
        {
            idleBytes.addAndGet(-capacity);
            return;
        }
        if (!idle[classOf(capacity)].offer(buffer))
        {
            idleBytes.addAndGet(-capacity);
        }
    }

    private static int classOf(final int length)
    {
        final int bytes = Math.max(MIN_BYTES, length);
        return 32 - Integer.numberOfLeadingZeros(bytes - 1) - MIN_SHIFT;
    }
}
