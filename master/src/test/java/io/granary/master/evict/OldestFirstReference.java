package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.function.ToLongFunction;

/** The eviction tests' brute-force reference for "the oldest units that cover a target". */
final class OldestFirstReference
{
    private OldestFirstReference()
    {
    }

    /**
     * The keys of {@code keys} a round may evict now (present, not leased), as two lists oldest first: unpinned (pass
     * 1) and soft-pinned (pass 2).
     */
    static List<List<String>> evictableOldestFirst(final MetadataFixture f, final Collection<String> keys)
    {
        final List<String> unpinned = new ArrayList<>();
        final List<String> pinned = new ArrayList<>();
        for (final String key : keys)
        {
            if (f.present(key) && !f.leased(key))
            {
                (f.softPinned(key) ? pinned : unpinned).add(key);
            }
        }
        final Comparator<String> byAge = Comparator.comparingLong(f::leaseDeadline);
        unpinned.sort(byAge);
        pinned.sort(byAge);
        return List.of(unpinned, pinned);
    }

    /**
     * The shortest prefix of {@code oldestFirst} whose sizes add up to at least {@code targetBytes} (all of it when
     * they do not).
     */
    static <T> List<T> oldestCovering(
        final List<T> oldestFirst, final ToLongFunction<T> bytesOf, final long targetBytes)
    {
        final List<T> chosen = new ArrayList<>();
        long bytes = 0;
        for (final T unit : oldestFirst)
        {
            if (bytes >= targetBytes)
            {
                break;
            }
            chosen.add(unit);
            bytes += bytesOf.applyAsLong(unit);
        }
        return chosen;
    }
}
