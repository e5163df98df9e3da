package io.granary.benchmarks.trace;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * The offline upper bound on a trace's prefix hit rate for a pool of {@code capacityBlocks} blocks: Belady's MIN
 * with bypass (on a miss, keep the block whose next use is farthest away out of the pool, the newcomer included),
 * counting every block reference that finds its block cached. MIN maximises block hits for equal-size blocks, and a
 * policy's prefix hits are at most its block hits, so no policy of that capacity, online or offline, does better.
 */
public final class BeladyBound
{
    private BeladyBound()
    {
    }

    /** Block hits over block references. */
    public static double hitRate(final Trace trace, final long capacityBlocks)
    {
        final Map<Integer, ArrayDeque<Integer>> uses = new HashMap<>();
        for (int t = 0; t < trace.requestCount(); t++)
        {
            for (final int b : trace.request(t))
            {
                final ArrayDeque<Integer> q = uses.computeIfAbsent(b, k -> new ArrayDeque<>());
                if (q.isEmpty() || q.peekLast() != t)
                {
                    q.addLast(t);
                }
            }
        }
        final Map<Integer, Integer> resident = new HashMap<>(); // block -> its next use
        final PriorityQueue<int[]> farthest = new PriorityQueue<>((a, b) -> Integer.compare(b[0], a[0]));
        long hits = 0;
        long refs = 0;
        for (int t = 0; t < trace.requestCount(); t++)
        {
            for (final int b : trace.request(t))
            {
                refs++;
                final int next = nextUse(uses.get(b), t);
                if (resident.containsKey(b))
                {
                    hits++;
                }
                else if (resident.size() >= capacityBlocks)
                {
                    int[] top;
                    while ((top = farthest.peek()) != null && resident.getOrDefault(top[1], -1) != top[0])
                    {
                        farthest.poll(); // stale
                    }
                    if (top == null || next >= top[0])
                    {
                        continue; // bypass: nothing cached is needed later than the newcomer
                    }
                    farthest.poll();
                    resident.remove(top[1]);
                }
                resident.put(b, next);
                farthest.add(new int[] {next, b});
            }
        }
        return refs == 0 ? 0 : (double)hits / refs;
    }

    /** The first use after request {@code t}, or {@link Integer#MAX_VALUE} for none; drops the uses up to t. */
    private static int nextUse(final ArrayDeque<Integer> q, final int t)
    {
        while (!q.isEmpty() && q.peekFirst() <= t)
        {
            q.pollFirst();
        }
        return q.isEmpty() ? Integer.MAX_VALUE : q.peekFirst();
    }
}
