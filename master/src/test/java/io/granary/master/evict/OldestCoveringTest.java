package io.granary.master.evict;

import io.granary.master.meta.EvictionCandidate;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The round's selection alone, fed in orders a real scan could produce (random, oldest first, youngest first,
 * sawtooth), against sorting everything: it must keep exactly the oldest candidates that cover the target, oldest
 * first, and never refuse ({@code wants}) one that belongs to them.
 */
class OldestCoveringTest
{
    @ParameterizedTest
    @CsvSource({
        "random, 5000, 0.001", "random, 5000, 0.3", "random, 5000, 0.9", "random, 5000, 2.0",
        "oldest-first, 5000, 0.3", "youngest-first, 5000, 0.3", "youngest-first, 5000, 0.9",
        "sawtooth, 5000, 0.3", "sawtooth, 5000, 0.7", "random, 10, 0.5"})
    void shouldKeepExactlyTheOldestCandidatesThatCoverTheTarget(final String order, final int n, final double share)
    {
        final Random random = new Random(n * 31L + order.hashCode());
        final List<EvictionCandidate> candidates = new ArrayList<>();
        long total = 0;
        for (int i = 0; i < n; i++)
        {
            final long bytes = 64L * (1 + random.nextInt(100));
            candidates.add(new EvictionCandidate("unit-" + i, 0, 1_000_000L * i, bytes, false, 0));
            total += bytes;
        }
        switch (order)
        {
            case "random":
                java.util.Collections.shuffle(candidates, random);
                break;
            case "youngest-first":
                java.util.Collections.reverse(candidates);
                break;
            case "sawtooth": // runs of 700 youngest-first, the runs oldest-first
                for (int from = 0; from < n; from += 700)
                {
                    java.util.Collections.reverse(candidates.subList(from, Math.min(n, from + 700)));
                }
                break;
            default:
                break;
        }
        final long target = (long)(total * share) + 1;

        final Evictor.OldestCovering selection = new Evictor.OldestCovering(target);
        final List<EvictionCandidate> refused = new ArrayList<>();
        for (final EvictionCandidate c : candidates)
        {
            if (selection.wants(c.ageNs()))
            {
                selection.offer(c);
            }
            else
            {
                refused.add(c);
            }
        }
        final List<EvictionCandidate> chosen = selection.inAgeOrder();

        final List<EvictionCandidate> sorted = new ArrayList<>(candidates);
        sorted.sort(Comparator.comparingLong(EvictionCandidate::ageNs));
        final List<EvictionCandidate> expected =
            OldestFirstReference.oldestCovering(sorted, EvictionCandidate::bytes, target);
        assertThat(chosen).containsExactlyElementsOf(expected);
        assertThat(refused).doesNotContainAnyElementsOf(expected);
    }
}
