package io.granary.node.segment;

import io.granary.protocol.CommitRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

class SegmentLedgerTest
{
    private final SegmentRegistry registry = new SegmentRegistry();
    private final Segment segment = registry.allocate("n/seg0", 80 << 20);
    private final SegmentLedger ledger = segment.ledger();

    @AfterEach
    void free()
    {
        registry.close();
    }

    private static CommitRecord record(final String key, final long length, final long version)
    {
        return new CommitRecord(0, "default", key, "", length, version, 0, 0);
    }

    @Test
    void shouldRecordCommittedExtentsInOffsetOrderWithIncreasingSequence()
    {
        assertThat(ledger.commit(segment.id(), 4096, record("b", 100, 7), 1_000)).isEqualTo(OK_VALUE);
        assertThat(ledger.commit(segment.id(), 0, record("a", 4096, 5), 2_000)).isEqualTo(OK_VALUE);

        final List<SegmentLedger.Entry> entries = ledger.snapshot();
        assertThat(entries).extracting(SegmentLedger.Entry::key).containsExactly("a", "b");
        assertThat(entries).extracting(SegmentLedger.Entry::sequence).containsExactly(2L, 1L);
        assertThat(entries.get(1).committedAtMs()).isEqualTo(1_000);
        assertThat(ledger.commits()).isEqualTo(2);
    }

    @Test
    void shouldForgetEveryEntryAWriteOverlapsAndNoOther()
    {
        ledger.commit(segment.id(), 0, record("a", 100, 1), 0);      // [0, 100)
        ledger.commit(segment.id(), 128, record("b", 100, 1), 0);    // [128, 228)
        ledger.commit(segment.id(), 256, record("c", 100, 1), 0);    // [256, 356)
        ledger.commit(segment.id(), 384, record("d", 0, 1), 0);      // [384, 385): empty values own one byte

        assertThat(ledger.beforeWrite(segment.id(), 100, 28)).isTrue();   // the gap between a and b
        assertThat(ledger.snapshot()).hasSize(4);
        assertThat(ledger.beforeWrite(segment.id(), 227, 30)).isTrue();   // last byte of b, first of c
        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("a", "d");
        assertThat(ledger.beforeWrite(segment.id(), 384, 1)).isTrue();
        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("a");
        assertThat(ledger.invalidated()).isEqualTo(3);
    }

    @Test
    void shouldReplaceWhatANewCommitOverlaps()
    {
        ledger.commit(segment.id(), 0, record("old-1", 64, 1), 0);
        ledger.commit(segment.id(), 64, record("old-2", 64, 1), 0);

        ledger.commit(segment.id(), 32, record("new", 64, 2), 0);

        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("new");
    }

    @Test
    void shouldFreeOnlyTheVersionTheMasterFreed()
    {
        ledger.commit(segment.id(), 0, record("k", 64, 9), 0);

        assertThat(ledger.free(0, 8)).as("an older object that held the extent").isFalse();
        assertThat(ledger.free(64, 9)).as("another offset").isFalse();
        assertThat(ledger.size()).isEqualTo(1);
        assertThat(ledger.free(0, 9)).isTrue();
        assertThat(ledger.size()).isZero();
        assertThat(ledger.freed()).isEqualTo(1);
    }

    @Test
    void shouldRefuseFramesNamingTheIdASegmentHadBeforeItWasRekeyed()
    {
        final int old = segment.id();
        ledger.commit(old, 0, record("k", 64, 1), 0);

        final int fresh = registry.rekey(segment);

        assertThat(fresh).isNotEqualTo(old).isNotZero();
        assertThat(segment.id()).isEqualTo(fresh);
        assertThat(registry.get(old)).isNull();
        assertThat(registry.get(fresh)).isSameAs(segment);
        assertThat(ledger.beforeWrite(old, 0, 64)).isFalse();
        assertThat(ledger.commit(old, 128, record("late", 64, 2), 0)).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).as("the ledger moves with the memory")
            .containsExactly("k");
    }

    @Test
    void shouldDropRejectedOffsetsAndClear()
    {
        ledger.commit(segment.id(), 0, record("a", 64, 1), 0);
        ledger.commit(segment.id(), 64, record("b", 64, 1), 0);
        ledger.commit(segment.id(), 128, record("c", 64, 1), 0);

        assertThat(ledger.drop(List.of(64L, 999L))).isEqualTo(1);
        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("a", "c");
        assertThat(ledger.clear()).isEqualTo(2);
        assertThat(ledger.size()).isZero();
    }

    @Test
    void shouldKeepEveryFieldThroughSlotReuseAndShareOneTenantString()
    {
        final String key = "kv1/ünïcode/" + "k".repeat(300);
        for (int i = 0; i < 100; i++)
        {
            ledger.commit(segment.id(), i * 4096L, new CommitRecord(CommitRecord.FLAG_CRC32C | CommitRecord.FLAG_SOFT_PIN,
                new String("tenant-" + (i % 2)), key + i, i % 3 == 0 ? "" : "group-" + i, parentOf(key, i), 3000 + i,
                10 + i, 500 + i, -i), 7_000 + i);
        }
        for (int i = 0; i < 100; i += 2)
        {
            assertThat(ledger.free(i * 4096L, 10 + i)).isTrue();
        }
        // The freed slots are taken again by these: one entry per freed extent, at new offsets in the same order.
        for (int i = 0; i < 100; i += 2)
        {
            ledger.commit(segment.id(), i * 4096L + 64, record("again-" + i, 64, 1_000 + i), 9_000);
        }

        final List<SegmentLedger.Entry> entries = ledger.snapshot();
        assertThat(entries).hasSize(100);
        for (int i = 0; i < 100; i++)
        {
            final SegmentLedger.Entry e = entries.get(i);
            if (i % 2 == 0)
            {
                assertThat(e).isEqualTo(new SegmentLedger.Entry(i * 4096L + 64, 64, "default", "again-" + i, "", "",
                    1_000 + i, 0, 0, false, 0, e.sequence(), 9_000));
            }
            else
            {
                final String parent = parentOf(key, i);
                assertThat(e).isEqualTo(new SegmentLedger.Entry(i * 4096L, 3000 + i, "tenant-" + (i % 2), key + i,
                    i % 3 == 0 ? "" : "group-" + i, parent, 10 + i, CommitRecord.FLAG_CRC32C |
                    CommitRecord.FLAG_SOFT_PIN | (parent.isEmpty() ? 0 : CommitRecord.FLAG_PARENT), 500 + i, true, -i,
                    i + 1, 7_000 + i));
                assertThat(e.tenant()).as("one String for the entries of a tenant").isSameAs(entries.get(1).tenant());
            }
        }
        assertThat(entries.stream().mapToLong(SegmentLedger.Entry::sequence).distinct().count()).isEqualTo(100);
        assertThat(ledger.freed()).isEqualTo(50);
    }

    /** Every fifth entry of that test names the entry before it as its parent (non-ASCII too); the others none. */
    private static String parentOf(final String key, final int i)
    {
        return i % 5 == 0 && i > 0 ? key + (i - 1) + "-ё" : "";
    }

    @Test
    void shouldKeepASnapshotAsItWasWhenTheLedgerChangesAfterIt()
    {
        ledger.commit(segment.id(), 0, record("a", 64, 1), 0);
        ledger.commit(segment.id(), 64, record("b", 64, 1), 0);

        final List<SegmentLedger.Entry> before = ledger.snapshot();
        ledger.free(0, 1);
        ledger.commit(segment.id(), 0, record("c", 32, 2), 0);
        ledger.clear();

        assertThat(before).extracting(SegmentLedger.Entry::key).containsExactly("a", "b");
        assertThat(ledger.snapshot()).isEmpty();
        ledger.commit(segment.id(), 128, record("d", 64, 3), 0);
        assertThat(ledger.snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("d");
    }
    /** The ledger against a plain model (a TreeMap of entries, as the ledger was first written) under random frames. */
    @Test
    void shouldMatchAPlainModelUnderRandomWritesCommitsAndFrees()
    {
        final Random random = new Random(7);
        final TreeMap<Long, SegmentLedger.Entry> model = new TreeMap<>();
        List<SegmentLedger.Entry> held = null;
        List<SegmentLedger.Entry> heldModel = null;
        long sequence = 0;
        for (int step = 0; step < 30_000; step++)
        {
            final long offset = random.nextInt(1 << 20) * 64L;   // a 64 MiB range: many regions and pages
            final long length = random.nextInt(8) == 0 ? 0 : 1 + random.nextInt(256 << 10);
            final int op = random.nextInt(10);
            if (op < 2)
            {
                assertThat(ledger.beforeWrite(segment.id(), offset, length)).isTrue();
                removeOverlapping(model, offset, Math.max(1, length));
            }
            else if (op < 7)
            {
                final long version = 1 + random.nextInt(1000);
                final String key = "k" + step;
                assertThat(ledger.commit(segment.id(), offset, record(key, length, version), step)).isEqualTo(OK_VALUE);
                removeOverlapping(model, offset, Math.max(1, length));
                model.put(offset, new SegmentLedger.Entry(offset, length, "default", key, "", "", version, 0, 0, false,
                    0, ++sequence, step));
            }
            else if (op < 9 && !model.isEmpty())
            {
                final SegmentLedger.Entry e = model.ceilingEntry(offset) != null ? model.ceilingEntry(offset).getValue()
                    : model.firstEntry().getValue();
                final boolean right = random.nextBoolean();
                assertThat(ledger.free(e.offset(), right ? e.version() : e.version() + 1)).isEqualTo(right);
                if (right)
                {
                    model.remove(e.offset());
                }
            }
            else
            {
                held = ledger.snapshot();
                heldModel = List.copyOf(model.values());
            }
            assertThat(ledger.size()).isEqualTo(model.size());
            if (step % 3_000 == 0)
            {
                assertThat(ledger.snapshot()).containsExactlyElementsOf(model.values());
            }
        }
        assertThat(ledger.snapshot()).containsExactlyElementsOf(model.values());
        assertThat(held).as("a snapshot taken earlier is unchanged").containsExactlyElementsOf(heldModel);
    }

    /**
     * Keys, group ids and parent keys of many lengths (non-ASCII too) replacing one another on a few thousand offsets, so a page's
     * arena of names fills, is rebuilt without the freed names and grows, again and again; every snapshot held along
     * the way must still read its entries' names as they were, although the ledger's pages share their arena with it.
     */
    @Test
    void shouldKeepEveryNameAndEveryHeldSnapshotThroughArenaRebuilds()
    {
        final Random random = new Random(11);
        final TreeMap<Long, SegmentLedger.Entry> model = new TreeMap<>();
        final List<List<SegmentLedger.Entry>> held = new java.util.ArrayList<>();
        final List<List<SegmentLedger.Entry>> heldModels = new java.util.ArrayList<>();
        for (int step = 0; step < 40_000; step++)
        {
            final long offset = random.nextInt(6_000) * 64L; // 6,000 slots at most: two pages
            if (random.nextInt(4) == 0 && !model.isEmpty())
            {
                final SegmentLedger.Entry e = model.firstEntry().getValue();
                assertThat(ledger.free(e.offset(), e.version())).isTrue();
                model.remove(e.offset());
                continue;
            }
            final String key = name(random, 1 + random.nextInt(random.nextInt(20) == 0 ? 1300 : 60)) + step;
            final String group = random.nextInt(3) == 0 ? "" : name(random, random.nextInt(100));
            final String parent = random.nextInt(2) == 0 ? "" : name(random, 1 + random.nextInt(80));
            final CommitRecord r = new CommitRecord(0, "default", key, group, parent, 64, step, 0, 0);
            assertThat(ledger.commit(segment.id(), offset, r, step)).isEqualTo(OK_VALUE);
            model.remove(offset);
            model.put(offset, new SegmentLedger.Entry(offset, 64, "default", key, group, parent, step,
                parent.isEmpty() ? 0 : CommitRecord.FLAG_PARENT, 0, false, 0, 0, step));
            if (step % 4_000 == 0)
            {
                held.add(ledger.snapshot());
                heldModels.add(List.copyOf(model.values()));
            }
        }
        assertThat(ledger.snapshot()).usingRecursiveFieldByFieldElementComparatorIgnoringFields("sequence")
            .containsExactlyElementsOf(model.values());
        for (int i = 0; i < held.size(); i++)
        {
            assertThat(held.get(i)).as("snapshot %d", i)
                .usingRecursiveFieldByFieldElementComparatorIgnoringFields("sequence")
                .containsExactlyElementsOf(heldModels.get(i));
        }
    }

    /** {@code length} characters, a few of them outside ASCII (two or three UTF-8 bytes). */
    private static String name(final Random random, final int length)
    {
        final StringBuilder b = new StringBuilder(length);
        for (int i = 0; i < length; i++)
        {
            final int kind = random.nextInt(20);
            b.append(kind == 0 ? 'é' : kind == 1 ? '\u20ac' : (char)('a' + random.nextInt(26)));
        }
        return b.toString();
    }

    private static void removeOverlapping(final TreeMap<Long, SegmentLedger.Entry> model, final long offset,
        final long length)
    {
        Map.Entry<Long, SegmentLedger.Entry> last;
        while ((last = model.lowerEntry(offset + length)) != null && last.getKey() + last.getValue().span() > offset)
        {
            model.remove(last.getKey());
        }
    }
    @Test
    void shouldRefuseCommitsBeyondTheNodesLedgerBudgetUntilFreesMakeRoom()
    {
        // names of "a"+"" are 3 bytes: 72 + align8(16 + 3) = 96 bytes an entry; two segments share room for three.
        final long entry = LedgerBudget.entryBytes(3);
        assertThat(entry).isEqualTo(96);
        try (SegmentRegistry small = new SegmentRegistry(new LedgerBudget(3 * entry)))
        {
            final Segment one = small.allocate("n/seg0", 1 << 20);
            final Segment two = small.allocate("n/seg1", 1 << 20);
            assertThat(one.ledger().commit(one.id(), 0, record("a", 64, 1), 0)).isEqualTo(OK_VALUE);
            assertThat(one.ledger().commit(one.id(), 64, record("b", 64, 1), 0)).isEqualTo(OK_VALUE);
            assertThat(two.ledger().commit(two.id(), 0, record("c", 64, 1), 0)).isEqualTo(OK_VALUE);

            assertThat(two.ledger().commit(two.id(), 64, record("d", 64, 1), 0)).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
            assertThat(one.ledger().commit(one.id(), 128, record("e", 64, 1), 0)).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
            assertThat(small.ledgerBudget().refusals()).isEqualTo(2);
            assertThat(small.ledgerBudget().usedBytes()).isEqualTo(3 * entry);
            assertThat(two.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("c");
            assertThat(one.ledger().heapBytes()).isEqualTo(2 * entry);

            // A commit that replaces the entry it overlaps fits: the old one's bytes go first.
            assertThat(one.ledger().commit(one.id(), 0, record("a2", 64, 2), 0)).isEqualTo(OK_VALUE);
            assertThat(one.ledger().free(64, 1)).isTrue();
            assertThat(two.ledger().commit(two.id(), 64, record("d", 64, 1), 0)).isEqualTo(OK_VALUE);
            assertThat(two.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("c", "d");
            assertThat(one.ledger().clear()).isEqualTo(1);
            assertThat(small.ledgerBudget().usedBytes()).isEqualTo(2 * entry);
            assertThat(one.ledger().commit(one.id(), 0, record("f", 64, 3), 0)).isEqualTo(OK_VALUE);
            assertThat(one.ledger().refusals()).isEqualTo(1);
        }
    }
}
