package io.granary.master.meta;

/**
 * One unit the evictor may take: an ungrouped object or a whole group. A snapshot taken under the
 * owner shard's lock; {@link MetadataStore#evict} rechecks it before acting.
 */
public final class EvictionCandidate
{
    final Object unit;
    final int shard;
    final long ageNs;
    final long bytes;
    final boolean softPinned;
    final int childRefs;

    /** A snapshot of {@code unit} (an ObjectMeta or a GroupMeta), as a scan takes it under the owner shard's lock. */
    public EvictionCandidate(
        final Object unit, final int shard, final long ageNs, final long bytes, final boolean softPinned,
        final int childRefs)
    {
        this.unit = unit;
        this.shard = shard;
        this.ageNs = ageNs;
        this.bytes = bytes;
        this.softPinned = softPinned;
        this.childRefs = childRefs;
    }

    /** Its last lease deadline, or the moment it became readable if never leased (nanoTime). */
    public long ageNs()
    {
        return ageNs;
    }

    public long bytes()
    {
        return bytes;
    }

    public boolean softPinned()
    {
        return softPinned;
    }

    /** Live objects that named this unit (or a member of it) as their parent when the snapshot was taken. */
    public int childRefs()
    {
        return childRefs;
    }

    /** No live child names this unit as its parent: prefix-aware eviction may take it. */
    public boolean isLeaf()
    {
        return childRefs <= 0;
    }

    public boolean isGroup()
    {
        return unit instanceof GroupMeta;
    }

    /** The key of an ungrouped object, or the group id. */
    public String name()
    {
        return unit instanceof GroupMeta ? ((GroupMeta)unit).groupId : ((ObjectMeta)unit).key();
    }
}
