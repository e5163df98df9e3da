package io.granary.benchmarks;

import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;

import java.util.Locale;

/**
 * Heap a storage node needs per stored object: one segment's ledger (what the node reports to a master that rebuilds)
 * takes {@code entries} COMMIT records of 4 KiB extents, with keys shaped like the prefix helper's (44 bytes), tenant
 * "default" and, with {@code groups}, a 26-byte eviction group id per record (the prefix helper gives each block its
 * own group), with {@code parents} the previous entry's key as its parent key (as the prefix helper names the page of
 * the block before); the used heap after full GCs is measured before and after. Half the entries are then freed as the master
 * would free them, and the heap is measured again.
 *
 * <pre>
 * java -Xmx4g --add-opens java.base/jdk.internal.misc=ALL-UNNAMED -cp benchmarks/target/benchmarks.jar \
 *     io.granary.benchmarks.NodeLedgerMemoryProbe [entries] [groups] [parents]
 * </pre>
 * The figure is for sizing a node's heap (docs/operations.md): a segment of S bytes holding values of V bytes keeps
 * about S / V entries.
 */
public final class NodeLedgerMemoryProbe
{
    private static final long EXTENT = 4096;

    private NodeLedgerMemoryProbe()
    {
    }

    public static void main(final String[] args)
    {
        final int entries = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        final boolean groups = args.length > 1 && Boolean.parseBoolean(args[1]);
        final boolean parents = args.length > 2 && Boolean.parseBoolean(args[2]);
        try (SegmentRegistry registry = new SegmentRegistry())
        {
            // Not touched: the probe writes no value bytes, so the segment costs address space only.
            final Segment segment = registry.allocate("probe/seg0", entries * EXTENT);
            final SegmentLedger ledger = segment.ledger();
            final long empty = usedHeap();
            for (int i = 0; i < entries; i++)
            {
                final CommitRecord record = new CommitRecord(CommitRecord.FLAG_CRC32C, "default", key(i),
                    groups ? String.format(Locale.ROOT, "kv1/ws1/%018x", i * 31L) : "",
                    parents && i > 0 ? key(i - 1) : "", EXTENT, i + 1L, 0, i);
                check(ledger.beforeWrite(segment.id(), i * EXTENT, EXTENT), "WRITE");
                if (ledger.commit(segment.id(), i * EXTENT, record, 1_000L + i) != 0)
                {
                    throw new IllegalStateException("COMMIT " + i + " refused");
                }
            }
            check(ledger.size() == entries, "size");
            final long full = usedHeap();
            for (int i = 0; i < entries; i += 2)
            {
                check(ledger.free(i * EXTENT, i + 1L), "free");
            }
            final long half = usedHeap();
            check(ledger.snapshot().get(0).key().equals(key(1)), "snapshot");
            System.out.printf(Locale.ROOT, "node ledger heap per entry (key 44 bytes, %s, %s, %d entries): %.0f " +
                    "bytes; after freeing every other entry %.0f bytes per entry left%n",
                groups ? "26-byte group id" : "no group", parents ? "44-byte parent key" : "no parent", entries,
                (full - empty) / (double)entries,
                (half - empty) / (double)ledger.size());
            System.out.printf(Locale.ROOT, "(used heap: empty %.1f MiB, full %.1f MiB, half freed %.1f MiB)%n",
                empty / 1048576.0, full / 1048576.0, half / 1048576.0);
        }
    }

    /** A 44-byte key shaped like the prefix helper's (the same as {@link MasterMemoryProbe}'s). */
    private static String key(final int i)
    {
        return String.format(Locale.ROOT, "kv1/llama-3.1-8b/ws1/r0/%016x/p%02d", i * 0x9E3779B97F4A7C15L, i % 2);
    }

    private static void check(final boolean ok, final String what)
    {
        if (!ok)
        {
            throw new IllegalStateException(what + " failed");
        }
    }

    private static long usedHeap()
    {
        final Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 4; i++)
        {
            System.gc();
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }
}
