package io.granary.master.meta;

import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * Child counts of eviction units (ungrouped objects and groups) for prefix-aware eviction: a unit's count is the
 * number of live objects that named one of its objects as their parent at PutStart. Counts are changed atomically,
 * without the unit's shard lock (the child's shard lock is held instead), so that linking never needs more than one
 * shard lock at a time; an increment is made under the parent's owner lock after checking that the parent is still
 * in the store, and the evictor reads the count under that same lock, so a unit is never evicted as a leaf while a
 * child it already counts is live. Memory: one int per unit and one reference per child, no child lists.
 */
final class ParentLinks
{
    private static final AtomicIntegerFieldUpdater<ObjectMeta> OBJECT_CHILDREN =
        AtomicIntegerFieldUpdater.newUpdater(ObjectMeta.class, "childRefs");
    private static final AtomicIntegerFieldUpdater<GroupMeta> GROUP_CHILDREN =
        AtomicIntegerFieldUpdater.newUpdater(GroupMeta.class, "childRefs");

    private ParentLinks()
    {
    }

    /** The eviction unit an object belongs to: its group, or itself. */
    static Object unitOf(final ObjectMeta m)
    {
        return m.group != null ? m.group : m;
    }

    static void addChild(final Object unit)
    {
        if (unit instanceof GroupMeta)
        {
            GROUP_CHILDREN.incrementAndGet((GroupMeta)unit);
        }
        else
        {
            OBJECT_CHILDREN.incrementAndGet((ObjectMeta)unit);
        }
    }

    /** @return the unit's child count after the decrement. */
    static int removeChild(final Object unit)
    {
        return unit instanceof GroupMeta ?
            GROUP_CHILDREN.decrementAndGet((GroupMeta)unit) : OBJECT_CHILDREN.decrementAndGet((ObjectMeta)unit);
    }

    static int childRefs(final Object unit)
    {
        return unit instanceof GroupMeta ? ((GroupMeta)unit).childRefs : ((ObjectMeta)unit).childRefs;
    }

    /** The shard that owns the unit. */
    static int shardOf(final Object unit)
    {
        return unit instanceof GroupMeta ? ((GroupMeta)unit).shard : ((ObjectMeta)unit).ownerShard;
    }
}
