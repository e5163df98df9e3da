package io.granary.master.evict;

import java.util.Locale;

/** How the evictor orders what it takes; chosen with {@code --eviction-policy}. */
public enum EvictionPolicy
{
    /** Exactly oldest lease first, over every evictable unit (Mooncake's order). */
    OLDEST_LEASE("oldest-lease"),
    /**
     * Prefix-aware: oldest lease first among units that no live object names as its parent (leaves), so a KV block
     * is never evicted while a later block of its chain remains; a leaf's parent becomes a candidate the moment its
     * last child goes. An unpinned unit whose descendants are soft pinned is kept as long as they are (it goes in
     * the second pass). Only when the leaves cannot free enough does the round fall back to oldest lease first over
     * the rest. Units without parent links are leaves, so they are ordered exactly as under {@link #OLDEST_LEASE}.
     */
    PREFIX_LEAF_FIRST("prefix-leaf-first");

    private final String flagValue;

    EvictionPolicy(final String flagValue)
    {
        this.flagValue = flagValue;
    }

    /** The name used by the flag and in logs. */
    public String flagValue()
    {
        return flagValue;
    }

    /** @throws IllegalArgumentException listing the accepted names. */
    public static EvictionPolicy fromFlag(final String value)
    {
        final String v = value == null ? "" : value.trim().toLowerCase(Locale.ROOT);
        for (final EvictionPolicy p : values())
        {
            if (p.flagValue.equals(v))
            {
                return p;
            }
        }
        throw new IllegalArgumentException(
            "--eviction-policy must be oldest-lease or prefix-leaf-first, was '" + value + "'");
    }

    @Override
    public String toString()
    {
        return flagValue;
    }
}
