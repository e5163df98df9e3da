package io.granary.master.meta;

import java.util.List;

/**
 * The keys of one batch call as the store reads them: all key bytes back to back, with each key's
 * offset, length and hash. Built from Strings (gRPC) or straight from a lookup frame. Not thread safe.
 */
public final class KeyBatch
{
    byte[] bytes;
    int[] offsets;
    int[] lengths;
    long[] hashes;
    int size;

    public KeyBatch(final int capacity, final int byteCapacity)
    {
        bytes = new byte[Math.max(16, byteCapacity)];
        offsets = new int[Math.max(1, capacity)];
        lengths = new int[Math.max(1, capacity)];
        hashes = new long[Math.max(1, capacity)];
    }

    public static KeyBatch of(final List<String> keys)
    {
        final KeyBatch batch = new KeyBatch(keys.size(), keys.size() * 24);
        for (final String key : keys)
        {
            final byte[] b = KeyBytes.utf8(key);
            batch.add(b, 0, b.length);
        }
        return batch;
    }

    public void clear()
    {
        size = 0;
    }

    /** Appends a key (copying its bytes) and hashes it. */
    public void add(final byte[] src, final int off, final int len)
    {
        final int at = size == 0 ? 0 : offsets[size - 1] + lengths[size - 1];
        ensure(size + 1, at + len);
        System.arraycopy(src, off, bytes, at, len);
        offsets[size] = at;
        lengths[size] = len;
        hashes[size] = KeyBytes.hash(bytes, at, len);
        size++;
    }

    /** Reserves room for a key of {@code len} bytes and returns its offset in {@link #bytes()}; finish with {@link #commit}. */
    public int reserve(final int len)
    {
        final int at = size == 0 ? 0 : offsets[size - 1] + lengths[size - 1];
        ensure(size + 1, at + len);
        return at;
    }

    /** Completes a key whose bytes were written at the offset {@link #reserve} gave. */
    public void commit(final int at, final int len)
    {
        offsets[size] = at;
        lengths[size] = len;
        hashes[size] = KeyBytes.hash(bytes, at, len);
        size++;
    }

    private void ensure(final int keys, final int byteCount)
    {
        if (keys > offsets.length)
        {
            final int n = Math.max(keys, offsets.length * 2);
            offsets = java.util.Arrays.copyOf(offsets, n);
            lengths = java.util.Arrays.copyOf(lengths, n);
            hashes = java.util.Arrays.copyOf(hashes, n);
        }
        if (byteCount > bytes.length)
        {
            bytes = java.util.Arrays.copyOf(bytes, Math.max(byteCount, bytes.length * 2));
        }
    }

    public int size()
    {
        return size;
    }

    public byte[] bytes()
    {
        return bytes;
    }

    public int offset(final int i)
    {
        return offsets[i];
    }

    public int length(final int i)
    {
        return lengths[i];
    }

    public long hash(final int i)
    {
        return hashes[i];
    }

    /** Key {@code i} as a String (for messages and listeners only). */
    public String key(final int i)
    {
        return new String(bytes, offsets[i], lengths[i], java.nio.charset.StandardCharsets.UTF_8);
    }
}
