package io.granary.master.events;

import io.granary.common.Clock;
import io.granary.proto.KvEventReason;
import io.granary.proto.KvEventType;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The master's KV event log: every stored / removed / cleared change gets the next sequence number of this master
 * incarnation (gapless, from 0) and lands in a bounded ring, the replay buffer, that readers walk in sequence order.
 *
 * <p>Threading: {@link #stored}, {@link #removed} and {@link #cleared} are called by any thread, usually under the
 * metadata shard lock of the change they record, so the order of two changes to one key is the order of their
 * sequence numbers; they take no lock and never wait (one atomic increment, one allocation and one compare-and-set
 * of the ring slot). Readers ({@link #read}) never block writers: a slot is overwritten once the ring has gone round,
 * and a reader that comes too late sees {@link #OVERWRITTEN}.
 */
public final class EventJournal
{
    /** What the master's objects live in, as routers name it: host memory of the storage nodes. */
    public static final String MEDIUM = "CPU";
    /** Returned by {@link #read} for a sequence the ring no longer holds. */
    public static final KvEventRecord OVERWRITTEN = new KvEventRecord(
        -1, KvEventType.KV_EVENT_UNKNOWN, KvEventReason.KV_REASON_NONE, "", KvEventRecord.NO_KEY, null, 0, false, 0, null);

    private final AtomicReferenceArray<KvEventRecord> ring;
    private final int mask;
    private final AtomicLong nextSequence = new AtomicLong();
    private final Clock clock;
    private final long epoch;

    /**
     * @param capacityEvents replay buffer size: a power of two.
     * @param epoch this master incarnation's id as a number (non-zero), carried with every batch.
     */
    public EventJournal(final int capacityEvents, final long epoch, final Clock clock)
    {
        if (capacityEvents < 2 || Integer.bitCount(capacityEvents) != 1)
        {
            throw new IllegalArgumentException("event buffer must be a power of two >= 2, was " + capacityEvents);
        }
        if (epoch == 0)
        {
            throw new IllegalArgumentException("epoch must not be 0");
        }
        this.ring = new AtomicReferenceArray<>(capacityEvents);
        this.mask = capacityEvents - 1;
        this.clock = clock;
        this.epoch = epoch;
        cleared("", KvEventReason.KV_REASON_MASTER_START); // sequence 0: whatever a consumer knew is void
    }

    public long epoch()
    {
        return epoch;
    }

    public int capacity()
    {
        return mask + 1;
    }

    /** The sequence the next event will get: every sequence below it is claimed (maybe not yet readable). */
    public long nextSequence()
    {
        return nextSequence.get();
    }

    /** The oldest sequence the ring may still hold. */
    public long oldestRetained()
    {
        return Math.max(0, nextSequence.get() - capacity());
    }

    /** An object became readable. @return its sequence. */
    public long stored(
        final String tenant, final byte[] key, final String groupId, final long valueLength, final boolean groupComplete)
    {
        return stored(tenant, key, groupId, valueLength, groupComplete, null);
    }

    /** As {@link #stored(String, byte[], String, long, boolean)}, naming the parent's key (same tenant) or null. */
    public long stored(
        final String tenant,
        final byte[] key,
        final String groupId,
        final long valueLength,
        final boolean groupComplete,
        final byte[] parentKeyOrNull)
    {
        return stored(tenant, key, groupId, valueLength, groupComplete, parentKeyOrNull, clock.epochMillis());
    }

    /**
     * As {@link #stored(String, byte[], String, long, boolean, byte[])}, at {@code epochMillis} as the caller read this
     * journal's clock (a batch of puts reads it once).
     */
    public long stored(
        final String tenant,
        final byte[] key,
        final String groupId,
        final long valueLength,
        final boolean groupComplete,
        final byte[] parentKeyOrNull,
        final long epochMillis)
    {
        return append(KvEventType.KV_EVENT_STORED, KvEventReason.KV_REASON_NONE, tenant, key, groupId, valueLength,
            groupComplete, parentKeyOrNull, epochMillis);
    }

    /** A readable object stopped being readable. @return its sequence. */
    public long removed(
        final String tenant, final byte[] key, final String groupId, final long valueLength, final KvEventReason reason)
    {
        return append(KvEventType.KV_EVENT_REMOVED, reason, tenant, key, groupId, valueLength, false, null,
            clock.epochMillis());
    }

    /** Every key of {@code tenant} ("" = of every tenant) is to be forgotten. @return its sequence. */
    public long cleared(final String tenant, final KvEventReason reason)
    {
        return append(KvEventType.KV_EVENT_CLEARED, reason, tenant, KvEventRecord.NO_KEY, null, 0, false, null,
            clock.epochMillis());
    }

    private long append(
        final KvEventType type,
        final KvEventReason reason,
        final String tenant,
        final byte[] key,
        final String groupId,
        final long valueLength,
        final boolean groupComplete,
        final byte[] parentKey,
        final long epochMillis)
    {
        final long sequence = nextSequence.getAndIncrement();
        final KvEventRecord event = new KvEventRecord(
            sequence, type, reason, tenant, key, groupId, valueLength, groupComplete, epochMillis, parentKey);
        final int slot = (int)sequence & mask;
        while (true)
        {
            final KvEventRecord previous = ring.get(slot);
            if (previous != null && previous.sequence > sequence)
            {
                return sequence; // lapped before it was written: readers of it see OVERWRITTEN
            }
            if (ring.compareAndSet(slot, previous, event))
            {
                return sequence;
            }
        }
    }

    /**
     * The event with {@code sequence}: null when it is not written yet (or not claimed yet), {@link #OVERWRITTEN}
     * when the ring has gone round since.
     */
    public KvEventRecord read(final long sequence)
    {
        final KvEventRecord event = ring.get((int)sequence & mask);
        if (event == null || event.sequence < sequence)
        {
            return sequence < nextSequence.get() - capacity() ? OVERWRITTEN : null;
        }
        return event.sequence == sequence ? event : OVERWRITTEN;
    }
}
