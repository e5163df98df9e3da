package io.granary.client.events;

/**
 * One KV event of the master (docs/events.md): a key of a tenant became readable (STORED), stopped being readable
 * (REMOVED), or every key of a tenant, or of every tenant, is gone (CLEARED). Immutable.
 */
public final class KvEvent
{
    /** What happened. */
    public enum Type
    {
        STORED, REMOVED, CLEARED
    }

    /** Why a REMOVED or CLEARED happened; NONE for STORED. */
    public enum Reason
    {
        NONE, REMOVED, EVICTED, NODE_LOST, REPLACED, MASTER_START, REMOVE_ALL
    }

    private final long sequence;
    private final Type type;
    private final Reason reason;
    private final String tenant;
    private final String key;
    private final String groupId;
    private final String medium;
    private final long valueLength;
    private final boolean groupComplete;
    private final long timestampMs;
    private final boolean fromSnapshot;
    private final String parentKey;

    /** An event without a parent key; see the full constructor. */
    public KvEvent(
        final long sequence,
        final Type type,
        final Reason reason,
        final String tenant,
        final String key,
        final String groupId,
        final String medium,
        final long valueLength,
        final boolean groupComplete,
        final long timestampMs,
        final boolean fromSnapshot)
    {
        this(sequence, type, reason, tenant, key, groupId, medium, valueLength, groupComplete, timestampMs,
            fromSnapshot, null);
    }

    /** @param parentKey the key (same tenant) of the object this one continues, or null. */
    public KvEvent(
        final long sequence,
        final Type type,
        final Reason reason,
        final String tenant,
        final String key,
        final String groupId,
        final String medium,
        final long valueLength,
        final boolean groupComplete,
        final long timestampMs,
        final boolean fromSnapshot,
        final String parentKey)
    {
        this.sequence = sequence;
        this.type = type;
        this.reason = reason;
        this.tenant = tenant;
        this.key = key;
        this.groupId = groupId;
        this.medium = medium;
        this.valueLength = valueLength;
        this.groupComplete = groupComplete;
        this.timestampMs = timestampMs;
        this.fromSnapshot = fromSnapshot;
        this.parentKey = parentKey;
    }

    /**
     * STORED only: the key (same tenant) of the object this one continues, as its put named it
     * ({@code PutOptions.parent}) when that object existed at the put; null otherwise.
     */
    public String parentKey()
    {
        return parentKey;
    }

    /** Sequence number in the master incarnation (epoch); 0 for snapshot entries. */
    public long sequence()
    {
        return sequence;
    }

    public Type type()
    {
        return type;
    }

    public Reason reason()
    {
        return reason;
    }

    /** The tenant; "" only in a CLEARED of every tenant. */
    public String tenant()
    {
        return tenant;
    }

    /** The key; "" in CLEARED. */
    public String key()
    {
        return key;
    }

    /** The eviction group, or null. */
    public String groupId()
    {
        return groupId;
    }

    /** Where the bytes are: "CPU" (host memory of the storage nodes). */
    public String medium()
    {
        return medium;
    }

    public long valueLength()
    {
        return valueLength;
    }

    /** STORED only: with this object every member its group had at that moment was readable. */
    public boolean groupComplete()
    {
        return groupComplete;
    }

    /** The master's wall clock when the change happened; 0 for snapshot entries. */
    public long timestampMs()
    {
        return timestampMs;
    }

    /** A STORED entry of a snapshot rather than a change. */
    public boolean fromSnapshot()
    {
        return fromSnapshot;
    }

    /** Whether this CLEARED event covers {@code tenantOfKey}. */
    public boolean clears(final String tenantOfKey)
    {
        return type == Type.CLEARED && (tenant.isEmpty() || tenant.equals(tenantOfKey));
    }

    @Override
    public String toString()
    {
        return (fromSnapshot ? "snapshot" : "#" + sequence) + " " + type + (reason == Reason.NONE ? "" : " " + reason) +
            " " + (tenant.isEmpty() ? "*" : tenant) + (key.isEmpty() ? "" : " " + key) +
            (groupId == null ? "" : " group=" + groupId + (groupComplete ? " (group complete)" : ""));
    }
}
