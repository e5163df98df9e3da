package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;
import io.granary.proto.PutOptions;
import io.granary.proto.SoftPinAction;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.OBJECT_ALREADY_EXISTS_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Rounds served from the reserve of an earlier scan must take exactly what a full scan would: a random workload of
 * puts, reads (leases), soft pins given and taken off, removes and passing time, with an eviction round every few
 * steps, each round's victims checked against the oldest evictable objects that cover its target, computed from
 * the store's state just before the round (unpinned first, soft-pinned ones only when pass 1 falls short and that is
 * allowed).
 */
class EvictionReserveTest
{
    @ParameterizedTest
    @CsvSource({"1, false, true", "2, true, true", "3, false, true", "4, true, true", "5, false, false",
        "6, true, false"})
    void shouldEvictExactlyWhatAFullScanWouldRoundAfterRound(
        final long seed, final boolean allowSoftPinned, final boolean pins)
    {
        final Random random = new Random(seed);
        final MetadataFixture f = new MetadataFixture(32).mount("node-a", 256L << 20);
        final Evictor evictor = f.evictor(1.0, 0.05, allowSoftPinned);
        final Map<String, Long> sizes = new HashMap<>();
        final List<String> present = new ArrayList<>();
        int next = 0;
        int rounds = 0;
        for (int step = 0; step < 12000; step++)
        {
            f.clock.advance(Duration.ofNanos(1000 + random.nextInt(1000))); // distinct ages
            final int op = random.nextInt(100);
            if (op < 45 || present.size() < 50)
            {
                final String key = "k" + next++;
                final long size = 64L * (1 + random.nextInt(32));
                if (pins && random.nextInt(10) == 0)
                {
                    f.put(key, size, PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_ENABLE)
                        .setSoftPinTtlMs(200 + random.nextInt(3000)).build());
                }
                else
                {
                    f.put(key, size);
                }
                sizes.put(key, size);
                present.add(key);
            }
            else if (op < 70)
            {
                f.store.exists(T, present.get(random.nextInt(present.size())), true); // a read: a lease
            }
            else if (op < 74 && pins)
            {
                final String key = present.get(random.nextInt(present.size()));
                final boolean disable = random.nextBoolean();
                final PutOptions pin = disable ? PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_DISABLE)
                    .build() : PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_ENABLE)
                    .setSoftPinTtlMs(100 + random.nextInt(2000)).build();
                assertThat(f.putCode(T, key, sizes.get(key), pin)).isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
            }
            else if (op < 78)
            {
                final String key = present.remove(random.nextInt(present.size()));
                assertThat(f.store.remove(T, key, true)).isEqualTo(OK_VALUE);
            }
            else if (op < 90)
            {
                // Leases (10 s) and pins run out now and then, sometimes all at once, objects of a reserve among them.
                f.clock.advanceMillis(random.nextInt(50) == 0 ? 10_500 : random.nextInt(400));
                f.store.expireSoftPins(); // as the master's housekeeping does
            }
            else
            {
                final long target = 64L * (1 + random.nextInt(300));
                final Set<String> expected = expectedVictims(f, present, sizes, target, allowSoftPinned);
                evictor.evict(target);
                final Set<String> gone = new HashSet<>();
                present.removeIf(key -> !f.present(key) && gone.add(key));
                assertThat(gone).as("round %d (step %d, target %d bytes)", rounds, step, target)
                    .isEqualTo(expected);
                rounds++;
            }
        }
        assertThat(rounds).isGreaterThan(600);
        assertThat(evictor.reserveRounds()).as("rounds served from a reserve").isGreaterThan(rounds / 4);
    }

    /** The oldest evictable objects covering {@code target}: unpinned ones, then (if allowed) soft-pinned ones. */
    private static Set<String> expectedVictims(
        final MetadataFixture f, final List<String> present, final Map<String, Long> sizes, final long target,
        final boolean allowSoftPinned)
    {
        final List<List<String>> evictable = OldestFirstReference.evictableOldestFirst(f, present);
        final List<String> unpinned = evictable.get(0);
        final List<String> pinned = evictable.get(1);
        final Set<String> victims = new HashSet<>(OldestFirstReference.oldestCovering(unpinned, sizes::get, target));
        long bytes = 0;
        for (final String key : victims)
        {
            bytes += sizes.get(key);
        }
        if (bytes < target && allowSoftPinned)
        {
            victims.addAll(OldestFirstReference.oldestCovering(pinned, sizes::get, target - bytes));
        }
        return victims;
    }
}
