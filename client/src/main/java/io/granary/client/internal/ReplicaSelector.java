package io.granary.client.internal;

import java.util.List;
import java.util.function.Predicate;
import java.util.function.ToIntFunction;

/**
 * Chooses which replica to read next: one on this host first, then the one with the fewest transfers
 * in flight from this client, then the master's order. Asked once per attempt, so a batch spreads its
 * reads and a failover moves to the best replica left. Thread safe (stateless over its inputs).
 */
final class ReplicaSelector
{
    private final Predicate<String> isLocal;
    private final ToIntFunction<String> inFlight;

    ReplicaSelector(final Predicate<String> isLocal, final ToIntFunction<String> inFlight)
    {
        this.isLocal = isLocal;
        this.inFlight = inFlight;
    }

    /** Index in {@code candidates} of the replica to try next; -1 when the list is empty. */
    int pick(final List<ReplicaExtent> candidates)
    {
        int best = -1;
        boolean bestLocal = false;
        int bestLoad = Integer.MAX_VALUE;
        for (int i = 0; i < candidates.size(); i++)
        {
            final String endpoint = candidates.get(i).endpoint();
            final boolean local = isLocal.test(endpoint);
            final int load = inFlight.applyAsInt(endpoint);
            if (best < 0 || (local && !bestLocal) || (local == bestLocal && load < bestLoad))
            {
                best = i;
                bestLocal = local;
                bestLoad = load;
            }
        }
        return best;
    }
}
