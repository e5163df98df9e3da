package io.granary.node.segment;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Maps segment ids to the node's {@link Segment}s. Lookups are lock-free reads of an immutable snapshot
 * (transfer threads look up on every frame); changes are rare and serialised.
 */
public final class SegmentRegistry implements AutoCloseable
{
    private static final Segment[] EMPTY = new Segment[0];

    private volatile Segment[] segments = EMPTY;
    private Runnable changeListener = () -> { };
    private final LedgerBudget ledgerBudget;

    /** A registry whose segments' ledgers share {@link LedgerBudget#ofHeap()}. */
    public SegmentRegistry()
    {
        this(LedgerBudget.ofHeap());
    }

    /** A registry whose segments' ledgers share {@code ledgerBudget}. */
    public SegmentRegistry(final LedgerBudget ledgerBudget)
    {
        this.ledgerBudget = ledgerBudget;
    }

    /** The heap budget of the ledgers of this registry's segments. */
    public LedgerBudget ledgerBudget()
    {
        return ledgerBudget;
    }

    /**
     * Run (under this registry's lock) after every change of the segments or their ids, and once at once; the native
     * transfer server copies the table of ids and memory with it.
     */
    public synchronized void changeListener(final Runnable listener)
    {
        changeListener = listener;
        listener.run();
    }

    /** Allocates a segment of plain memory with a fresh random nonzero id, distinct from every id registered here. */
    public synchronized Segment allocate(final String name, final long sizeBytes)
    {
        return allocate(name, sizeBytes, HugePages.OFF);
    }

    /** {@link #allocate(String, long)} with huge pages as {@code hugePages} says. */
    public synchronized Segment allocate(final String name, final long sizeBytes, final HugePages hugePages)
    {
        final Segment segment = new Segment(freshId(), name, sizeBytes, hugePages);
        segment.ledger().budget(ledgerBudget);
        add(segment);
        return segment;
    }

    /**
     * Gives a registered segment a fresh random id, keeping its memory and ledger. Every extent handed out
     * under the old id (by a master that has since forgotten this node) then gets SEGMENT_NOT_FOUND, so a
     * stale reader or writer can never touch memory the next master hands out again.
     *
     * @return the new id.
     */
    public synchronized int rekey(final Segment segment)
    {
        final int id = freshId();
        segment.ledger().rekey(id);
        changeListener.run();
        return id;
    }

    private int freshId()
    {
        int id;
        do
        {
            id = ThreadLocalRandom.current().nextInt();
        }
        while (id == 0 || get(id) != null);
        return id;
    }

    /** Registers a segment. @throws IllegalArgumentException when its id is taken. */
    public synchronized void add(final Segment segment)
    {
        if (get(segment.id()) != null)
        {
            throw new IllegalArgumentException(
                "segment id " + Integer.toUnsignedString(segment.id()) + " already registered");
        }
        final Segment[] next = Arrays.copyOf(segments, segments.length + 1);
        next[segments.length] = segment;
        segments = next;
        changeListener.run();
    }

    /** The segment with this id, or null. */
    public Segment get(final int segmentId)
    {
        for (final Segment segment : segments)
        {
            if (segment.id() == segmentId)
            {
                return segment;
            }
        }
        return null;
    }

    /** The registered segments in registration order. */
    public List<Segment> segments()
    {
        return List.of(segments);
    }

    /** Removes and frees every segment; only when no transfer thread can touch them any more. */
    @Override
    public synchronized void close()
    {
        final Segment[] all = segments;
        segments = EMPTY;
        changeListener.run();
        for (final Segment segment : all)
        {
            segment.close();
        }
    }
}
