package io.granary.client;

import java.util.Objects;

/**
 * Which keys a {@link GranaryClient#probeBatch} leases (DESIGN "BatchProbeKey"). The candidate size
 * is not checked here: the master refuses a bad one (not positive, or not dividing the key count)
 * with {@link ErrorCode#INVALID_PARAMS} and grants no lease. Immutable.
 */
public final class LeasePolicy
{
    /** The lease-selection modes; see DESIGN for the exact semantics. */
    public enum Mode
    {
        /** Per-key existence; no lease is granted or extended. */
        NONE,
        /** Lease every member of the last complete candidate; the mask marks only it. */
        LAST_HIT_ONLY,
        /** Lease and mark every member of the longest run of complete candidates from the first. */
        LONGEST_PREFIX,
        /** The same run, but only its last candidate is leased and marked. */
        LONGEST_PREFIX_LAST_ONLY
    }

    private static final LeasePolicy NONE = new LeasePolicy(Mode.NONE, 0);

    private final Mode mode;
    private final int candidateSize;

    private LeasePolicy(final Mode mode, final int candidateSize)
    {
        this.mode = mode;
        this.candidateSize = candidateSize;
    }

    public static LeasePolicy none()
    {
        return NONE;
    }

    public static LeasePolicy lastHitOnly(final int candidateSize)
    {
        return new LeasePolicy(Mode.LAST_HIT_ONLY, candidateSize);
    }

    public static LeasePolicy longestPrefix(final int candidateSize)
    {
        return new LeasePolicy(Mode.LONGEST_PREFIX, candidateSize);
    }

    public static LeasePolicy longestPrefixLastOnly(final int candidateSize)
    {
        return new LeasePolicy(Mode.LONGEST_PREFIX_LAST_ONLY, candidateSize);
    }

    public Mode mode()
    {
        return mode;
    }

    /** Keys per candidate (0 for {@link Mode#NONE}); sent as an unsigned 32-bit number. */
    public int candidateSize()
    {
        return candidateSize;
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof LeasePolicy))
        {
            return false;
        }
        final LeasePolicy other = (LeasePolicy)o;
        return mode == other.mode && candidateSize == other.candidateSize;
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(mode, candidateSize);
    }

    @Override
    public String toString()
    {
        return mode == Mode.NONE ? "LeasePolicy[NONE]" : "LeasePolicy[" + mode + " n=" + candidateSize + "]";
    }
}
