package io.granary.node.segment;

import java.util.Arrays;
import java.util.BitSet;

/**
 * An ordered map from segment offsets to int slots, without an object per entry: the segment is cut into regions of
 * {@link #REGION_BYTES}; a region holding entries keeps their offsets (relative to the region, as ints) sorted in one
 * array and their slots in a parallel one, and a bit set marks the regions that hold any. About 8 bytes per entry
 * plus the arrays' slack, where a {@code TreeMap<Long, ?>} costs 64 (its node and the boxed key).
 *
 * <p>{@link #lower} (the entry starting last before a position) reads one region and, when that region has nothing
 * before the position, finds the nearest earlier region holding entries through the bit set. Inserting or removing
 * moves the entries after it within its region only. Not thread safe.
 */
final class OffsetIndex
{
    static final int REGION_SHIFT = 20;
    static final long REGION_BYTES = 1L << REGION_SHIFT;
    private static final int REGION_MASK = (int)(REGION_BYTES - 1);
    private static final int MAX_REGIONS = Integer.MAX_VALUE - 8;

    private static final class Region
    {
        int count;
        int[] offsets = new int[4];
        int[] slots = new int[4];

        /** The index of {@code rel} if present, else {@code -(insertion point) - 1}. */
        int find(final int rel)
        {
            return Arrays.binarySearch(offsets, 0, count, rel);
        }
    }

    private Region[] regions = new Region[0];
    private final BitSet occupied = new BitSet();
    private int size;

    int size()
    {
        return size;
    }

    /** Adds {@code offset -> slot}; the caller has made sure {@code offset} is not present. */
    void put(final long offset, final int slot)
    {
        final int r = region(offset);
        if (r >= regions.length)
        {
            regions = Arrays.copyOf(regions, (int)Math.min(MAX_REGIONS, Math.max(r + 1L, regions.length * 2L)));
        }
        Region region = regions[r];
        if (region == null)
        {
            region = new Region();
            regions[r] = region;
            occupied.set(r);
        }
        final int rel = (int)offset & REGION_MASK;
        final int at = region.find(rel);
        if (at >= 0)
        {
            throw new IllegalStateException("offset " + offset + " is already indexed");
        }
        final int i = -at - 1;
        if (region.count == region.offsets.length)
        {
            final int grown = region.count + (region.count >> 1) + 1;
            region.offsets = Arrays.copyOf(region.offsets, grown);
            region.slots = Arrays.copyOf(region.slots, grown);
        }
        System.arraycopy(region.offsets, i, region.offsets, i + 1, region.count - i);
        System.arraycopy(region.slots, i, region.slots, i + 1, region.count - i);
        region.offsets[i] = rel;
        region.slots[i] = slot;
        region.count++;
        size++;
    }

    /** The slot at exactly {@code offset}, or -1. */
    int get(final long offset)
    {
        final Region region = regionOf(offset);
        if (region == null)
        {
            return -1;
        }
        final int at = region.find((int)offset & REGION_MASK);
        return at >= 0 ? region.slots[at] : -1;
    }

    /** Removes {@code offset}. @return its slot, or -1 when it was not present. */
    int remove(final long offset)
    {
        final Region region = regionOf(offset);
        if (region == null)
        {
            return -1;
        }
        final int at = region.find((int)offset & REGION_MASK);
        if (at < 0)
        {
            return -1;
        }
        final int slot = region.slots[at];
        region.count--;
        System.arraycopy(region.offsets, at + 1, region.offsets, at, region.count - at);
        System.arraycopy(region.slots, at + 1, region.slots, at, region.count - at);
        size--;
        if (region.count == 0)
        {
            final int r = region(offset);
            regions[r] = null;
            occupied.clear(r);
        }
        else if (region.offsets.length > 16 && region.count < region.offsets.length / 4)
        {
            region.offsets = Arrays.copyOf(region.offsets, region.count * 2);
            region.slots = Arrays.copyOf(region.slots, region.count * 2);
        }
        return slot;
    }

    /** The slot of the entry with the greatest offset strictly below {@code position}, or -1 when there is none. */
    int lower(final long position)
    {
        if (position <= 0 || size == 0)
        {
            return -1;
        }
        final long below = (position - 1) >>> REGION_SHIFT;
        if (below >= regions.length)
        {
            // Every entry is below the position: the last one is the answer.
            final int last = occupied.previousSetBit(regions.length - 1);
            return last < 0 ? -1 : lastSlot(regions[last]);
        }
        final int r = (int)below;
        final Region region = regions[r];
        if (region != null)
        {
            final int rel = (int)((position - 1) & REGION_MASK);
            int at = region.find(rel);
            at = at >= 0 ? at : -at - 2; // the entry at rel itself is below position; else the one before the gap
            if (at >= 0)
            {
                return region.slots[at];
            }
        }
        final int earlier = occupied.previousSetBit(r - 1);
        return earlier < 0 ? -1 : lastSlot(regions[earlier]);
    }

    /** Every slot in offset order. */
    int[] slotsInOrder()
    {
        final int[] out = new int[size];
        int n = 0;
        for (int r = occupied.nextSetBit(0); r >= 0; r = occupied.nextSetBit(r + 1))
        {
            final Region region = regions[r];
            System.arraycopy(region.slots, 0, out, n, region.count);
            n += region.count;
        }
        return out;
    }

    void clear()
    {
        regions = new Region[0];
        occupied.clear();
        size = 0;
    }

    private Region regionOf(final long offset)
    {
        if (offset < 0)
        {
            return null;
        }
        final long r = offset >>> REGION_SHIFT;
        return r < regions.length ? regions[(int)r] : null;
    }

    private static int region(final long offset)
    {
        final long r = offset >>> REGION_SHIFT;
        if (offset < 0 || r >= MAX_REGIONS)
        {
            throw new IllegalArgumentException("offset out of range: " + offset);
        }
        return (int)r;
    }

    private static int lastSlot(final Region region)
    {
        return region.slots[region.count - 1];
    }
}
