package io.granary.master.meta;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One of the master's metadata shards: a lock, the index of keys whose home is this shard, and the
 * groups (with their member objects) owned by this shard. Everything here is touched only while
 * holding {@link #lock}.
 */
public final class MetadataShard
{
    final int index;
    final ReentrantLock lock = new ReentrantLock();
    /** Keys whose home is this shard (the object may be owned by a group's shard). */
    final KeyIndex keys = new KeyIndex();
    /** tenant → group id → group, for groups owned by this shard. */
    final Map<String, Map<String, GroupMeta>> groupsByTenant = new HashMap<>();
    /** Objects owned by this shard (for status). */
    int ownedObjects;
    /**
     * Objects owned by this shard whose put is unfinished (PROCESSING), oldest PutStart first, linked through their
     * {@link ObjectMeta#pending} state: a put leaves the list when it completes or
     * its object is removed, so an abandoned put holds nothing but itself until the release timeout reclaims it. The
     * housekeeper reads the head without the lock as a hint (whether to lock this shard at all), then again under it.
     */
    ObjectMeta processingHead;
    private ObjectMeta processingTail;
    private int processingCount;

    MetadataShard(final int index)
    {
        this.index = index;
    }

    public int index()
    {
        return index;
    }

    void lock()
    {
        lock.lock();
    }

    void unlock()
    {
        lock.unlock();
    }

    ObjectMeta get(final String tenant, final byte[] key, final int off, final int len, final long hash)
    {
        return keys.get(tenant, key, off, len, hash);
    }

    void put(final ObjectMeta meta)
    {
        keys.put(meta);
    }

    /** Removes the index entry only if it is {@code meta} itself. */
    void unlink(final ObjectMeta meta)
    {
        keys.remove(meta);
    }

    /** Appends a new PROCESSING object (owned here) to the list of unfinished puts. */
    void linkProcessing(final ObjectMeta m)
    {
        final ObjectMeta.PendingPut p = m.pending;
        p.prev = processingTail;
        p.next = null;
        if (processingTail == null)
        {
            processingHead = m;
        }
        else
        {
            processingTail.pending.next = m;
        }
        processingTail = m;
        processingCount++;
    }

    /** Takes an object off the list of unfinished puts; nothing if it is not on it. */
    void unlinkProcessing(final ObjectMeta m)
    {
        final ObjectMeta.PendingPut p = m.pending;
        if (p == null || (p.prev == null && processingHead != m))
        {
            return;
        }
        if (p.prev == null)
        {
            processingHead = p.next;
        }
        else
        {
            p.prev.pending.next = p.next;
        }
        if (p.next == null)
        {
            processingTail = p.prev;
        }
        else
        {
            p.next.pending.prev = p.prev;
        }
        p.prev = null;
        p.next = null;
        processingCount--;
    }

    /** Unfinished puts of objects owned here. */
    int processingCount()
    {
        return processingCount;
    }

    GroupMeta group(final String tenant, final String groupId)
    {
        final Map<String, GroupMeta> groups = groupsByTenant.get(tenant);
        return groups == null ? null : groups.get(groupId);
    }

    GroupMeta groupOrCreate(final String tenant, final String groupId)
    {
        return groupsByTenant.computeIfAbsent(tenant, t -> new HashMap<>())
            .computeIfAbsent(groupId, g -> new GroupMeta(tenant, g, index));
    }

    void dropGroupIfEmpty(final GroupMeta group)
    {
        if (group.members.isEmpty())
        {
            final Map<String, GroupMeta> groups = groupsByTenant.get(group.tenant);
            if (groups != null && groups.remove(group.groupId, group) && groups.isEmpty())
            {
                groupsByTenant.remove(group.tenant);
            }
        }
    }
}
