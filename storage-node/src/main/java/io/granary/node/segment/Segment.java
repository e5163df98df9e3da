package io.granary.node.segment;

import io.granary.transfer.natives.NativeMemory;
import org.agrona.UnsafeApi;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;

/**
 * One off-heap, page-aligned memory region (2 MiB aligned and backed by transparent huge pages where
 * {@link HugePages} says so) that clients write into and read from through the
 * transfer server; its size may exceed 2 GiB, so addresses and offsets are longs. The memory is
 * read and written concurrently by transfer threads (the master keeps extents apart); {@link #close()}
 * frees it once and must only run when no transfer thread can touch it any more.
 */
public final class Segment implements AutoCloseable
{
    public static final int PAGE_SIZE_BYTES = 4096;

    private volatile int id;
    private final String name;
    private final long sizeBytes;
    private final long rawAddress;
    private final long address;
    private final NativeMemory.Mapping mapping;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final SegmentLedger ledger = new SegmentLedger(this);

    /**
     * Allocates {@code sizeBytes} (rounded up to the page size) of native memory from the C allocator.
     *
     * @throws IllegalArgumentException for a non-positive size or a zero id.
     * @throws OutOfMemoryError when the memory cannot be allocated.
     */
    public Segment(final int id, final String name, final long sizeBytes)
    {
        this(id, name, sizeBytes, HugePages.OFF);
    }

    /**
     * Allocates {@code sizeBytes} (rounded up to the page size) of native memory, mapped with huge pages advised as
     * {@code hugePages} says (then 2 MiB aligned), else from the C allocator.
     *
     * @throws IllegalArgumentException for a non-positive size or a zero id.
     * @throws IllegalStateException    for {@link HugePages#ON} when huge pages cannot be had.
     * @throws OutOfMemoryError         when the memory cannot be allocated.
     */
    public Segment(final int id, final String name, final long sizeBytes, final HugePages hugePages)
    {
        if (id == 0)
        {
            throw new IllegalArgumentException("segment id 0 is reserved");
        }
        if (sizeBytes <= 0 || sizeBytes > Long.MAX_VALUE - 2 * PAGE_SIZE_BYTES)
        {
            throw new IllegalArgumentException("segment size must be positive, was " + sizeBytes);
        }
        this.id = id;
        this.name = name;
        this.sizeBytes = alignToPage(sizeBytes);
        this.mapping = hugePages.map(this.sizeBytes);
        if (mapping != null)
        {
            this.rawAddress = mapping.address();
            this.address = mapping.address();
        }
        else
        {
            this.rawAddress = allocate(this.sizeBytes + PAGE_SIZE_BYTES);
            this.address = (rawAddress + PAGE_SIZE_BYTES - 1) & -PAGE_SIZE_BYTES;
        }
    }

    /** Rounds {@code bytes} up to a multiple of {@link #PAGE_SIZE_BYTES}. */
    public static long alignToPage(final long bytes)
    {
        return (bytes + PAGE_SIZE_BYTES - 1) & -PAGE_SIZE_BYTES;
    }

    private static long allocate(final long bytes)
    {
        try
        {
            return UnsafeApi.allocateMemory(bytes);
        }
        catch (final IllegalAccessError | ExceptionInInitializerError | NoClassDefFoundError ex)
        {
            throw new IllegalStateException(
                "off-heap segments need the JVM flag --add-opens java.base/jdk.internal.misc=ALL-UNNAMED", ex);
        }
    }

    /**
     * Node-local id carried in transfer frames; nonzero, random per process start and changed again each time
     * the node registers with a master that had forgotten it (see {@link SegmentRegistry#rekey}).
     */
    public int id()
    {
        return id;
    }

    /** Called by {@link SegmentLedger#rekey} only, under the ledger's monitor. */
    void setId(final int newId)
    {
        if (newId == 0)
        {
            throw new IllegalArgumentException("segment id 0 is reserved");
        }
        id = newId;
    }

    /** The complete extents this segment holds. */
    public SegmentLedger ledger()
    {
        return ledger;
    }

    /** Cluster-unique name, "&lt;node name&gt;/seg&lt;i&gt;". */
    public String name()
    {
        return name;
    }

    /** Base address, aligned to {@link #PAGE_SIZE_BYTES}. */
    public long address()
    {
        return address;
    }

    public long sizeBytes()
    {
        return sizeBytes;
    }

    /** True when the memory was mapped with transparent huge pages advised (see {@link HugePages}). */
    public boolean hugePagesAdvised()
    {
        return mapping != null;
    }

    /**
     * Bytes of this segment the kernel backs with huge pages now (from /proc/self/smaps; 0 for plain memory or where
     * smaps cannot be read). Reads smaps: for logs, admin pages and scrapes only.
     */
    public long hugePageBytes()
    {
        return hugePageBytes(List.of(this))[0];
    }

    /** {@link #hugePageBytes()} of each segment, from one read of /proc/self/smaps. */
    public static long[] hugePageBytes(final List<Segment> segments)
    {
        final int[] mapped = IntStream.range(0, segments.size())
            .filter(i -> segments.get(i).mapping != null && !segments.get(i).isClosed()).toArray();
        final long[] backed = NativeMemory.hugePageBytes(
            Arrays.stream(mapped).mapToLong(i -> segments.get(i).address).toArray(),
            Arrays.stream(mapped).mapToLong(i -> segments.get(i).sizeBytes).toArray());
        final long[] all = new long[segments.size()];
        for (int k = 0; k < mapped.length; k++)
        {
            all[mapped[k]] = backed[k];
        }
        return all;
    }

    /** True when [offset, offset + length) lies inside the segment; never overflows. */
    public boolean contains(final long offset, final long length)
    {
        return offset >= 0 && length >= 0 && offset <= sizeBytes && length <= sizeBytes - offset;
    }

    /** Touches every page so that the memory is committed now rather than on first use. */
    public void preTouch()
    {
        for (long offset = 0; offset < sizeBytes; offset += PAGE_SIZE_BYTES)
        {
            UnsafeApi.putByte(address + offset, (byte)0);
        }
    }

    public boolean isClosed()
    {
        return closed.get();
    }

    /** Frees the memory; idempotent. */
    @Override
    public void close()
    {
        if (closed.compareAndSet(false, true))
        {
            if (mapping != null)
            {
                NativeMemory.unmap(mapping);
            }
            else
            {
                UnsafeApi.freeMemory(rawAddress);
            }
        }
    }

    @Override
    public String toString()
    {
        return "Segment{id=" + Integer.toUnsignedString(id) + ", name=" + name + ", sizeBytes=" + sizeBytes + '}';
    }
}
