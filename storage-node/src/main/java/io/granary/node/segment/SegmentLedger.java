package io.granary.node.segment;

import io.granary.protocol.CommitRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.charset.StandardCharsets;
import java.util.AbstractList;
import java.util.Arrays;
import java.util.List;
import java.util.RandomAccess;

import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;

/**
 * The ledger of one segment: the complete extents it holds (what COMMIT frames said about them), which the
 * node reports to a master that has to rebuild its metadata. Entries never overlap: a WRITE removes every
 * entry its range touches before any byte moves, and a COMMIT replaces what its extent overlaps. Memory only:
 * a restarted node starts with an empty ledger, as its memory is gone too.
 *
 * <p>Thread safe: every method holds this object's monitor, which also guards the segment's id, so a frame
 * that names an id the segment no longer has (re-keyed under the monitor) can never touch the ledger.
 */
public final class SegmentLedger
{
    private static final Logger LOG = LoggerFactory.getLogger(SegmentLedger.class);

    /** One complete extent. Immutable. */
    public record Entry(
        long offset,
        long valueLength,
        String tenant,
        String key,
        String groupId,
        String parentKey,
        long version,
        int flags,
        long softPinTtlMs,
        boolean hasCrc32c,
        int crc32c,
        long sequence,
        long committedAtMs)
    {
        /** Bytes of the segment the entry covers: at least one, so an empty value still owns its offset. */
        public long span()
        {
            return Math.max(1, valueLength);
        }
    }

    private static final int MIN_SLOTS = 16;
    /** Distinct tenants remembered for sharing one String among entries (tenants are few; a miss costs one String). */
    private static final int TENANT_CACHE = 8;
    private static final int PAGE_SHIFT = 12;
    private static final int PAGE_SLOTS = 1 << PAGE_SHIFT;
    private static final int PAGE_MASK = PAGE_SLOTS - 1;
    // The long and int fields of a slot, at slot * LONGS + field and slot * INTS + field of its page.
    private static final int OFFSET = 0;
    private static final int VALUE_LENGTH = 1;
    private static final int VERSION = 2;
    private static final int SOFT_PIN_TTL_MS = 3;
    private static final int SEQUENCE = 4;
    private static final int COMMITTED_AT_MS = 5;
    private static final int LONGS = 6;
    private static final int FLAGS = 0;
    private static final int CRC32C = 1;
    /** Where the slot's names start in its page's arena, and their length (0: a free slot; a live one has >= 2). */
    private static final int NAMES_AT = 2;
    private static final int NAMES_LENGTH = 3;
    private static final int INTS = 4;
    /** The first and smallest arena of a page: it grows and shrinks with its names (see Page#rebuildArena). */
    private static final int MIN_ARENA_BYTES = 4096;

    /**
     * The fields of {@link #PAGE_SLOTS} entries in columns, and the bytes of their keys and group ids one after the
     * other in one arena: no object per entry (an array per entry was one more object for the collector to copy, and
     * one more young reference stored into an old page, per COMMIT), about 68 bytes an entry plus its names. A page a
     * {@link #snapshot} holds is copied before it changes.
     *
     * <p>The arena is shared with such a copy, not copied: bytes below a page's {@link #arenaTop} are never rewritten
     * (a COMMIT appends above it, a freed slot only stops counting its bytes), and making room builds a new array, so
     * the held page keeps seeing its entries' bytes as they were.
     */
    private static final class Page
    {
        final long[] longs;
        final int[] ints;
        final String[] tenants;
        /**
         * Per live slot, at {@link #NAMES_AT} for {@link #NAMES_LENGTH} bytes: the key's UTF-8 length (2 bytes,
         * big-endian), then, when the entry names a parent ({@link CommitRecord#FLAG_PARENT} in its flags), the group
         * id's length (2 bytes), then the key, the group id and the parent key (the rest); without a parent the group
         * id is the rest.
         */
        byte[] arena;
        /** Bytes of the arena written so far; the next names go here. */
        int arenaTop;
        /** Bytes of the arena that live slots' names take; the rest below {@link #arenaTop} is freed slots'. */
        int arenaLive;
        boolean shared;

        Page()
        {
            this(new long[LONGS * PAGE_SLOTS], new int[INTS * PAGE_SLOTS], new String[PAGE_SLOTS],
                new byte[MIN_ARENA_BYTES], 0, 0);
        }

        private Page(
            final long[] longs, final int[] ints, final String[] tenants, final byte[] arena, final int arenaTop,
            final int arenaLive)
        {
            this.longs = longs;
            this.ints = ints;
            this.tenants = tenants;
            this.arena = arena;
            this.arenaTop = arenaTop;
            this.arenaLive = arenaLive;
        }

        Page copy()
        {
            return new Page(longs.clone(), ints.clone(), tenants.clone(), arena, arenaTop, arenaLive);
        }

        /**
         * Writes {@code record}'s names ({@code length} bytes, laid out as {@link #arena} says) as {@code slot}'s at
         * the arena's top, making room first if they do not fit above it.
         */
        void putNames(final int slot, final CommitRecord record, final int keyLength, final int length)
        {
            if (arena.length - arenaTop < length)
            {
                rebuildArena(length);
            }
            arena[arenaTop] = (byte)(keyLength >>> 8);
            arena[arenaTop + 1] = (byte)keyLength;
            int at = arenaTop + 2;
            if ((record.flags() & CommitRecord.FLAG_PARENT) != 0)
            {
                final int groupLength = record.groupUtf8Length();
                arena[at] = (byte)(groupLength >>> 8);
                arena[at + 1] = (byte)groupLength;
                at += 2;
            }
            record.putNames(arena, at);
            final int i = (slot & PAGE_MASK) * INTS;
            ints[i + NAMES_AT] = arenaTop;
            ints[i + NAMES_LENGTH] = length;
            arenaTop += length;
            arenaLive += length;
        }

        /**
         * Forgets {@code slot}'s names, and rebuilds the arena smaller once live names take less than half of it, so
         * a ledger that shrinks gives its names' memory back; @return their length.
         */
        int clearNames(final int slot)
        {
            final int i = (slot & PAGE_MASK) * INTS;
            final int length = ints[i + NAMES_LENGTH];
            ints[i + NAMES_AT] = 0;
            ints[i + NAMES_LENGTH] = 0;
            arenaLive -= length;
            if (arena.length > MIN_ARENA_BYTES && arenaLive < arena.length >>> 1)
            {
                rebuildArena(0);
            }
            return length;
        }

        /**
         * Copies the live slots' names into a new arena with room for {@code more} bytes and a quarter of what they
         * take then (at least {@link #MIN_ARENA_BYTES}; rounded up to 4 KiB), leaving out freed slots' bytes. The
         * quarter bounds both costs: the arena stays within about 1.25 times its live names (an array per entry cost
         * its 16-byte header and padding), and a byte is copied about four more times in all as the page fills. While
         * no slot was freed since the last rebuild (a page filling up), the names are copied in one piece and keep
         * their offsets.
         */
        private void rebuildArena(final int more)
        {
            final long live = (long)arenaLive + more;
            final int capacity = (int)Math.max(MIN_ARENA_BYTES, (live + (live >> 2) + 4095) & ~4095L);
            final byte[] rebuilt = new byte[capacity];
            if (arenaLive == arenaTop)
            {
                // Nothing freed below the top: every live slot's names stay where they are.
                System.arraycopy(arena, 0, rebuilt, 0, arenaTop);
                arena = rebuilt;
                return;
            }
            int top = 0;
            for (int s = 0; s < PAGE_SLOTS; s++)
            {
                final int i = s * INTS;
                final int length = ints[i + NAMES_LENGTH];
                if (length > 0)
                {
                    System.arraycopy(arena, ints[i + NAMES_AT], rebuilt, top, length);
                    ints[i + NAMES_AT] = top;
                    top += length;
                }
            }
            arena = rebuilt;
            arenaTop = top;
        }

        long get(final int slot, final int field)
        {
            return longs[(slot & PAGE_MASK) * LONGS + field];
        }

        int getInt(final int slot, final int field)
        {
            return ints[(slot & PAGE_MASK) * INTS + field];
        }

        Entry entry(final int slot)
        {
            final int at = getInt(slot, NAMES_AT);
            final int length = getInt(slot, NAMES_LENGTH);
            final int end = at + length;
            final int flags = getInt(slot, FLAGS);
            final int keyLength = u16(at);
            final boolean hasParent = (flags & CommitRecord.FLAG_PARENT) != 0;
            final int keyAt = at + (hasParent ? 4 : 2);
            final int groupAt = keyAt + keyLength;
            final int parentAt = hasParent ? groupAt + u16(at + 2) : end;
            final String key = new String(arena, keyAt, keyLength, StandardCharsets.UTF_8);
            final String groupId = new String(arena, groupAt, parentAt - groupAt, StandardCharsets.UTF_8);
            final String parentKey = new String(arena, parentAt, end - parentAt, StandardCharsets.UTF_8);
            return new Entry(get(slot, OFFSET), get(slot, VALUE_LENGTH), tenants[slot & PAGE_MASK], key, groupId,
                parentKey, get(slot, VERSION), flags, get(slot, SOFT_PIN_TTL_MS),
                (flags & CommitRecord.FLAG_CRC32C) != 0, getInt(slot, CRC32C), get(slot, SEQUENCE),
                get(slot, COMMITTED_AT_MS));
        }

        private int u16(final int at)
        {
            return ((arena[at] & 0xFF) << 8) | (arena[at + 1] & 0xFF);
        }
    }

    private final Segment segment;
    private final OffsetIndex index = new OffsetIndex();
    private Page[] pages = new Page[0];
    private int[] freeSlots = new int[0];
    private int freeCount;
    private int usedSlots;
    private final String[] tenantCache = new String[TENANT_CACHE];
    private int tenantCacheNext;
    private LedgerBudget budget = LedgerBudget.unlimited();
    /** What this ledger's entries are counted as in its budget ({@link LedgerBudget#entryBytes}). */
    private long heapBytes;
    private boolean refusing;
    private long refusals;

    private long nextSequence = 1;
    private long commits;
    private long invalidated;
    private long freed;

    SegmentLedger(final Segment segment)
    {
        this.segment = segment;
    }

    /**
     * A WRITE of [offset, offset + length) is about to move bytes: forget every entry it overlaps.
     *
     * @return false when {@code frameSegmentId} is no longer the segment's id (it was re-keyed): refuse the WRITE.
     */
    public synchronized boolean beforeWrite(final int frameSegmentId, final long offset, final long length)
    {
        if (segment.id() != frameSegmentId)
        {
            return false;
        }
        invalidated += removeOverlapping(offset, Math.max(1, length));
        return true;
    }

    /**
     * Records a complete extent at {@code offset}, replacing any entry it overlaps.
     *
     * @return OK, or SEGMENT_NOT_FOUND when {@code frameSegmentId} is no longer the segment's id.
     */
    public synchronized int commit(
        final int frameSegmentId, final long offset, final CommitRecord record, final long nowMs)
    {
        if (segment.id() != frameSegmentId)
        {
            return SEGMENT_NOT_FOUND_VALUE;
        }
        invalidated += removeOverlapping(offset, Math.max(1, record.valueLength()));
        final int keyLength = record.keyUtf8Length();
        if (keyLength > 0xFFFF)
        {
            throw new IllegalArgumentException("key of " + keyLength + " bytes");
        }
        final int namesLength =
            ((record.flags() & CommitRecord.FLAG_PARENT) != 0 ? 4 : 2) + record.namesUtf8Length();
        final long bytes = LedgerBudget.entryBytes(namesLength);
        if (!budget.tryReserve(bytes))
        {
            refusals++;
            if (!refusing)
            {
                refusing = true;
                LOG.warn("segment {}: the node's ledgers are at their heap budget ({} of {} bytes); COMMITs are " +
                        "refused with NO_AVAILABLE_HANDLE until values are freed: give the node more heap (-Xmx; the " +
                        "ledgers may take {} % of it), about 140 bytes per value it should hold", segment.name(),
                    budget.usedBytes(), budget.limitBytes(), Math.round(LedgerBudget.HEAP_FRACTION * 100));
            }
            return NO_AVAILABLE_HANDLE_VALUE;
        }
        if (refusing)
        {
            refusing = false;
            LOG.info("segment {}: ledger commits accepted again ({} refused so far)", segment.name(), refusals);
        }
        heapBytes += bytes;
        final int slot = takeSlot();
        final Page page = writable(slot);
        final int l = (slot & PAGE_MASK) * LONGS;
        page.longs[l + OFFSET] = offset;
        page.longs[l + VALUE_LENGTH] = record.valueLength();
        page.longs[l + VERSION] = record.version();
        page.longs[l + SOFT_PIN_TTL_MS] = record.softPinTtlMs();
        page.longs[l + SEQUENCE] = nextSequence++;
        page.longs[l + COMMITTED_AT_MS] = nowMs;
        page.ints[(slot & PAGE_MASK) * INTS + FLAGS] = record.flags();
        page.ints[(slot & PAGE_MASK) * INTS + CRC32C] = record.crc32c();
        page.tenants[slot & PAGE_MASK] = shared(record.tenant());
        page.putNames(slot, record, keyLength, namesLength);
        index.put(offset, slot);
        commits++;
        return OK_VALUE;
    }

    /** The master freed the extent at {@code offset} that held {@code version}: forget it if it still does. */
    public synchronized boolean free(final long offset, final long version)
    {
        final int slot = index.get(offset);
        if (slot < 0 || pages[slot >>> PAGE_SHIFT].get(slot, VERSION) != version)
        {
            return false;
        }
        release(index.remove(offset));
        freed++;
        return true;
    }

    /** Drops the entries at these offsets (the master refused them). @return entries dropped. */
    public synchronized int drop(final List<Long> offsets)
    {
        int dropped = 0;
        for (final Long offset : offsets)
        {
            final int slot = index.remove(offset);
            if (slot >= 0)
            {
                release(slot);
                dropped++;
            }
        }
        return dropped;
    }

    /** Forgets everything (the master that expired this node will not take it back). */
    public synchronized int clear()
    {
        final int size = index.size();
        budget.release(heapBytes);
        heapBytes = 0;
        index.clear();
        pages = new Page[0];
        freeSlots = new int[0];
        freeCount = 0;
        usedSlots = 0;
        return size;
    }

    /**
     * Every entry in offset order, as of now. The list holds the order of the entries (4 bytes each) and the ledger's
     * pages as they are now (a page is copied before the ledger changes it, while a snapshot holds it), and builds
     * each {@link Entry} when it is read: a report of millions of entries never holds them all as objects at once.
     */
    public synchronized List<Entry> snapshot()
    {
        for (final Page page : pages)
        {
            if (page != null)
            {
                page.shared = true;
            }
        }
        return new Snapshot(index.slotsInOrder(), pages.clone());
    }

    /** Shares {@code budget} with the other ledgers of a node; called before the first COMMIT. */
    synchronized void budget(final LedgerBudget budget)
    {
        if (index.size() > 0)
        {
            throw new IllegalStateException("the ledger already holds entries");
        }
        this.budget = budget;
    }

    /** Heap its entries are counted as in the node's {@link LedgerBudget}. */
    public synchronized long heapBytes()
    {
        return heapBytes;
    }

    /** COMMITs this ledger refused because the node's ledgers were at their budget. */
    public synchronized long refusals()
    {
        return refusals;
    }

    public synchronized int size()
    {
        return index.size();
    }

    public synchronized long commits()
    {
        return commits;
    }

    /** Entries forgotten because a WRITE or a COMMIT overlapped them. */
    public synchronized long invalidated()
    {
        return invalidated;
    }

    /** Entries forgotten because the master freed their extent. */
    public synchronized long freed()
    {
        return freed;
    }

    /** The segment's id, read under the ledger's monitor. */
    synchronized void rekey(final int newId)
    {
        segment.setId(newId);
    }

    /**
     * Removes the entries [offset, offset + length) overlaps. Entries never overlap one another, so those it overlaps
     * are adjacent in offset order and the last of them is the entry starting last before the range's end: one
     * lookup when nothing overlaps (the usual case), one more per entry removed.
     */
    private int removeOverlapping(final long offset, final long length)
    {
        final long end = offset + length;
        int removed = 0;
        int slot;
        while ((slot = index.lower(end)) >= 0 && spanEnd(slot) > offset)
        {
            release(index.remove(pages[slot >>> PAGE_SHIFT].get(slot, OFFSET)));
            removed++;
        }
        return removed;
    }

    private long spanEnd(final int slot)
    {
        final Page page = pages[slot >>> PAGE_SHIFT];
        return page.get(slot, OFFSET) + Math.max(1, page.get(slot, VALUE_LENGTH));
    }

    private int takeSlot()
    {
        if (freeCount > 0)
        {
            return freeSlots[--freeCount];
        }
        final int slot = usedSlots++;
        final int p = slot >>> PAGE_SHIFT;
        if (p == pages.length)
        {
            pages = Arrays.copyOf(pages, Math.max(4, pages.length * 2));
        }
        if (pages[p] == null)
        {
            pages[p] = new Page();
        }
        return slot;
    }

    /** The page of {@code slot}, copied first if a snapshot holds it. */
    private Page writable(final int slot)
    {
        final int p = slot >>> PAGE_SHIFT;
        Page page = pages[p];
        if (page.shared)
        {
            page = page.copy();
            pages[p] = page;
        }
        return page;
    }

    private void release(final int slot)
    {
        final Page page = writable(slot);
        final long bytes = LedgerBudget.entryBytes(page.clearNames(slot));
        heapBytes -= bytes;
        budget.release(bytes);
        page.tenants[slot & PAGE_MASK] = null;
        if (freeCount == freeSlots.length)
        {
            freeSlots = Arrays.copyOf(freeSlots, Math.max(MIN_SLOTS, freeCount + (freeCount >> 1)));
        }
        freeSlots[freeCount++] = slot;
    }

    /** {@code tenant}, or an equal String an earlier entry holds, so that entries of one tenant share one. */
    private String shared(final String tenant)
    {
        for (final String t : tenantCache)
        {
            if (t != null && t.equals(tenant))
            {
                return t;
            }
        }
        tenantCache[tenantCacheNext] = tenant;
        tenantCacheNext = (tenantCacheNext + 1) % TENANT_CACHE;
        return tenant;
    }

    /** The entries' order and the pages as they were; entries are built as they are read. */
    private static final class Snapshot extends AbstractList<Entry> implements RandomAccess
    {
        private final int[] order;
        private final Page[] pages;

        Snapshot(final int[] order, final Page[] pages)
        {
            this.order = order;
            this.pages = pages;
        }

        @Override
        public Entry get(final int i)
        {
            final int slot = order[i];
            return pages[slot >>> PAGE_SHIFT].entry(slot);
        }

        @Override
        public int size()
        {
            return order.length;
        }
    }
}
