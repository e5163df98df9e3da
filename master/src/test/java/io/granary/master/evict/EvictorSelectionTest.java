package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;
import io.granary.proto.PutOptions;
import io.granary.proto.SoftPinAction;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static io.granary.master.meta.MetadataFixture.T;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A round's choice against a brute-force reference over thousands of objects, enough for the selection to cut its
 * buffer many times while the scan meets ages in random order: the evicted set must be exactly the oldest evictable
 * objects whose sizes cover the target, pass 1 (unpinned) before pass 2 (soft-pinned).
 */
class EvictorSelectionTest
{
    private static final int OBJECTS = 6000;

    @ParameterizedTest
    @CsvSource({"1, 0.0001", "7, 0.33", "424242, 0.33", "11, 0.8", "12, 0.97"})
    void shouldEvictExactlyTheOldestObjectsThatCoverTheTargetWhateverTheScanOrder(final long seed, final double share)
    {
        final Random random = new Random(seed);
        final MetadataFixture f = new MetadataFixture(64).mount("node-a", 64L << 20);
        final Evictor evictor = f.evictor(1.0, 0.05, true);
        final List<String> keys = new ArrayList<>();
        final Set<String> softPinned = new HashSet<>();
        final Set<String> leasedAtTheEnd = new HashSet<>();
        final Map<String, Long> sizes = new HashMap<>();
        for (int i = 0; i < OBJECTS; i++)
        {
            final String key = "k" + i;
            final long size = 64L * (1 + random.nextInt(64));
            if (random.nextInt(10) == 0)
            {
                f.put(key, size, PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_ENABLE)
                    .setSoftPinTtlMs(Duration.ofHours(1).toMillis()).build());
                softPinned.add(key);
            }
            else
            {
                f.put(key, size);
            }
            keys.add(key);
            sizes.put(key, size);
            f.clock.advanceMillis(1);
        }
        // Read a random half in random order: their age becomes their (later) lease deadline.
        final List<String> reads = new ArrayList<>(keys);
        Collections.shuffle(reads, random);
        for (final String key : reads.subList(0, OBJECTS / 2))
        {
            f.store.exists(T, key, true);
            f.clock.advanceMillis(1);
        }
        f.clock.advance(Duration.ofSeconds(11)); // every lease expired
        for (final String key : reads.subList(0, OBJECTS / 20))
        {
            f.store.exists(T, key, true); // ... but these are leased again: never evicted
            leasedAtTheEnd.add(key);
        }

        final List<List<String>> evictable = OldestFirstReference.evictableOldestFirst(f, keys);
        final List<String> unpinned = evictable.get(0);
        final List<String> pinned = evictable.get(1);
        assertThat(pinned).hasSameSizeAs(softPinned.stream().filter(k -> !leasedAtTheEnd.contains(k)).toList());
        long unpinnedBytes = 0;
        for (final String key : unpinned)
        {
            unpinnedBytes += sizes.get(key);
        }
        // First a share of the unpinned bytes (pass 1 alone), then a target beyond every unpinned byte: pass 1 takes
        // the rest of them, pass 2 the oldest soft-pinned ones.
        final long target = (long)(unpinnedBytes * share) + 1;
        final long beyond = unpinnedBytes + 10_000;
        final Set<String> expectedFirst = oldestCovering(sizes, unpinned, target);

        final Evictor.Result first = evictor.evict(target);

        assertThat(evicted(f, keys)).isEqualTo(expectedFirst);
        assertThat(first.bytes[0]).isGreaterThanOrEqualTo(target);
        assertThat(first.bytes[1]).isZero();

        final List<String> restUnpinned = new ArrayList<>(unpinned);
        restUnpinned.removeAll(expectedFirst);
        final long restBytes = unpinnedBytes - first.bytes[0];
        final Set<String> expectedSecond = new HashSet<>(expectedFirst);
        expectedSecond.addAll(restUnpinned);
        expectedSecond.addAll(oldestCovering(sizes, pinned, beyond - first.bytes[0] - restBytes));

        final Evictor.Result second = evictor.evict(beyond - first.bytes[0]);

        assertThat(evicted(f, keys)).isEqualTo(expectedSecond);
        assertThat(second.bytes[0]).isEqualTo(restBytes);
        assertThat(leasedAtTheEnd).allMatch(f::present);
    }

    private static Set<String> oldestCovering(
        final Map<String, Long> sizes, final List<String> byAge, final long target)
    {
        return new HashSet<>(OldestFirstReference.oldestCovering(byAge, sizes::get, target));
    }

    private static Set<String> evicted(final MetadataFixture f, final List<String> keys)
    {
        final Set<String> gone = new HashSet<>();
        for (final String key : keys)
        {
            if (!f.present(key))
            {
                gone.add(key);
            }
        }
        return gone;
    }
}
