package io.granary.transfer.natives;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The transfers of one engine loop in flight, by the id the C engine hands back with each completion. Ids come from
 * one counter, so the transfers in flight at a time mostly have distinct low bits: an entry lives in the slot its id's
 * low bits name when that slot is free, else (a long-running transfer holds it) in an overflow map. No boxing and no
 * map node for the usual transfer, and each entry is in exactly one place, so add and remove stay simple. Thread
 * safe: submitting threads add, the polling thread removes, a failing loop drains.
 *
 * @param <T> the entry; {@code idOf} must give back the id it was added under.
 */
final class PendingTable<T>
{
    /** Reads an entry's id (so that a slot holding another id's entry is told apart). */
    interface Ids<T>
    {
        long idOf(T entry);
    }

    private final AtomicReferenceArray<T> slots;
    private final int mask;
    private final ConcurrentHashMap<Long, T> overflow = new ConcurrentHashMap<>();
    private final AtomicInteger size = new AtomicInteger();
    private final Ids<T> ids;

    /** @param slots a power of two. */
    PendingTable(final int slots, final Ids<T> ids)
    {
        if (Integer.bitCount(slots) != 1)
        {
            throw new IllegalArgumentException("slots must be a power of two, was " + slots);
        }
        this.slots = new AtomicReferenceArray<>(slots);
        this.mask = slots - 1;
        this.ids = ids;
    }

    /** Adds {@code entry} under {@code id}, which no entry in the table has. */
    void add(final long id, final T entry)
    {
        size.incrementAndGet();
        if (!slots.compareAndSet((int)id & mask, null, entry))
        {
            overflow.put(id, entry);
        }
    }

    /** Removes and returns the entry added under {@code id}, or null when there is none (any more). */
    T remove(final long id)
    {
        final int slot = (int)id & mask;
        final T there = slots.get(slot);
        if (there != null && ids.idOf(there) == id && slots.compareAndSet(slot, there, null))
        {
            size.decrementAndGet();
            return there;
        }
        final T other = overflow.remove(id);
        if (other != null)
        {
            size.decrementAndGet();
        }
        return other;
    }

    boolean isEmpty()
    {
        return size.get() == 0;
    }

    int size()
    {
        return size.get();
    }

    /** Removes and returns every entry (each exactly once, whatever removes race with it). */
    List<T> drain()
    {
        final List<T> all = new ArrayList<>();
        for (int i = 0; i < slots.length(); i++)
        {
            final T entry = slots.getAndSet(i, null);
            if (entry != null)
            {
                size.decrementAndGet();
                all.add(entry);
            }
        }
        for (final Long id : overflow.keySet())
        {
            final T entry = overflow.remove(id);
            if (entry != null)
            {
                size.decrementAndGet();
                all.add(entry);
            }
        }
        return all;
    }
}
