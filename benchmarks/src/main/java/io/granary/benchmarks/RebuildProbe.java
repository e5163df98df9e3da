package io.granary.benchmarks;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.LedgerEntry;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * How fast a restarted master rebuilds from ledger entries, and what relinking prefix chains costs it: a metadata store
 * (the master's own, no RPC in front) adopts {@code entries} ledger entries of 4 KiB values with keys shaped like the
 * prefix helper's (44 bytes), on one thread as one node's report is handled, in three shapes, each in a fresh store:
 * <ul>
 * <li>{@code none}: no entry names a parent;</li>
 * <li>{@code parent-first}: chains of {@code chain} blocks, each block naming the one before, reported in chain order
 * (every parent is held when its child arrives: linked at once);</li>
 * <li>{@code child-first}: the same chains reported from their ends (every child waits for its parent, which links it
 * when it arrives: the worst order).</li>
 * </ul>
 * Entries come in offset order in every shape, as a node's ledger report does (only the keys' order differs), unless
 * {@code offsets} says {@code descending} or {@code shuffled} (the order a master must also cope with, from a node that
 * reports otherwise).
 * Each shape runs {@code rounds} times; the figures are entries per second per round and their median.
 *
 * <pre>
 * java -Xmx4g -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.RebuildProbe [entries] [chain] [rounds] \
 *     [ascending|descending|shuffled]
 * </pre>
 */
public final class RebuildProbe
{
    private static final long EXTENT = 4096;

    private RebuildProbe()
    {
    }

    public static void main(final String[] args)
    {
        final int entries = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        final int chain = args.length > 1 ? Integer.parseInt(args[1]) : 64;
        final int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        final String offsets = args.length > 3 ? args[3] : "ascending";
        final long[] offsetAt = offsets(entries, offsets);
        final List<LedgerEntry> none = entries(entries, chain, false, false, offsetAt);
        final List<LedgerEntry> parentFirst = entries(entries, chain, true, false, offsetAt);
        final List<LedgerEntry> childFirst = entries(entries, chain, true, true, offsetAt);
        System.out.printf(Locale.ROOT, "rebuild of %d ledger entries (4 KiB values, 44-byte keys, chains of %d, " +
            "offsets %s), one thread, entries per second:%n", entries, chain, offsets);
        final double[][] rates = new double[3][rounds];
        for (int round = 0; round < rounds; round++)
        {
            // The shapes alternate within a round, so that the machine's slow stretches fall on all of them.
            rates[0][round] = run(none, 0, "none", round);
            rates[1][round] = run(parentFirst, entries - (entries + chain - 1) / chain, "parent-first", round);
            rates[2][round] = run(childFirst, entries - (entries + chain - 1) / chain, "child-first", round);
        }
        final String[] names = {"none", "parent-first", "child-first"};
        for (int shape = 0; shape < 3; shape++)
        {
            final double[] sorted = rates[shape].clone();
            Arrays.sort(sorted);
            System.out.printf(Locale.ROOT, "  %-12s median %,.0f entries/s (%.0f %% of none's median)%n", names[shape],
                sorted[rounds / 2], 100 * sorted[rounds / 2] / median(rates[0]));
        }
    }

    private static double median(final double[] values)
    {
        final double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    /** Adopts {@code entries} into a fresh store; checks every entry became an object and every link was made. */
    private static double run(final List<LedgerEntry> entries, final long links, final String shape, final int round)
    {
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        final MetadataStore store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        registry.mount("node-1", "node-1", "10.0.0.1:7001", 1, "node-1/seg0", entries.size() * EXTENT, true);
        final MountedSegment segment = registry.segment("node-1", 1);
        System.gc();
        final long start = System.nanoTime();
        for (final LedgerEntry e : entries)
        {
            if (store.adopt(segment, e) != MetadataStore.Adoption.OBJECT)
            {
                throw new IllegalStateException("entry " + e.getKey() + " not adopted");
            }
        }
        final long elapsed = System.nanoTime() - start;
        if (store.rebuildCounters().parentsLinked() != links || store.rebuiltAwaitingParents() != 0)
        {
            throw new IllegalStateException(shape + ": " + store.rebuildCounters().parentsLinked() + " links, " +
                store.rebuiltAwaitingParents() + " waiting; expected " + links + " and 0");
        }
        final double rate = entries.size() / (elapsed / 1e9);
        System.out.printf(Locale.ROOT, "  round %d %-12s %,.0f entries/s (%.0f ms)%n", round, shape, rate,
            elapsed / 1e6);
        return rate;
    }

    /** The offset of the entry reported {@code i}-th, for each i, in the order asked for. */
    private static long[] offsets(final int n, final String order)
    {
        final long[] at = new long[n];
        for (int i = 0; i < n; i++)
        {
            at[i] = (order.equals("descending") ? n - 1 - i : i) * EXTENT;
        }
        if (order.equals("shuffled"))
        {
            final java.util.Random random = new java.util.Random(1);
            for (int i = n - 1; i > 0; i--)
            {
                final int j = random.nextInt(i + 1);
                final long t = at[i];
                at[i] = at[j];
                at[j] = t;
            }
        }
        else if (!order.equals("ascending") && !order.equals("descending"))
        {
            throw new IllegalArgumentException("offsets: ascending, descending or shuffled, not " + order);
        }
        return at;
    }

    /** Ledger entries of {@code n} values in chains of {@code chain}, each chain reported forward or backward. */
    private static List<LedgerEntry> entries(
        final int n, final int chain, final boolean parents, final boolean reverse, final long[] offsetAt)
    {
        final List<LedgerEntry> out = new ArrayList<>(n);
        for (int first = 0; first < n; first += chain)
        {
            final int end = Math.min(n, first + chain);
            for (int j = 0; j < end - first; j++)
            {
                final int i = reverse ? end - 1 - j : first + j;
                // Offsets by report position, the same in every shape: only the keys' order varies.
                final LedgerEntry.Builder b = LedgerEntry.newBuilder().setTenant("default").setKey(key(i))
                    .setOffset(offsetAt[first + j]).setValueLength(EXTENT).setVersion(i + 1L).setAgeMs(1_000);
                if (parents && i > first)
                {
                    b.setParentKey(key(i - 1));
                }
                out.add(b.build());
            }
        }
        return out;
    }

    /** A 44-byte key shaped like the prefix helper's (the same as {@link MasterMemoryProbe}'s). */
    private static String key(final int i)
    {
        return String.format(Locale.ROOT, "kv1/llama-3.1-8b/ws1/r0/%016x/p%02d", i * 0x9E3779B97F4A7C15L, i % 2);
    }
}
