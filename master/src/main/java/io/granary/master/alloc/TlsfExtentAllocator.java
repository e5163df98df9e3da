package io.granary.master.alloc;

import java.util.Arrays;

/**
 * Two-Level Segregated Fit extent allocator with immediate coalescing: free blocks sit in size-class bins
 * (a power-of-two first level split into 16 linear sub-bins) found in O(1) through two levels of bitmaps, and
 * blocks live in parallel primitive arrays, so steady-state allocate/free creates no garbage.
 *
 * <p>Not thread safe: callers serialise access (see {@link SegmentAllocation}).
 */
public final class TlsfExtentAllocator implements ExtentAllocator
{
    /** Default alignment and rounding unit in bytes. */
    public static final int DEFAULT_GRANULARITY = 64;

    /** Smallest accepted granularity in bytes. */
    public static final int MIN_GRANULARITY = 8;

    /** Largest accepted granularity in bytes. */
    public static final int MAX_GRANULARITY = 1 << 30;

    /** Largest accepted capacity in bytes (256 TiB), far above any segment yet leaving headroom in longs. */
    public static final long MAX_CAPACITY = 1L << 48;

    // Second level: 2^SL_LOG2 linear sub-bins per power of two, so a class spans at most 1/16 of its size.
    private static final int SL_LOG2 = 4;
    private static final int SL_COUNT = 1 << SL_LOG2;
    private static final int SL_MASK = SL_COUNT - 1;

    // Blocks of the exact class examined before splitting a block of a larger class (bounded: O(1)).
    private static final int EXACT_BIN_PROBES = 8;

    private static final int NONE = -1;
    private static final byte UNUSED = 0;
    private static final byte FREE = 1;
    private static final byte USED = 2;

    private static final int INITIAL_RECORDS = 64;
    private static final int MAX_RECORDS = 1 << 30;

    // Offset index regions: at least 2^12 granules each (so a region holds at most 4096 allocations), and at most
    // 2^22 regions per allocator (32 MiB of references and counts for the largest capacity).
    private static final int MIN_REGION_SHIFT = 12;
    private static final int MAX_REGION_BITS = 22;
    private static final int INITIAL_REGION_ENTRIES = 4;

    private final int granularity;
    private final int granularityShift;
    private final long capacityUnits;

    // Block records, indexed by record id; offsets and sizes are in granules. 33 bytes per block (free or used),
    // recycled through a free-list of slots and grown by doubling.
    private long[] blockOffset;
    private long[] blockSize;
    private int[] physPrev;
    private int[] physNext;
    private int[] binPrev;
    private int[] binNext;      // also chains unused record slots
    private byte[] blockState;
    private int recordHighWater;
    private int unusedRecords = NONE;

    // Bins: heads indexed by fl * SL_COUNT + sl; flBitmap bit fl set iff slBitmap[fl] != 0.
    private final int[] binHead;
    private final int[] slBitmap;
    private long flBitmap;

    // Offset index of live allocations: the segment is cut into regions of 2^regionShift granules, and each
    // region keeps the allocations that start in it as one sorted array of longs (granule within the region << 32
    // | record id; null while the region holds none). Allocations made one after another in offset order, as puts
    // into a fresh or freshly evicted stretch of a segment are, append to the same short array, and a free finds its
    // record by a binary search there: a hash table touched a random cache line of a table as large as the
    // allocation count for every one (about 200 ns per allocate + free once millions were live). 8 bytes per live
    // allocation (up to four times that while a region drains: its array halves at a quarter full) plus 8 bytes per
    // region.
    private final int regionShift;
    private final long regionMask;
    private final long[][] regions;
    private final int[] regionCounts;
    private int indexSize;

    /** The free block after the last {@link #allocateAt} extent: where the next one in offset order starts. */
    private int reserveHint = NONE;
    /** The free block before the last {@link #allocateAt} extent: where the next one in descending order is. */
    private int reserveHintBefore = NONE;

    private long allocatedUnits;
    private int allocationCount;
    private int freeBlockCount;
    private long largestFreeUnits;
    private boolean largestFreeKnown;

    /**
     * Creates an allocator for {@code capacityBytes} with {@link #DEFAULT_GRANULARITY}.
     *
     * @throws IllegalArgumentException if the capacity is below the granularity or above {@link #MAX_CAPACITY}.
     */
    public TlsfExtentAllocator(final long capacityBytes)
    {
        this(capacityBytes, DEFAULT_GRANULARITY);
    }

    /**
     * Creates an allocator; the usable capacity is {@code capacityBytes} rounded down to the granularity.
     *
     * @param granularityBytes a power of two in [{@link #MIN_GRANULARITY}, {@link #MAX_GRANULARITY}].
     * @throws IllegalArgumentException on a bad granularity or a capacity outside [granularity, MAX_CAPACITY].
     */
    public TlsfExtentAllocator(final long capacityBytes, final int granularityBytes)
    {
        if (granularityBytes < MIN_GRANULARITY || granularityBytes > MAX_GRANULARITY ||
            Integer.bitCount(granularityBytes) != 1)
        {
            throw new IllegalArgumentException("granularity must be a power of two in [" + MIN_GRANULARITY + ", " +
                MAX_GRANULARITY + "]: " + granularityBytes);
        }
        if (capacityBytes < granularityBytes || capacityBytes > MAX_CAPACITY)
        {
            throw new IllegalArgumentException("capacity must be in [" + granularityBytes + ", " + MAX_CAPACITY +
                "] bytes: " + capacityBytes);
        }
        this.granularity = granularityBytes;
        this.granularityShift = Integer.numberOfTrailingZeros(granularityBytes);
        this.capacityUnits = capacityBytes >>> granularityShift;

        final int flCount = firstLevel(capacityUnits) + 1;
        binHead = new int[flCount * SL_COUNT];
        Arrays.fill(binHead, NONE);
        slBitmap = new int[flCount];

        blockOffset = new long[INITIAL_RECORDS];
        blockSize = new long[INITIAL_RECORDS];
        physPrev = new int[INITIAL_RECORDS];
        physNext = new int[INITIAL_RECORDS];
        binPrev = new int[INITIAL_RECORDS];
        binNext = new int[INITIAL_RECORDS];
        blockState = new byte[INITIAL_RECORDS];

        final int unitBits = Long.SIZE - Long.numberOfLeadingZeros(capacityUnits - 1);
        regionShift = Math.max(MIN_REGION_SHIFT, unitBits - MAX_REGION_BITS);
        regionMask = (1L << regionShift) - 1;
        final int regionCount = (int)((capacityUnits - 1) >>> regionShift) + 1;
        regions = new long[regionCount][];
        regionCounts = new int[regionCount];

        final int whole = newRecord();
        blockOffset[whole] = 0;
        blockSize[whole] = capacityUnits;
        physPrev[whole] = NONE;
        physNext[whole] = NONE;
        insertFree(whole);
    }

    @Override
    public long allocate(final long size)
    {
        if (size <= 0)
        {
            throw new IllegalArgumentException("allocation size must be positive: " + size);
        }
        if (size > capacity())
        {
            return NO_SPACE;
        }
        final long units = (size + granularity - 1) >>> granularityShift;
        if (!reserveRecordSlot())
        {
            return NO_SPACE;
        }

        final int block = findFreeBlock(units);
        if (block == NONE)
        {
            return NO_SPACE;
        }
        removeFree(block);
        if (blockSize[block] > units)
        {
            split(block, units);
        }
        blockState[block] = USED;
        indexPut(block);
        allocatedUnits += units;
        allocationCount++;
        return blockOffset[block] << granularityShift;
    }

    @Override
    public boolean allocateAt(final long offset, final long size)
    {
        if (size <= 0)
        {
            throw new IllegalArgumentException("allocation size must be positive: " + size);
        }
        if (offset < 0 || (offset & (granularity - 1)) != 0 || offset >= capacity() || size > capacity() - offset)
        {
            return false;
        }
        final long start = offset >>> granularityShift;
        final long units = (size + granularity - 1) >>> granularityShift;
        if (start + units > capacityUnits || !reserveRecordSlots(2))
        {
            return false;
        }
        int block = freeBlockContaining(start, units);
        if (block == NONE)
        {
            return false;
        }
        removeFree(block);
        if (blockOffset[block] < start)
        {
            // Keep the free prefix where it is and carve the extent from the rest.
            split(block, start - blockOffset[block]);
            final int rest = physNext[block];
            removeFree(rest);
            insertFree(block);
            block = rest;
        }
        if (blockSize[block] > units)
        {
            split(block, units);
        }
        blockState[block] = USED;
        indexPut(block);
        allocatedUnits += units;
        allocationCount++;
        reserveHint = physNext[block];
        reserveHintBefore = physPrev[block];
        return true;
    }

    /**
     * The free block holding all of [start, start + units) in granules, or NONE. Extents taken in offset order (a
     * node reports its ledger so) or in descending order find theirs next to the last one taken; any other is found
     * through the offset index of live allocations: the one starting last at or before {@code start}, and the block
     * behind it, since free blocks are merged: no walk along the segment's blocks, whatever order extents come in.
     */
    private int freeBlockContaining(final long start, final long units)
    {
        if (isHint(reserveHint, start, units))
        {
            return reserveHint;
        }
        if (isHint(reserveHintBefore, start, units))
        {
            return reserveHintBefore;
        }
        final int before = lastLiveAtOrBefore(start);
        if (before == NONE)
        {
            return contains(0, start, units) ? 0 : NONE; // nothing live before it: record 0, the segment's first block
        }
        final int next = physNext[before];
        return next != NONE && contains(next, start, units) ? next : NONE;
    }

    private boolean isHint(final int hint, final long start, final long units)
    {
        return hint != NONE && hint < recordHighWater && contains(hint, start, units);
    }

    /** The record of the live allocation that starts last at or before granule {@code start}, or NONE. */
    private int lastLiveAtOrBefore(final long start)
    {
        int local = (int)(start & regionMask);
        for (int region = (int)(start >>> regionShift); region >= 0; region--)
        {
            final long[] entries = regions[region];
            if (entries != null)
            {
                final int found = search(entries, regionCounts[region], local);
                final int at = found >= 0 ? found : -found - 2; // else the entry before the insertion point
                if (at >= 0)
                {
                    return (int)entries[at];
                }
            }
            local = Integer.MAX_VALUE; // the regions before: their last entry
        }
        return NONE;
    }

    private boolean contains(final int block, final long start, final long units)
    {
        return blockState[block] == FREE && blockOffset[block] <= start &&
            blockOffset[block] + blockSize[block] >= start + units;
    }

    @Override
    public void free(final long offset)
    {
        final int block = liveBlockAt(offset);
        if (block == NONE)
        {
            throw new IllegalArgumentException("not the start of a live allocation: " + offset);
        }
        indexRemove(block);
        allocatedUnits -= blockSize[block];
        allocationCount--;

        int merged = block;
        final int prev = physPrev[block];
        if (prev != NONE && blockState[prev] == FREE)
        {
            removeFree(prev);
            absorbNext(prev);
            merged = prev;
        }
        final int next = physNext[merged];
        if (next != NONE && blockState[next] == FREE)
        {
            removeFree(next);
            absorbNext(merged);
        }
        insertFree(merged);
    }

    @Override
    public long allocationSize(final long offset)
    {
        final int block = liveBlockAt(offset);
        return block == NONE ? -1 : blockSize[block] << granularityShift;
    }

    /** Usable capacity: the constructor's capacity rounded down to the granularity. */
    @Override
    public long capacity()
    {
        return capacityUnits << granularityShift;
    }

    @Override
    public long allocatedBytes()
    {
        return allocatedUnits << granularityShift;
    }

    @Override
    public int allocationCount()
    {
        return allocationCount;
    }

    /**
     * Exact size of the largest free block. Cached; after the cached block is taken it is recomputed by scanning
     * only the highest non-empty bin (found through the bitmaps), which holds very few blocks in practice.
     */
    @Override
    public long largestFreeBlock()
    {
        if (!largestFreeKnown)
        {
            largestFreeUnits = 0;
            if (flBitmap != 0)
            {
                final int fl = Long.SIZE - 1 - Long.numberOfLeadingZeros(flBitmap);
                final int sl = Integer.SIZE - 1 - Integer.numberOfLeadingZeros(slBitmap[fl]);
                for (int b = binHead[fl * SL_COUNT + sl]; b != NONE; b = binNext[b])
                {
                    largestFreeUnits = Math.max(largestFreeUnits, blockSize[b]);
                }
            }
            largestFreeKnown = true;
        }
        return largestFreeUnits << granularityShift;
    }

    @Override
    public int granularity()
    {
        return granularity;
    }

    /** Number of free blocks: 1 when nothing is allocated (everything coalesced), a measure of fragmentation. */
    public int freeBlockCount()
    {
        return freeBlockCount;
    }

    /** Free bytes in total (not necessarily contiguous). */
    public long freeBytes()
    {
        return capacity() - allocatedBytes();
    }

    // ------------------------------------------------------------------------------------------- search

    private int findFreeBlock(final long units)
    {
        final int fl = firstLevel(units);
        final int sl = secondLevel(units, fl);
        final int exactBin = fl * SL_COUNT + sl;

        // 1. A few blocks of the request's own class: reuses equal-sized holes without splitting larger ones.
        int probes = 0;
        int b = binHead[exactBin];
        while (b != NONE && probes < EXACT_BIN_PROBES)
        {
            if (blockSize[b] >= units)
            {
                return b;
            }
            b = binNext[b];
            probes++;
        }

        // 2. Good fit: the first non-empty class strictly above the request's, where every block fits.
        final int above = findBinFrom(fl, sl + 1);
        if (above != NONE)
        {
            return binHead[above];
        }

        // 3. Rest of the request's own class (only reached when nothing larger is free): keeps the promise that
        // any request up to largestFreeBlock() succeeds.
        while (b != NONE)
        {
            if (blockSize[b] >= units)
            {
                return b;
            }
            b = binNext[b];
        }
        return NONE;
    }

    /** First non-empty bin at or above (fl, sl) in class order, or NONE. */
    private int findBinFrom(final int fl, final int sl)
    {
        if (fl < slBitmap.length && sl < SL_COUNT)
        {
            final int slMap = slBitmap[fl] & (-1 << sl);
            if (slMap != 0)
            {
                return fl * SL_COUNT + Integer.numberOfTrailingZeros(slMap);
            }
        }
        final long flMap = flBitmap & (-1L << (fl + 1));
        if (flMap == 0)
        {
            return NONE;
        }
        final int upperFl = Long.numberOfTrailingZeros(flMap);
        return upperFl * SL_COUNT + Integer.numberOfTrailingZeros(slBitmap[upperFl]);
    }

    /** First level: 0 for sizes below SL_COUNT granules (exact classes), else 1 + log2(size) - SL_LOG2. */
    static int firstLevel(final long units)
    {
        final int log2 = Long.SIZE - 1 - Long.numberOfLeadingZeros(units);
        return log2 < SL_LOG2 ? 0 : log2 - SL_LOG2 + 1;
    }

    /** Second level: the linear sub-bin within the first level's power of two. */
    static int secondLevel(final long units, final int fl)
    {
        return fl == 0 ? (int)units : (int)(units >>> (fl - 1)) & SL_MASK;
    }

    /** Smallest size, in granules, that maps to the class (fl, sl). */
    static long classLowerBound(final int fl, final int sl)
    {
        return fl == 0 ? sl : (long)(SL_COUNT + sl) << (fl - 1);
    }

    // ------------------------------------------------------------------------------------------- blocks

    /** Splits {@code block} (free, out of its bin) so it keeps {@code units}; the tail becomes a free block. */
    private void split(final int block, final long units)
    {
        final int tail = newRecord();
        blockOffset[tail] = blockOffset[block] + units;
        blockSize[tail] = blockSize[block] - units;
        blockSize[block] = units;
        final int next = physNext[block];
        physPrev[tail] = block;
        physNext[tail] = next;
        physNext[block] = tail;
        if (next != NONE)
        {
            physPrev[next] = tail;
        }
        insertFree(tail);
    }

    /** Merges the physical successor of {@code block} into it and releases the successor's record. */
    private void absorbNext(final int block)
    {
        final int next = physNext[block];
        blockSize[block] += blockSize[next];
        final int afterNext = physNext[next];
        physNext[block] = afterNext;
        if (afterNext != NONE)
        {
            physPrev[afterNext] = block;
        }
        releaseRecord(next);
    }

    private void insertFree(final int block)
    {
        final long size = blockSize[block];
        final int fl = firstLevel(size);
        final int sl = secondLevel(size, fl);
        final int bin = fl * SL_COUNT + sl;
        final int head = binHead[bin];
        binPrev[block] = NONE;
        binNext[block] = head;
        if (head != NONE)
        {
            binPrev[head] = block;
        }
        binHead[bin] = block;
        slBitmap[fl] |= 1 << sl;
        flBitmap |= 1L << fl;
        blockState[block] = FREE;
        freeBlockCount++;
        if (largestFreeKnown && size > largestFreeUnits)
        {
            largestFreeUnits = size;
        }
    }

    private void removeFree(final int block)
    {
        final long size = blockSize[block];
        final int prev = binPrev[block];
        final int next = binNext[block];
        if (prev != NONE)
        {
            binNext[prev] = next;
        }
        else
        {
            final int fl = firstLevel(size);
            final int sl = secondLevel(size, fl);
            binHead[fl * SL_COUNT + sl] = next;
            if (next == NONE)
            {
                slBitmap[fl] &= ~(1 << sl);
                if (slBitmap[fl] == 0)
                {
                    flBitmap &= ~(1L << fl);
                }
            }
        }
        if (next != NONE)
        {
            binPrev[next] = prev;
        }
        binPrev[block] = NONE;
        binNext[block] = NONE;
        freeBlockCount--;
        if (size == largestFreeUnits)
        {
            largestFreeKnown = false;
        }
    }

    // ------------------------------------------------------------------------------------------- records

    /** Makes sure {@code count} new records can be taken without failing half way; false at the limit. */
    private boolean reserveRecordSlots(final int count)
    {
        while (recordHighWater + count > blockOffset.length)
        {
            if (!growRecords())
            {
                return false;
            }
        }
        return true;
    }

    /** Makes sure a split cannot fail for lack of a record slot, before any state changes; false at the limit. */
    private boolean reserveRecordSlot()
    {
        if (unusedRecords != NONE || recordHighWater < blockOffset.length)
        {
            return true;
        }
        return growRecords();
    }

    private boolean growRecords()
    {
        if (blockOffset.length >= MAX_RECORDS)
        {
            return false;
        }
        final int newLength = blockOffset.length * 2;
        blockOffset = Arrays.copyOf(blockOffset, newLength);
        blockSize = Arrays.copyOf(blockSize, newLength);
        physPrev = Arrays.copyOf(physPrev, newLength);
        physNext = Arrays.copyOf(physNext, newLength);
        binPrev = Arrays.copyOf(binPrev, newLength);
        binNext = Arrays.copyOf(binNext, newLength);
        blockState = Arrays.copyOf(blockState, newLength);
        return true;
    }

    private int newRecord()
    {
        final int record;
        if (unusedRecords != NONE)
        {
            record = unusedRecords;
            unusedRecords = binNext[record];
        }
        else
        {
            record = recordHighWater++;
        }
        binPrev[record] = NONE;
        binNext[record] = NONE;
        return record;
    }

    private void releaseRecord(final int record)
    {
        blockState[record] = UNUSED;
        binNext[record] = unusedRecords;
        unusedRecords = record;
    }

    // ------------------------------------------------------------------------------------------- offset index

    /** Record of the live allocation starting at {@code offsetBytes}, or NONE (also for malformed offsets). */
    private int liveBlockAt(final long offsetBytes)
    {
        if (offsetBytes < 0 || (offsetBytes & (granularity - 1)) != 0 || offsetBytes >= capacity())
        {
            return NONE;
        }
        final long key = offsetBytes >>> granularityShift;
        final int region = (int)(key >>> regionShift);
        final long[] entries = regions[region];
        if (entries == null)
        {
            return NONE;
        }
        final int at = search(entries, regionCounts[region], (int)(key & regionMask));
        return at >= 0 ? (int)entries[at] : NONE;
    }

    /** Index of the entry for granule {@code local} among the first {@code count}, or -(insertion point) - 1. */
    private static int search(final long[] entries, final int count, final int local)
    {
        int low = 0;
        int high = count - 1;
        while (low <= high)
        {
            final int mid = (low + high) >>> 1;
            final int at = (int)(entries[mid] >>> 32);
            if (at < local)
            {
                low = mid + 1;
            }
            else if (at > local)
            {
                high = mid - 1;
            }
            else
            {
                return mid;
            }
        }
        return -(low + 1);
    }

    private void indexPut(final int record)
    {
        final long key = blockOffset[record];
        final int region = (int)(key >>> regionShift);
        final int local = (int)(key & regionMask);
        final int count = regionCounts[region];
        long[] entries = regions[region];
        if (entries == null)
        {
            entries = new long[INITIAL_REGION_ENTRIES];
            regions[region] = entries;
        }
        else if (count == entries.length)
        {
            entries = Arrays.copyOf(entries, count * 2);
            regions[region] = entries;
        }
        int at = count;
        if (count > 0 && (int)(entries[count - 1] >>> 32) > local) // not the common append in offset order
        {
            final int found = search(entries, count, local);
            if (found >= 0)
            {
                throw new IllegalStateException("granule " + key + " indexed twice");
            }
            at = -found - 1;
            System.arraycopy(entries, at, entries, at + 1, count - at);
        }
        entries[at] = ((long)local << 32) | record;
        regionCounts[region] = count + 1;
        indexSize++;
    }

    private void indexRemove(final int record)
    {
        final long key = blockOffset[record];
        final int region = (int)(key >>> regionShift);
        final long[] entries = regions[region];
        final int count = regionCounts[region];
        final int at = search(entries, count, (int)(key & regionMask));
        System.arraycopy(entries, at + 1, entries, at, count - at - 1);
        final int left = count - 1;
        regionCounts[region] = left;
        if (left == 0)
        {
            regions[region] = null;
        }
        else if (entries.length > INITIAL_REGION_ENTRIES * 4 && left <= entries.length / 4)
        {
            regions[region] = Arrays.copyOf(entries, entries.length / 2);
        }
        indexSize--;
    }

    // ------------------------------------------------------------------------------------------- checking

    /**
     * Walks every structure and throws {@link IllegalStateException} on the first broken invariant. O(blocks):
     * for tests and debugging only.
     */
    void verifyIntegrity()
    {
        // Record 0 is the block at offset 0 for ever: merges always keep the lower block's record.
        long expectedOffset = 0;
        long used = 0;
        int usedCount = 0;
        int freeCount = 0;
        long largest = 0;
        int prev = NONE;
        for (int b = 0; b != NONE; b = physNext[b])
        {
            check(blockOffset[b] == expectedOffset, "block %d at %d, expected %d", b, blockOffset[b], expectedOffset);
            check(blockSize[b] > 0, "block %d has size %d", b, blockSize[b]);
            check(physPrev[b] == prev, "block %d has physPrev %d, expected %d", b, physPrev[b], prev);
            if (blockState[b] == FREE)
            {
                check(prev == NONE || blockState[prev] != FREE, "adjacent free blocks %d and %d", prev, b);
                freeCount++;
                largest = Math.max(largest, blockSize[b]);
            }
            else
            {
                check(blockState[b] == USED, "block %d in chain has state %d", b, blockState[b]);
                check(liveBlockAt(blockOffset[b] << granularityShift) == b, "block %d not indexed", b);
                used += blockSize[b];
                usedCount++;
            }
            expectedOffset += blockSize[b];
            prev = b;
        }
        check(expectedOffset == capacityUnits, "blocks cover %d granules, capacity %d", expectedOffset, capacityUnits);
        check(used == allocatedUnits, "allocated %d granules, counter says %d", used, allocatedUnits);
        check(usedCount == allocationCount && usedCount == indexSize, "allocations %d, counter %d, index %d",
            usedCount, allocationCount, indexSize);
        int indexed = 0;
        for (int region = 0; region < regions.length; region++)
        {
            final long[] entries = regions[region];
            check((entries == null) == (regionCounts[region] == 0), "region %d: %d entries, array %s", region,
                regionCounts[region], entries == null ? "absent" : "present");
            for (int i = 0; i < regionCounts[region]; i++)
            {
                final int record = (int)entries[i];
                final long granule = ((long)region << regionShift) + (entries[i] >>> 32);
                check(i == 0 || (entries[i - 1] >>> 32) < (entries[i] >>> 32), "region %d unsorted at %d", region, i);
                check(blockState[record] == USED && blockOffset[record] == granule,
                    "region %d entry %d: record %d is not the allocation at granule %d", region, i, record, granule);
            }
            indexed += regionCounts[region];
        }
        check(indexed == indexSize, "regions index %d allocations, counter %d", indexed, indexSize);
        check(freeCount == freeBlockCount, "free blocks %d, counter %d", freeCount, freeBlockCount);
        check(!largestFreeKnown || largest == largestFreeUnits, "largest free %d, cached %d",
            largest, largestFreeUnits);

        int binned = 0;
        for (int fl = 0; fl < slBitmap.length; fl++)
        {
            check(((flBitmap >>> fl) & 1) == (slBitmap[fl] != 0 ? 1 : 0), "fl bitmap bit %d inconsistent", fl);
            for (int sl = 0; sl < SL_COUNT; sl++)
            {
                final int head = binHead[fl * SL_COUNT + sl];
                check(((slBitmap[fl] >>> sl) & 1) == (head != NONE ? 1 : 0), "sl bitmap bit %d/%d", fl, sl);
                int binPrevious = NONE;
                for (int b = head; b != NONE; b = binNext[b])
                {
                    check(blockState[b] == FREE, "block %d in bin %d/%d is not free", b, fl, sl);
                    check(binPrev[b] == binPrevious, "block %d has binPrev %d", b, binPrev[b]);
                    check(firstLevel(blockSize[b]) == fl && secondLevel(blockSize[b], fl) == sl,
                        "block %d of %d granules in wrong bin %d/%d", b, blockSize[b], fl, sl);
                    binPrevious = b;
                    binned++;
                }
            }
        }
        check(binned == freeBlockCount, "%d blocks in bins, %d free", binned, freeBlockCount);
    }

    private static void check(final boolean condition, final String format, final Object... args)
    {
        if (!condition)
        {
            throw new IllegalStateException(String.format(format, args));
        }
    }
}
