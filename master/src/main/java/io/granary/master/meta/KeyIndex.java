package io.granary.master.meta;

import java.util.function.Consumer;

/**
 * A shard's index of its keys: open addressing with linear probing over parallel arrays (the
 * 64-bit key hash and the object), deletion by backward shift (no tombstones), load at most 1/2.
 * A lookup compares the stored hash first and the key bytes and tenant only on a hash match, and
 * needs no String. Not thread safe: guarded by the owning shard's lock.
 */
final class KeyIndex
{
    private static final int MIN_CAPACITY = 8;

    private long[] hashes = new long[MIN_CAPACITY];
    private ObjectMeta[] metas = new ObjectMeta[MIN_CAPACITY];
    private int mask = MIN_CAPACITY - 1;
    private int size;

    int size()
    {
        return size;
    }

    /** The object with these key bytes in {@code tenant}, or null. {@code hash} is {@link ObjectMeta#hash}. */
    ObjectMeta get(final String tenant, final byte[] key, final int off, final int len, final long hash)
    {
        int i = (int)hash & mask;
        long h;
        while ((h = hashes[i]) != 0)
        {
            if (h == hash)
            {
                final ObjectMeta m = metas[i];
                if (KeyBytes.equal(m.keyBytes, key, off, len) && (m.tenant == tenant || m.tenant.equals(tenant)))
                {
                    return m;
                }
            }
            i = (i + 1) & mask;
        }
        return null;
    }

    /**
     * Reads, without the shard's lock, what a lookup of {@code hash} would read first (its slot, the object there and
     * that object's key bytes), and returns a value that depends on them; the answer means nothing. A batch touches
     * every key's memory this way before looking any of them up, so the cache misses of different keys overlap
     * instead of following one another. Racing a writer is harmless: nothing read here is trusted.
     */
    int touch(final long hash)
    {
        final long[] h = hashes;
        final ObjectMeta[] m = metas;
        final int i = (int)hash & (h.length - 1);
        if (i >= m.length)
        {
            return 0; // arrays of two generations (a rehash in between)
        }
        final ObjectMeta meta = m[i];
        if (meta == null || h[i] != hash)
        {
            return (int)h[i];
        }
        return meta.keyBytes.length + meta.touchReplicas();
    }

    /**
     * Whether an entry with this {@code hash} may be present, read <b>without</b> the shard's lock: false is only a
     * hint (a writer may be adding it, or a rehash may be moving the arrays under this read), true may also be another
     * key of the same 64-bit hash. Never fails and always ends: the arrays are read once each and the walk stops at
     * an empty slot or after a full round.
     */
    boolean mayContain(final long hash)
    {
        final long[] h = hashes;
        final int m = h.length - 1;
        int i = (int)hash & m;
        for (int n = 0; n <= m; n++)
        {
            final long x = h[i];
            if (x == 0)
            {
                return false;
            }
            if (x == hash)
            {
                return true;
            }
            i = (i + 1) & m;
        }
        return true;
    }

    /** Adds an object; the caller has made sure no entry for its (tenant, key) is present. */
    void put(final ObjectMeta meta)
    {
        if ((size + 1) * 2 > hashes.length)
        {
            rehash(hashes.length * 2);
        }
        insert(meta.hash, meta);
        size++;
    }

    /** Places an entry by its hash alone (a rehash moves entries without reading their objects, which are cold). */
    private void insert(final long hash, final ObjectMeta meta)
    {
        int i = (int)hash & mask;
        while (hashes[i] != 0)
        {
            i = (i + 1) & mask;
        }
        hashes[i] = hash;
        metas[i] = meta;
    }

    /** Removes exactly this object (by identity). @return whether it was present. */
    boolean remove(final ObjectMeta meta)
    {
        int i = (int)meta.hash & mask;
        while (hashes[i] != 0)
        {
            if (metas[i] == meta)
            {
                removeAt(i);
                if (size * 8 < hashes.length && hashes.length > MIN_CAPACITY)
                {
                    rehash(hashes.length / 2);
                }
                return true;
            }
            i = (i + 1) & mask;
        }
        return false;
    }

    private void removeAt(final int slot)
    {
        int hole = slot;
        int j = slot;
        while (true)
        {
            j = (j + 1) & mask;
            if (hashes[j] == 0)
            {
                break;
            }
            final int home = (int)hashes[j] & mask;
            // The entry at j may move into the hole unless its home lies cyclically in (hole, j].
            final boolean stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
            if (!stays)
            {
                hashes[hole] = hashes[j];
                metas[hole] = metas[j];
                hole = j;
            }
        }
        hashes[hole] = 0;
        metas[hole] = null;
        size--;
    }

    private void rehash(final int capacity)
    {
        final long[] oldHashes = hashes;
        final ObjectMeta[] oldMetas = metas;
        hashes = new long[capacity];
        metas = new ObjectMeta[capacity];
        mask = capacity - 1;
        for (int i = 0; i < oldHashes.length; i++)
        {
            final long hash = oldHashes[i];
            if (hash != 0)
            {
                insert(hash, oldMetas[i]);
            }
        }
    }

    /** Visits every entry; the visitor must not change the index. */
    void forEach(final Consumer<ObjectMeta> visitor)
    {
        for (int i = 0; i < hashes.length; i++)
        {
            if (hashes[i] != 0)
            {
                visitor.accept(metas[i]);
            }
        }
    }

    /** Number of slots; with {@link #at(int)} a way to walk the entries that allows early exit. */
    int capacity()
    {
        return hashes.length;
    }

    /** The object in slot {@code i}, or null when the slot is empty. */
    ObjectMeta at(final int i)
    {
        return metas[i];
    }
}
