package io.granary.node.segment;

import io.granary.protocol.CommitRecord;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

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
    /** One complete extent. Immutable. */
    public record Entry(
        long offset,
        long valueLength,
        String tenant,
        String key,
        String groupId,
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

    private final Segment segment;
    private final TreeMap<Long, Entry> entries = new TreeMap<>();
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
        final Entry entry = new Entry(offset, record.valueLength(), record.tenant(), record.key(), record.groupId(),
            record.version(), record.flags(), record.softPinTtlMs(), record.hasCrc32c(), record.crc32c(),
            nextSequence++, nowMs);
        invalidated += removeOverlapping(offset, entry.span());
        entries.put(offset, entry);
        commits++;
        return OK_VALUE;
    }

    /** The master freed the extent at {@code offset} that held {@code version}: forget it if it still does. */
    public synchronized boolean free(final long offset, final long version)
    {
        final Entry entry = entries.get(offset);
        if (entry == null || entry.version() != version)
        {
            return false;
        }
        entries.remove(offset);
        freed++;
        return true;
    }

    /** Drops the entries at these offsets (the master refused them). @return entries dropped. */
    public synchronized int drop(final List<Long> offsets)
    {
        int dropped = 0;
        for (final Long offset : offsets)
        {
            dropped += entries.remove(offset) != null ? 1 : 0;
        }
        return dropped;
    }

    /** Forgets everything (the master that expired this node will not take it back). */
    public synchronized int clear()
    {
        final int size = entries.size();
        entries.clear();
        return size;
    }

    /** A copy of every entry in offset order. */
    public synchronized List<Entry> snapshot()
    {
        return new ArrayList<>(entries.values());
    }

    public synchronized int size()
    {
        return entries.size();
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
        Map.Entry<Long, Entry> last;
        while ((last = entries.lowerEntry(end)) != null && last.getKey() + last.getValue().span() > offset)
        {
            entries.remove(last.getKey());
            removed++;
        }
        return removed;
    }
}
