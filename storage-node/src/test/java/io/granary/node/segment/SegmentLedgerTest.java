package io.granary.node.segment;

import io.granary.protocol.CommitRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.List;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

class SegmentLedgerTest
{
    private final SegmentRegistry registry = new SegmentRegistry();
    private final Segment segment = registry.allocate("n/seg0", 1 << 20);
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
}
