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
    /** True while {@link #bytes} is a caller's array (see {@link #wrap}); appending copies are then refused. */
    private boolean wrapped;

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
            batch.add(key);
        }
        return batch;
    }

    public void clear()
    {
        size = 0;
    }

    /**
     * Starts a batch whose keys are ranges of {@code source} (no copy): add them with
     * {@link #addRange}. The batch reads {@code source} until it is cleared or refilled.
     */
    public void wrap(final byte[] source)
    {
        size = 0;
        bytes = source;
        wrapped = true;
    }

    /** Adds the key at {@code [off, off + len)} of the wrapped array and hashes it. */
    public void addRange(final int off, final int len)
    {
        if (size == offsets.length)
        {
            ensure(size + 1, 0);
        }
        offsets[size] = off;
        lengths[size] = len;
        hashes[size] = KeyBytes.hash(bytes, off, len);
        size++;
    }

    /** Appends a key (copying its bytes) and hashes it. */
    public void add(final byte[] src, final int off, final int len)
    {
        if (wrapped)
        {
            throw new IllegalStateException("cannot append copies to a batch wrapping another array");
        }
        final int at = size == 0 ? 0 : offsets[size - 1] + lengths[size - 1];
        ensure(size + 1, at + len);
        System.arraycopy(src, off, bytes, at, len);
        offsets[size] = at;
        lengths[size] = len;
        hashes[size] = KeyBytes.hash(bytes, at, len);
        size++;
    }

    /** Appends a key given as a String, encoded as UTF-8 straight into the batch (ASCII without a temporary array). */
    public void add(final String key)
    {
        final int n = key.length();
        int ascii = 0;
        while (ascii < n && key.charAt(ascii) < 0x80)
        {
            ascii++;
        }
        if (ascii < n || wrapped)
        {
            final byte[] b = KeyBytes.utf8(key);
            add(b, 0, b.length);
            return;
        }
        final int at = size == 0 ? 0 : offsets[size - 1] + lengths[size - 1];
        ensure(size + 1, at + n);
        for (int i = 0; i < n; i++)
        {
            bytes[at + i] = (byte)key.charAt(i);
        }
        offsets[size] = at;
        lengths[size] = n;
        hashes[size] = KeyBytes.hash(bytes, at, n);
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
