package io.granary.master.meta;

import java.util.ArrayList;
import java.util.List;

/**
 * An eviction group: objects (e.g. all layer-group and rank pages of one KV block) that share one
 * lease and are evicted together. Lives in, and is guarded by, the shard of hash(tenant, group id),
 * which also owns every member.
 */
public final class GroupMeta
{
    final String tenant;
    final String groupId;
    final int shard;
    final List<ObjectMeta> members = new ArrayList<>(4);
    /** Shared read-lease deadline of all members (nanoTime); a lease on one member refreshes all. */
    long leaseDeadlineNs;
    /** Live objects naming a member of this group as their parent; changed atomically by {@link ParentLinks}. */
    volatile int childRefs;

    GroupMeta(final String tenant, final String groupId, final int shard)
    {
        this.tenant = tenant;
        this.groupId = groupId;
        this.shard = shard;
    }

    public String groupId()
    {
        return groupId;
    }

    public String tenant()
    {
        return tenant;
    }

    public int shard()
    {
        return shard;
    }

    public long leaseDeadlineNs()
    {
        return leaseDeadlineNs;
    }

    /** Live objects outside the group that named one of its members as their parent. */
    public int childRefs()
    {
        return childRefs;
    }

    public List<ObjectMeta> membersView()
    {
        return new ArrayList<>(members);
    }

    public int size()
    {
        return members.size();
    }
}
