package io.granary.node.segment;

import io.granary.transfer.natives.NativeMemory;

import java.util.Locale;

/**
 * Whether segment memory is backed by transparent huge pages (node flag {@code --huge-pages}). A segment is touched
 * by the kernel on every socket copy into or out of it and faults in on first write; with 4 KiB pages that is a page
 * walk per 4 KiB and, in a VM, often a nested one. Measured on the development VM
 * (benchmarks/tools/huge_page_probe.c, 6 GiB region): loopback receives of 1 MiB values into random slots ran at
 * 0.69-0.73 GB/s with 4 KiB pages and 2.96 GB/s with huge pages (limit of the run 3.2-3.3 GB/s), the first touch of
 * the region at 0.26-0.30 and 1.77-2.00 GB/s (docs/benchmarks.md, "Huge pages").
 */
public enum HugePages
{
    /** Advise huge pages when the native library is loaded and the kernel has THP on; plain memory otherwise. */
    AUTO,
    /** Advise huge pages or refuse to start, naming why they cannot be had. */
    ON,
    /** Plain memory from the C allocator, as before huge pages existed here. */
    OFF;

    /** Parses a flag value: auto, on or off (case-insensitive). */
    public static HugePages parse(final String value)
    {
        try
        {
            return valueOf(value.trim().toUpperCase(Locale.ROOT));
        }
        catch (final IllegalArgumentException | NullPointerException ex)
        {
            throw new IllegalArgumentException("huge pages must be auto, on or off, was '" + value + "'");
        }
    }

    /** The flag's spelling. */
    public String flagValue()
    {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Why huge pages cannot be advised here, or null when they can (see NativeMemory). */
    public static String unavailabilityCause()
    {
        return NativeMemory.hugePagesUnavailabilityCause();
    }

    /**
     * The mapping for a segment of {@code bytes}, or null when this setting gives plain memory here.
     *
     * @throws IllegalStateException for {@link #ON} when huge pages cannot be had, with the cause.
     */
    NativeMemory.Mapping map(final long bytes)
    {
        if (this == OFF)
        {
            return null;
        }
        final String cause = unavailabilityCause();
        if (cause != null)
        {
            if (this == ON)
            {
                throw new IllegalStateException("--huge-pages on: " + cause);
            }
            return null;
        }
        try
        {
            return NativeMemory.map(bytes, true);
        }
        catch (final IllegalStateException ex)
        {
            if (this == ON)
            {
                throw new IllegalStateException("--huge-pages on: " + ex.getMessage(), ex);
            }
            return null; // AUTO: the C allocator below reports a genuine lack of memory itself
        }
    }
}
