package io.granary.client;

import io.granary.transfer.natives.NativeMemory;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Direct memory for an engine's host-side KV pages, backed by transparent huge pages where the native library loads
 * and the kernel's THP mode is {@code madvise} or {@code always}: the memory {@code getInto} and
 * {@code getBatchInto} land in and puts are sent from. Every socket copy into a buffer walks the page tables of the
 * bytes it touches; in a large pool of 4 KiB pages that walk is paid per 4 KiB (on the development VM, receives of
 * 1 MiB values into random slots of a 1 GiB region ran at 1.31 GB/s with 4 KiB pages and 2.90 GB/s with huge pages;
 * docs/benchmarks.md, "Huge pages"). Elsewhere it is a plain direct buffer ({@link #hugePagesAdvised()} false,
 * {@link #plainReason()} says why).
 *
 * <p>The memory is the caller's to manage: {@link #close()} frees it at once (a huge-page mapping is unmapped), so
 * neither {@link #buffer()} nor any view of it may be used afterwards, and no transfer into or out of it may be in
 * flight (unregister it first if it was registered with {@link GranaryClient#registerBuffer}). A plain buffer is
 * left to the garbage collector. Thread safe.
 */
public final class HostBuffer implements AutoCloseable
{
    private final NativeMemory.Mapping mapping;
    private final ByteBuffer buffer;
    private final String plainReason;
    private final AtomicBoolean closed = new AtomicBoolean();

    private HostBuffer(final NativeMemory.Mapping mapping, final ByteBuffer buffer, final String plainReason)
    {
        this.mapping = mapping;
        this.buffer = buffer;
        this.plainReason = plainReason;
    }

    /**
     * Allocates {@code capacity} bytes of zeroed direct memory, on huge pages where they can be had.
     *
     * @throws IllegalArgumentException for a capacity below 1.
     * @throws OutOfMemoryError         when the memory cannot be had at all.
     */
    public static HostBuffer allocate(final int capacity)
    {
        return allocate(capacity, true);
    }

    /**
     * {@link #allocate(int)}, or with {@code hugePages} false always a plain direct buffer (to compare, or where the
     * memory must be swappable in 4 KiB pieces).
     */
    public static HostBuffer allocate(final int capacity, final boolean hugePages)
    {
        if (capacity < 1)
        {
            throw new IllegalArgumentException("a host buffer needs at least one byte, was " + capacity);
        }
        final String reason = !hugePages ? "huge pages not asked for" : NativeMemory.hugePagesUnavailabilityCause();
        if (reason == null)
        {
            try
            {
                final NativeMemory.Mapping mapping = NativeMemory.map(capacity, true);
                try
                {
                    return new HostBuffer(mapping, NativeMemory.buffer(mapping, capacity), null);
                }
                catch (final RuntimeException | Error ex)
                {
                    NativeMemory.unmap(mapping);
                    throw ex;
                }
            }
            catch (final IllegalStateException ex)
            {
                return new HostBuffer(null, ByteBuffer.allocateDirect(capacity), ex.getMessage());
            }
        }
        return new HostBuffer(null, ByteBuffer.allocateDirect(capacity), reason);
    }

    /**
     * The whole memory as a direct buffer (a fresh duplicate: position 0, limit = capacity, the caller's to move).
     *
     * @throws IllegalStateException once closed.
     */
    public ByteBuffer buffer()
    {
        if (closed.get())
        {
            throw new IllegalStateException("the host buffer is closed");
        }
        return buffer.duplicate();
    }

    public int capacity()
    {
        return buffer.capacity();
    }

    /** True when the memory is a mapping advised to be backed by transparent huge pages. */
    public boolean hugePagesAdvised()
    {
        return mapping != null;
    }

    /** Why the memory is a plain direct buffer, or null when huge pages were advised. */
    public String plainReason()
    {
        return plainReason;
    }

    /** Bytes backed by huge pages now (from /proc/self/smaps; 0 for a plain buffer). Not for a data path. */
    public long hugePageBytes()
    {
        return mapping == null || closed.get() ? 0 : NativeMemory.hugePageBytes(mapping.address(), mapping.length());
    }

    /** Frees the memory (idempotent); nothing may use it afterwards. */
    @Override
    public void close()
    {
        if (closed.compareAndSet(false, true) && mapping != null)
        {
            NativeMemory.unmap(mapping);
        }
    }

    @Override
    public String toString()
    {
        return "HostBuffer{capacity=" + capacity() + (mapping != null ? ", huge pages advised" :
            ", plain (" + plainReason + ")") + (closed.get() ? ", closed" : "") + '}';
    }
}
