package io.granary.master.meta;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;

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
 *
 * <p>Every new object asks for its waiting children, a put too, for as long as any child waits (after a restart some
 * may wait for good: their parent was lost with its node). So that such a put costs one bit test and no allocation, a
 * filter of the waited-for keys' hashes (one bit per hash, 128 KiB, set when a child registers, never cleared) answers
 * "none" for nearly every key without building the map's key. The bit is set before the entry is published, and the
 * store reads it after inserting the new object, so the argument above still holds.
 */
final class AwaitedParents
{
    private static final ObjectMeta[] NONE = new ObjectMeta[0];
    private static final int FILTER_BITS = 1 << 20;

    /** tenant NUL parent-key bytes (one char per byte) to the children waiting, an array replaced on every change. */
    private final ConcurrentHashMap<String, ObjectMeta[]> waiting = new ConcurrentHashMap<>();
    private final AtomicInteger count = new AtomicInteger();
    private final AtomicLongArray filter = new AtomicLongArray(FILTER_BITS / Long.SIZE);

    /** Registers {@code child} as waiting for the object {@code parentKey} of its tenant. */
    void add(final ObjectMeta child, final byte[] parentKey)
    {
        final int bit = bit(MetadataStore.hashOf(child.tenant, parentKey, 0, parentKey.length));
        filter.accumulateAndGet(bit >>> 6, 1L << bit, (had, one) -> had | one);
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

    /**
     * The children waiting for the object {@code key} of {@code tenant} (whose {@link MetadataStore#hashOf hash} is
     * {@code hash}), as of now (an array not changed later).
     */
    ObjectMeta[] childrenOf(final String tenant, final byte[] key, final long hash)
    {
        final int bit = bit(hash);
        if (count.get() == 0 || (filter.get(bit >>> 6) & (1L << bit)) == 0)
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

    /** The filter's bit for a hash: its low bits (the high ones pick the store's shard). */
    private static int bit(final long hash)
    {
        return (int)hash & (FILTER_BITS - 1);
    }

    private static String key(final String tenant, final byte[] key)
    {
        return tenant + '\u0000' + new String(key, StandardCharsets.ISO_8859_1);
    }
}
