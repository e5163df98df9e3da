package io.granary.master.meta;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Rebuilt objects whose named parent the master did not hold when they were adopted, by the parent's tenant and key:
 * ledger reports come in any order (a chain's blocks on several nodes, a node's segments one after another), so a
 * child is often rebuilt before its parent. When an object of that key arrives (rebuilt or put), the children waiting
 * for it are linked to it ({@code MetadataStore#linkAwaitingChildren}).
 *
 * <p>A child is registered before the store looks its parent up once more, and a new object is in the store before
 * its waiting children are read here: whichever of the two comes second sees the other, so no child stays waiting
 * for a parent the store holds. Memory: one entry per waiting child, each a live object (at most the object budget);
 * a child leaves when it is linked or leaves the store. Thread safe without the store's locks (callers may hold one:
 * nothing here takes a shard lock).
 */
final class AwaitedParents
{
    private static final ObjectMeta[] NONE = new ObjectMeta[0];

    /** tenant NUL parent-key bytes (one char per byte) to the children waiting, an array replaced on every change. */
    private final ConcurrentHashMap<String, ObjectMeta[]> waiting = new ConcurrentHashMap<>();
    private final AtomicInteger count = new AtomicInteger();

    /** Registers {@code child} as waiting for the object {@code parentKey} of its tenant. */
    void add(final ObjectMeta child, final byte[] parentKey)
    {
        waiting.merge(key(child.tenant, parentKey), new ObjectMeta[] {child}, (had, one) ->
        {
            final ObjectMeta[] more = Arrays.copyOf(had, had.length + 1);
            more[had.length] = child;
            return more;
        });
        count.incrementAndGet();
    }

    /** Stops {@code child} waiting for {@code parentKey}; @return whether it was waiting. */
    boolean remove(final ObjectMeta child, final byte[] parentKey)
    {
        final boolean[] removed = new boolean[1];
        waiting.computeIfPresent(key(child.tenant, parentKey), (k, had) ->
        {
            for (int i = 0; i < had.length; i++)
            {
                if (had[i] == child)
                {
                    removed[0] = true;
                    if (had.length == 1)
                    {
                        return null;
                    }
                    final ObjectMeta[] fewer = new ObjectMeta[had.length - 1];
                    System.arraycopy(had, 0, fewer, 0, i);
                    System.arraycopy(had, i + 1, fewer, i, had.length - i - 1);
                    return fewer;
                }
            }
            return had;
        });
        if (removed[0])
        {
            count.decrementAndGet();
        }
        return removed[0];
    }

    /** The children waiting for the object {@code key} of {@code tenant}, as of now (an array not changed later). */
    ObjectMeta[] childrenOf(final String tenant, final byte[] key)
    {
        if (count.get() == 0)
        {
            return NONE;
        }
        final ObjectMeta[] children = waiting.get(key(tenant, key));
        return children == null ? NONE : children;
    }

    /** Children waiting now. */
    int size()
    {
        return count.get();
    }

    private static String key(final String tenant, final byte[] key)
    {
        return tenant + '\u0000' + new String(key, StandardCharsets.ISO_8859_1);
    }
}
