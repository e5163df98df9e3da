package io.granary.node.segment;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The heap a node's ledgers may take: one entry per stored value, so a node full of small values would otherwise
 * grow its ledgers until the JVM runs out of heap and dies with every value it holds. A COMMIT that would take the
 * ledgers past the limit is refused with NO_AVAILABLE_HANDLE instead (the client puts the value elsewhere or fails
 * the put; nothing is lost) until frees make room. The bytes counted per entry are {@link #entryBytes}, an estimate
 * of what the ledger really holds (its columns, its index and the key and group id bytes).
 */
public final class LedgerBudget
{
    /** The share of the JVM's maximum heap a node's ledgers may take. */
    public static final double HEAP_FRACTION = 0.7;
    /** Bytes of an entry besides its key and group id: 64 in the ledger's columns, 8 in its offset index. */
    static final long ENTRY_FIXED_BYTES = 72;

    private final long limitBytes;
    private final AtomicLong usedBytes = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();

    public LedgerBudget(final long limitBytes)
    {
        if (limitBytes <= 0)
        {
            throw new IllegalArgumentException("ledger budget must be positive, was " + limitBytes);
        }
        this.limitBytes = limitBytes;
    }

    /** {@link #HEAP_FRACTION} of this JVM's maximum heap. */
    public static LedgerBudget ofHeap()
    {
        return new LedgerBudget(Math.max(1, (long)(Runtime.getRuntime().maxMemory() * HEAP_FRACTION)));
    }

    /** No limit (a segment not registered with a node). */
    static LedgerBudget unlimited()
    {
        return new LedgerBudget(Long.MAX_VALUE);
    }

    /**
     * What one entry is counted as: {@code namesLength} is the length of its key and group id as the ledger keeps them
     * (2 + the UTF-8 bytes of both). Since 2026-12-07 those bytes sit in their page's arena, with up to a quarter of
     * headroom, instead of an array of their own; the estimate kept the array's 16-byte header and padding, which is
     * about what the headroom and the two int columns added for the arena take.
     */
    public static long entryBytes(final int namesLength)
    {
        return ENTRY_FIXED_BYTES + ((16L + namesLength + 7) & ~7L);
    }

    /** Takes {@code bytes} if they fit under the limit. @return false (and counts a refusal) when they do not. */
    boolean tryReserve(final long bytes)
    {
        long used;
        do
        {
            used = usedBytes.get();
            if (used + bytes > limitBytes)
            {
                refusals.incrementAndGet();
                return false;
            }
        }
        while (!usedBytes.compareAndSet(used, used + bytes));
        return true;
    }

    void release(final long bytes)
    {
        usedBytes.addAndGet(-bytes);
    }

    public long limitBytes()
    {
        return limitBytes;
    }

    public long usedBytes()
    {
        return usedBytes.get();
    }

    /** COMMITs refused because the ledgers were at the limit. */
    public long refusals()
    {
        return refusals.get();
    }
}
