package io.granary.client;

import io.granary.protocol.Limits;

import java.time.Duration;
import java.util.Objects;

/**
 * How a put places and protects an object: replica count, soft pin, hard pin, eviction group,
 * parent and preferred segment. Immutable. Only obvious mistakes are refused here; the master decides the
 * rest (e.g. a TTL with {@link SoftPinAction#PRESERVE} is its INVALID_PARAMS).
 */
public final class PutOptions
{
    public static final int DEFAULT_REPLICAS = 1;

    private static final PutOptions DEFAULTS = new Builder().build();

    private final int replicas;
    private final SoftPinAction softPinAction;
    private final Duration softPinTtl;
    private final boolean hardPin;
    private final String groupId;
    private final String preferredSegment;
    private final String parent;

    private PutOptions(final Builder b)
    {
        this.replicas = b.replicas;
        this.softPinAction = b.softPinAction;
        this.softPinTtl = b.softPinTtl;
        this.hardPin = b.hardPin;
        this.groupId = b.groupId;
        this.preferredSegment = b.preferredSegment;
        this.parent = b.parent;
    }

    /** One replica, soft pin PRESERVE, no hard pin, no group, any segment. */
    public static PutOptions defaults()
    {
        return DEFAULTS;
    }

    public static Builder builder()
    {
        return new Builder();
    }

    public Builder toBuilder()
    {
        final Builder b = new Builder();
        b.replicas = replicas;
        b.softPinAction = softPinAction;
        b.softPinTtl = softPinTtl;
        b.hardPin = hardPin;
        b.groupId = groupId;
        b.preferredSegment = preferredSegment;
        b.parent = parent;
        return b;
    }

    /** Copies on distinct segments, 1..{@link Limits#MAX_REPLICAS}. */
    public int replicas()
    {
        return replicas;
    }

    public SoftPinAction softPinAction()
    {
        return softPinAction;
    }

    /** The soft-pin TTL, or null for none (the master's default with ENABLE). */
    public Duration softPinTtl()
    {
        return softPinTtl;
    }

    public boolean hardPin()
    {
        return hardPin;
    }

    /** Eviction group id, or null for none. */
    public String groupId()
    {
        return groupId;
    }

    /** Segment name to try first, or null for any. */
    public String preferredSegment()
    {
        return preferredSegment;
    }

    /** Key of the object this one continues (e.g. the previous KV block of a prefix), or null for none. */
    public String parent()
    {
        return parent;
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof PutOptions))
        {
            return false;
        }
        final PutOptions other = (PutOptions)o;
        return replicas == other.replicas && softPinAction == other.softPinAction &&
            Objects.equals(softPinTtl, other.softPinTtl) && hardPin == other.hardPin &&
            Objects.equals(groupId, other.groupId) && Objects.equals(preferredSegment, other.preferredSegment) &&
            Objects.equals(parent, other.parent);
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(replicas, softPinAction, softPinTtl, hardPin, groupId, preferredSegment, parent);
    }

    @Override
    public String toString()
    {
        return "PutOptions[replicas=" + replicas + ", softPin=" + softPinAction +
            (softPinTtl == null ? "" : " ttl=" + softPinTtl) + ", hardPin=" + hardPin +
            (groupId == null ? "" : ", group=" + groupId) +
            (preferredSegment == null ? "" : ", preferredSegment=" + preferredSegment) +
            (parent == null ? "" : ", parent=" + parent) + "]";
    }

    /** Fluent builder; {@link #build()} validates. Not thread safe. */
    public static final class Builder
    {
        private int replicas = DEFAULT_REPLICAS;
        private SoftPinAction softPinAction = SoftPinAction.PRESERVE;
        private Duration softPinTtl;
        private boolean hardPin;
        private String groupId;
        private String preferredSegment;
        private String parent;

        private Builder()
        {
        }

        public Builder replicas(final int replicas)
        {
            this.replicas = replicas;
            return this;
        }

        /** @param ttlOrNull how long the pin lasts from the moment the object becomes readable; null for none. */
        public Builder softPin(final SoftPinAction action, final Duration ttlOrNull)
        {
            this.softPinAction = Objects.requireNonNull(action, "action");
            this.softPinTtl = ttlOrNull;
            return this;
        }

        public Builder hardPin(final boolean hardPin)
        {
            this.hardPin = hardPin;
            return this;
        }

        /** Eviction group; null or empty for none. */
        public Builder groupId(final String groupId)
        {
            this.groupId = groupId == null || groupId.isEmpty() ? null : groupId;
            return this;
        }

        /** Segment name to try first; null or empty for any. */
        public Builder preferredSegment(final String preferredSegment)
        {
            this.preferredSegment = preferredSegment == null || preferredSegment.isEmpty() ? null : preferredSegment;
            return this;
        }

        /**
         * The key (same tenant) of the object this one continues: for a KV block, the same page of the previous block
         * of its prefix. With {@code --eviction-policy prefix-leaf-first} the master never evicts the parent while
         * this object remains. A parent that does not exist is no error. Null or empty for none.
         */
        public Builder parent(final String parentKey)
        {
            this.parent = parentKey == null || parentKey.isEmpty() ? null : parentKey;
            return this;
        }

        /** @throws IllegalArgumentException naming the bad setting. */
        public PutOptions build()
        {
            if (replicas < 1 || replicas > Limits.MAX_REPLICAS)
            {
                throw new IllegalArgumentException(
                    "replicas must be in 1.." + Limits.MAX_REPLICAS + ", was " + replicas);
            }
            if (softPinTtl != null)
            {
                if (softPinTtl.isNegative())
                {
                    throw new IllegalArgumentException("softPin ttl must not be negative, was " + softPinTtl);
                }
                try
                {
                    softPinTtl.toMillis();
                }
                catch (final ArithmeticException ex)
                {
                    throw new IllegalArgumentException("softPin ttl out of range: " + softPinTtl);
                }
            }
            return new PutOptions(this);
        }
    }
}
