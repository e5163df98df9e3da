package io.granary.client.internal;

import io.granary.client.ReadLease;
import io.granary.common.Clock;
import io.granary.proto.GetReplicaListResponse;

/**
 * A {@link ReadLease} as {@link GranaryClientImpl#probeBatchForRead} makes it: the key, the replica list the probe's
 * answer carried for it (null when the master sent none — an older master, or no replica on a live node), and when
 * the probe was sent, from which the lease is counted (conservative, as {@link ReadOperation} counts it).
 */
final class ProbedLease implements ReadLease
{
    /** At most this much of a lease is kept in hand for the transfer itself. */
    private static final long MAX_MARGIN_NS = 1_000_000_000L;

    final GranaryClientImpl owner;
    final GetReplicaListResponse replicas;
    final long askedAtNs;
    private final String key;
    private final Clock clock;
    /** The clock reading from which a read looks the key up again. */
    private final long usableUntilNs;
    private final boolean everUsable;

    ProbedLease(final GranaryClientImpl owner, final Clock clock, final String key,
        final GetReplicaListResponse replicas, final long askedAtNs)
    {
        this.owner = owner;
        this.clock = clock;
        this.key = key;
        final long ttlMs = replicas == null ? 0 : replicas.getLeaseTtlMs();
        // A list without a lease (TTL 0) or with an absurd one is not reused: a fresh lookup costs one round trip.
        this.everUsable = replicas != null && replicas.getCode() == 0 && replicas.getReplicasCount() > 0 &&
            ttlMs > 0 && ttlMs <= Long.MAX_VALUE / 2_000_000L;
        this.replicas = everUsable ? replicas : null;
        this.askedAtNs = askedAtNs;
        final long ttlNs = everUsable ? ttlMs * 1_000_000L : 0;
        this.usableUntilNs = askedAtNs + ttlNs - Math.min(ttlNs / 2, MAX_MARGIN_NS);
    }

    @Override
    public String key()
    {
        return key;
    }

    @Override
    public long length()
    {
        return replicas == null ? 0 : replicas.getValueLength();
    }

    @Override
    public boolean usable()
    {
        return everUsable && clock.nanoTime() - usableUntilNs < 0;
    }

    @Override
    public String toString()
    {
        return "ReadLease[" + Keys.quote(key) + (everUsable ? ", " + length() + " bytes" : ", no replica list") + "]";
    }
}
