package io.granary.benchmarks.trace;

import io.granary.master.evict.EvictionPolicy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PriorityQueue;

/**
 * An in-Java model of what the master does with a trace replayed through the prefix-cache helper, to check the
 * real cluster against and to compute figures quickly: a pool of {@code capacityPages} equal pages, blocks of
 * {@code pagesPerBlock} pages evicted whole, on-demand eviction rounds that free at least
 * {@code max(page, ratio x capacity)} value bytes when a page does not fit, in the master's order for either
 * {@link EvictionPolicy} (age = the last touch, in the order the replay's calls make them). One request: the prefix
 * run of whole blocks is found and touched (lookup, then load), the present blocks behind the first missing one are
 * counted as holes and left alone, and every missing block is stored: linked to its parent if present, its pages
 * allocated in order while the request's earlier new blocks are still unfinished, then all completed in order.
 * Not thread safe.
 */
public final class PoolModel
{
    private final EvictionPolicy policy;
    private final long capacityPages;
    private final int pagesPerBlock;
    private final long pageValueBytes;
    private final long targetBytes;

    // Per block id, grown on demand.
    private boolean[] present = new boolean[1024];
    private boolean[] complete = new boolean[1024];
    private long[] age = new long[1024];
    private int[] children = new int[1024];
    private int[] incarnation = new int[1024];
    /** The parent this block counts on, and that parent's incarnation then (-1: none). */
    private int[] linkedParent = new int[1024];
    private int[] linkedIncarnation = new int[1024];

    private final PriorityQueue<long[]> byAge = new PriorityQueue<>((a, b) -> Long.compare(a[0], b[0]));
    private final PriorityQueue<long[]> leavesByAge = new PriorityQueue<>((a, b) -> Long.compare(a[0], b[0]));
    private long clock;
    private long usedPages;

    private long lookedUpBlocks;
    private long hitBlocks;
    private long strandedBlocks;
    private long holeBlocks;
    private long evictedBlocks;
    private long prefixBreaks;
    private long rounds;
    private long storedBlocks;
    private long failedPages;

    /**
     * @param capacityPages   pages the pool holds (segment bytes / allocation size of a page).
     * @param pagesPerBlock   objects per block (one eviction group).
     * @param pageValueBytes  value length of a page (what eviction counts as freed).
     * @param ratio           the master's eviction ratio.
     * @param capacityBytes   the pool's bytes (the ratio's base).
     */
    public PoolModel(
        final EvictionPolicy policy,
        final long capacityPages,
        final int pagesPerBlock,
        final long pageValueBytes,
        final double ratio,
        final long capacityBytes)
    {
        this.policy = policy;
        this.capacityPages = capacityPages;
        this.pagesPerBlock = pagesPerBlock;
        this.pageValueBytes = pageValueBytes;
        this.targetBytes = Math.max(pageValueBytes, (long)(ratio * capacityBytes));
        Arrays.fill(linkedParent, -1);
    }

    /** Replays one request (its full-block ids); returns the blocks of its prefix run. */
    public int request(final int[] blocks)
    {
        for (final int b : blocks)
        {
            ensure(b);
        }
        int run = 0;
        while (run < blocks.length && present[blocks[run]] && complete[blocks[run]])
        {
            run++;
        }
        lookedUpBlocks += blocks.length;
        hitBlocks += run;
        int lastPresent = -1;
        int strandedHere = 0;
        for (int i = run + 1; i < blocks.length; i++)
        {
            if (present[blocks[i]])
            {
                strandedHere++;
                lastPresent = i;
            }
        }
        strandedBlocks += strandedHere;
        holeBlocks += lastPresent < 0 ? 0 : lastPresent - run + 1 - strandedHere;
        for (int i = 0; i < run; i++)
        {
            touch(blocks[i]);
        }
        final List<Integer> added = new ArrayList<>();
        for (int i = run; i < blocks.length; i++)
        {
            final int b = blocks[i];
            if (present[b])
            {
                continue; // stored behind a hole: the put finds it and changes nothing
            }
            present[b] = true;
            complete[b] = false;
            incarnation[b]++;
            children[b] = 0;
            linkedParent[b] = -1;
            final int p = i == 0 ? -1 : blocks[i - 1];
            if (p >= 0 && present[p])
            {
                linkedParent[b] = p;
                linkedIncarnation[b] = incarnation[p];
                children[p]++;
            }
            boolean allPages = true;
            for (int page = 0; page < pagesPerBlock; page++)
            {
                if (usedPages >= capacityPages)
                {
                    evictRound();
                }
                if (usedPages >= capacityPages)
                {
                    allPages = false;
                    failedPages++;
                    continue;
                }
                usedPages++;
            }
            if (!allPages)
            {
                // The real put leaves the block's stored pages behind and its lookup never sees it whole; the model
                // keeps it simple and refuses to replay such a run (the benchmark sizes pools so it cannot happen).
                throw new IllegalStateException("a page found no room after eviction: the pool is too small");
            }
            added.add(b);
        }
        for (final int b : added)
        {
            complete[b] = true;
            setAge(b, ++clock);
            storedBlocks++;
        }
        return run;
    }

    private void touch(final int b)
    {
        setAge(b, ++clock);
    }

    private void setAge(final int b, final long now)
    {
        age[b] = now;
        byAge.add(new long[] {now, b});
        if (children[b] == 0)
        {
            leavesByAge.add(new long[] {now, b});
        }
    }

    private boolean evictable(final int b, final long entryAge)
    {
        return present[b] && complete[b] && age[b] == entryAge;
    }

    /** One on-demand round: frees at least the target in value bytes, in the policy's order. */
    private void evictRound()
    {
        rounds++;
        long freed = 0;
        if (policy == EvictionPolicy.PREFIX_LEAF_FIRST)
        {
            long[] e;
            while (freed < targetBytes && (e = leavesByAge.poll()) != null)
            {
                final int b = (int)e[1];
                if (evictable(b, e[0]) && children[b] == 0)
                {
                    freed += evict(b);
                }
            }
        }
        // Oldest lease first over everything left: the whole round under OLDEST_LEASE, the fallback under
        // PREFIX_LEAF_FIRST (reached only when no leaf is left, so whatever it takes still has a child, or became a
        // leaf during this round as the master's scan-time list would have it).
        long[] e;
        while (freed < targetBytes && (e = byAge.poll()) != null)
        {
            final int b = (int)e[1];
            if (evictable(b, e[0]))
            {
                if (children[b] > 0)
                {
                    prefixBreaks++;
                }
                freed += evict(b);
            }
        }
    }

    private long evict(final int b)
    {
        present[b] = false;
        complete[b] = false;
        usedPages -= pagesPerBlock;
        evictedBlocks++;
        final int p = linkedParent[b];
        if (p >= 0 && present[p] && incarnation[p] == linkedIncarnation[b])
        {
            if (--children[p] == 0 && complete[p])
            {
                leavesByAge.add(new long[] {age[p], p});
            }
        }
        linkedParent[b] = -1;
        return pagesPerBlock * pageValueBytes;
    }

    private void ensure(final int id)
    {
        if (id < present.length)
        {
            return;
        }
        final int n = Math.max(id + 1, present.length * 2);
        present = Arrays.copyOf(present, n);
        complete = Arrays.copyOf(complete, n);
        age = Arrays.copyOf(age, n);
        children = Arrays.copyOf(children, n);
        incarnation = Arrays.copyOf(incarnation, n);
        final int old = linkedParent.length;
        linkedParent = Arrays.copyOf(linkedParent, n);
        Arrays.fill(linkedParent, old, n, -1);
        linkedIncarnation = Arrays.copyOf(linkedIncarnation, n);
    }

    public double hitRate()
    {
        return lookedUpBlocks == 0 ? 0 : (double)hitBlocks / lookedUpBlocks;
    }

    public long lookedUpBlocks()
    {
        return lookedUpBlocks;
    }

    public long hitBlocks()
    {
        return hitBlocks;
    }

    /** Present blocks behind a request's first missing block. */
    public long strandedBlocks()
    {
        return strandedBlocks;
    }

    /** Missing blocks followed by a present block of the same request. */
    public long holeBlocks()
    {
        return holeBlocks;
    }

    public long evictedBlocks()
    {
        return evictedBlocks;
    }

    /** Blocks evicted while a child counted on them. */
    public long prefixBreaks()
    {
        return prefixBreaks;
    }

    public long rounds()
    {
        return rounds;
    }

    public long storedBlocks()
    {
        return storedBlocks;
    }
}
