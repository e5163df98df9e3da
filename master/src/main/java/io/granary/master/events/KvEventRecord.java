package io.granary.master.events;

import io.granary.proto.KvEventReason;
import io.granary.proto.KvEventType;

import java.nio.charset.StandardCharsets;

/**
 * One KV event as the master's {@link EventJournal} holds it: immutable, shared by every reader. The key is the
 * object's own UTF-8 bytes (never copied, never changed); a CLEARED event has an empty key.
 */
public final class KvEventRecord
{
    static final byte[] NO_KEY = new byte[0];

    final long sequence;
    final KvEventType type;
    final KvEventReason reason;
    /** "" only in a CLEARED of every tenant. */
    final String tenant;
    final byte[] keyBytes;
    /** Null when the object has no group. */
    final String groupId;
    final long valueLength;
    final boolean groupComplete;
    final long timestampMs;
    /** STORED only: the parent's key bytes (same tenant), or null. */
    final byte[] parentKeyBytes;

    KvEventRecord(
        final long sequence,
        final KvEventType type,
        final KvEventReason reason,
        final String tenant,
        final byte[] keyBytes,
        final String groupId,
        final long valueLength,
        final boolean groupComplete,
        final long timestampMs,
        final byte[] parentKeyBytes)
    {
        this.sequence = sequence;
        this.type = type;
        this.reason = reason;
        this.tenant = tenant;
        this.keyBytes = keyBytes;
        this.groupId = groupId;
        this.valueLength = valueLength;
        this.groupComplete = groupComplete;
        this.timestampMs = timestampMs;
        this.parentKeyBytes = parentKeyBytes;
    }

    public long sequence()
    {
        return sequence;
    }

    public KvEventType type()
    {
        return type;
    }

    public KvEventReason reason()
    {
        return reason;
    }

    public String tenant()
    {
        return tenant;
    }

    /** The key's UTF-8 bytes; do not modify. */
    public byte[] keyBytes()
    {
        return keyBytes;
    }

    public String key()
    {
        return new String(keyBytes, StandardCharsets.UTF_8);
    }

    /** The eviction group, or null. */
    public String groupId()
    {
        return groupId;
    }

    public long valueLength()
    {
        return valueLength;
    }

    public boolean groupComplete()
    {
        return groupComplete;
    }

    public long timestampMs()
    {
        return timestampMs;
    }

    /** The UTF-8 key of the object this one continues (same tenant), or null; do not modify. */
    public byte[] parentKeyBytes()
    {
        return parentKeyBytes;
    }

    /** Whether a subscriber scoped to {@code tenantOrNull} (null = every tenant) sees this event. */
    public boolean visibleTo(final String tenantOrNull)
    {
        return tenantOrNull == null || tenantOrNull.equals(tenant) || (type == KvEventType.KV_EVENT_CLEARED &&
            tenant.isEmpty());
    }

    @Override
    public String toString()
    {
        return "#" + sequence + " " + type + " " + reason + " " + tenant + "/" + key() +
            (groupId == null ? "" : " group=" + groupId);
    }
}
