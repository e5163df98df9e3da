package io.granary.transfer.natives;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Memory mapped by the native library for storage-node segments: anonymous, zeroed, starting on a 2 MiB boundary,
 * its length rounded up to 2 MiB, and, when asked, advised to be backed by transparent huge pages (THP). Every
 * socket copy into or out of a segment walks the page tables of the bytes it touches, and the first write of each
 * page faults; huge pages make both 512 times rarer. Plus the two Linux facts an operator needs to see whether it
 * worked: the kernel's THP mode and how much of a range is backed by huge pages now.
 */
public final class NativeMemory
{
    /** The x86-64 transparent huge page size, and the alignment and length granularity of every mapping. */
    public static final long HUGE_PAGE_BYTES = 2L << 20;

    static final Path THP_ENABLED = Paths.get("/sys/kernel/mm/transparent_hugepage/enabled");
    private static final Path SMAPS = Paths.get("/proc/self/smaps");
    private static final Pattern MODE = Pattern.compile("\\[(\\w+)]");

    private NativeMemory()
    {
    }

    /** One mapping: its address, its length (a multiple of {@link #HUGE_PAGE_BYTES}), and whether THP was advised. */
    public record Mapping(long address, long length, boolean hugePagesAdvised)
    {
    }

    /**
     * Maps {@code length} bytes (rounded up to {@link #HUGE_PAGE_BYTES}).
     *
     * @param hugePages advise MADV_HUGEPAGE over the whole mapping.
     * @throws IllegalArgumentException for a non-positive length or one above 1 TiB.
     * @throws IllegalStateException    when mmap fails or the kernel refuses the advice (nothing stays mapped).
     * @throws UnsatisfiedLinkError     when the native library is not available.
     */
    public static Mapping map(final long length, final boolean hugePages)
    {
        if (length <= 0)
        {
            throw new IllegalArgumentException("mapping length must be positive, was " + length);
        }
        NativeTransfer.ensureAvailability();
        final long address = NativeTransferJni.memoryMap(length, hugePages);
        return new Mapping(address, roundUp(length), hugePages);
    }

    /**
     * A direct buffer over the first {@code capacity} bytes of a mapping (at most its length and 2^31 - 1). It does
     * not own the memory: it must not be used once the mapping is unmapped.
     */
    public static ByteBuffer buffer(final Mapping mapping, final int capacity)
    {
        if (capacity <= 0 || capacity > mapping.length())
        {
            throw new IllegalArgumentException("a buffer of " + capacity + " bytes does not fit " + mapping);
        }
        return NativeTransferJni.memoryBuffer(mapping.address(), capacity);
    }

    /** Unmaps a mapping of {@link #map}; the caller guarantees nothing touches its memory any more. */
    public static void unmap(final Mapping mapping)
    {
        final int result = NativeTransferJni.memoryUnmap(mapping.address(), mapping.length());
        if (result != 0)
        {
            throw new IllegalStateException("munmap of " + mapping + " refused (code " + result + ")");
        }
    }

    /** {@code length} rounded up to a multiple of {@link #HUGE_PAGE_BYTES}. */
    public static long roundUp(final long length)
    {
        return (length + HUGE_PAGE_BYTES - 1) & -HUGE_PAGE_BYTES;
    }

    /**
     * Why memory advised huge pages would not get them here (no native library, THP not in the kernel or set to
     * never), or null when it would.
     */
    public static String hugePagesUnavailabilityCause()
    {
        return hugePagesUnavailabilityCause(NativeTransfer.isAvailable() ? null :
            String.valueOf(NativeTransfer.unavailabilityCause()), transparentHugePageMode());
    }

    /** {@link #hugePagesUnavailabilityCause()} for a library failure (or null) and a THP mode (or null). */
    public static String hugePagesUnavailabilityCause(final String libraryCause, final String thpMode)
    {
        if (libraryCause != null)
        {
            return "the native transfer library is not available (" + libraryCause + ")";
        }
        if (thpMode == null)
        {
            return "the kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled unreadable)";
        }
        if (thpMode.equals("never"))
        {
            return "transparent huge pages are off in the kernel (/sys/kernel/mm/transparent_hugepage/enabled is "
                + "'never'; set it to 'madvise')";
        }
        return null;
    }

    /**
     * The kernel's transparent-huge-page mode ({@code always}, {@code madvise} or {@code never}: the bracketed word
     * of /sys/kernel/mm/transparent_hugepage/enabled), or null when the file cannot be read (no THP in the kernel).
     */
    public static String transparentHugePageMode()
    {
        return transparentHugePageMode(THP_ENABLED);
    }

    static String transparentHugePageMode(final Path file)
    {
        try
        {
            final Matcher matcher = MODE.matcher(Files.readString(file, StandardCharsets.US_ASCII));
            return matcher.find() ? matcher.group(1) : null;
        }
        catch (final IOException | RuntimeException ex)
        {
            return null;
        }
    }

    /**
     * Bytes the kernel backs with huge pages now in the mappings of this process that overlap
     * {@code [address, address + length)} (the {@code AnonHugePages} of /proc/self/smaps), at most {@code length}; 0
     * when smaps cannot be read. A mapping the kernel merged with a neighbour counts whole (it cannot be apportioned),
     * hence the cap. Reads the whole smaps file: for logs, admin pages and metric scrapes, not for a data path.
     */
    public static long hugePageBytes(final long address, final long length)
    {
        return hugePageBytes(SMAPS, new long[] {address}, new long[] {length})[0];
    }

    /**
     * {@link #hugePageBytes(long, long)} of every range {@code [addresses[i], addresses[i] + lengths[i])} from one
     * read of /proc/self/smaps (a node's segments at a scrape); all 0 when smaps cannot be read.
     */
    public static long[] hugePageBytes(final long[] addresses, final long[] lengths)
    {
        return hugePageBytes(SMAPS, addresses, lengths);
    }

    static long hugePageBytes(final Path smaps, final long address, final long length)
    {
        return hugePageBytes(smaps, new long[] {address}, new long[] {length})[0];
    }

    static long[] hugePageBytes(final Path smaps, final long[] addresses, final long[] lengths)
    {
        final int n = addresses.length;
        final long[] totals = new long[n];
        final boolean[] overlapping = new boolean[n];
        boolean any = false;
        try (BufferedReader reader = Files.newBufferedReader(smaps, StandardCharsets.US_ASCII))
        {
            String line;
            while ((line = reader.readLine()) != null)
            {
                final int dash = line.indexOf('-');
                final int space = line.indexOf(' ');
                if (dash > 0 && space > dash && isHex(line, 0, dash) && isHex(line, dash + 1, space))
                {
                    final long start = Long.parseUnsignedLong(line, 0, dash, 16);
                    final long stop = Long.parseUnsignedLong(line, dash + 1, space, 16);
                    any = false;
                    for (int i = 0; i < n; i++)
                    {
                        overlapping[i] = Long.compareUnsigned(start, addresses[i] + lengths[i]) < 0 &&
                            Long.compareUnsigned(addresses[i], stop) < 0;
                        any |= overlapping[i];
                    }
                }
                else if (any && line.startsWith("AnonHugePages:"))
                {
                    final long bytes = kibibytes(line) * 1024;
                    for (int i = 0; i < n; i++)
                    {
                        totals[i] += overlapping[i] ? bytes : 0;
                    }
                }
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            return new long[n];
        }
        for (int i = 0; i < n; i++)
        {
            totals[i] = Math.min(totals[i], lengths[i]);
        }
        return totals;
    }

    private static boolean isHex(final String line, final int from, final int to)
    {
        for (int i = from; i < to; i++)
        {
            if (Character.digit(line.charAt(i), 16) < 0)
            {
                return false;
            }
        }
        return to > from;
    }

    private static long kibibytes(final String line)
    {
        long value = 0;
        for (int i = "AnonHugePages:".length(); i < line.length(); i++)
        {
            final char c = line.charAt(i);
            if (c >= '0' && c <= '9')
            {
                value = value * 10 + (c - '0');
            }
            else if (c == 'k')
            {
                break;
            }
        }
        return value;
    }
}
