package io.granary.node.segment;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static io.granary.transfer.natives.NativeMemory.hugePagesUnavailabilityCause;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class SegmentTest
{
    private static final long MIB = 1 << 20;

    @Test
    void shouldAlignAddressToThePageAndRoundSizeUp()
    {
        try (Segment segment = new Segment(7, "node/seg0", MIB + 1))
        {
            assertThat(segment.address() % Segment.PAGE_SIZE_BYTES).isZero();
            assertThat(segment.sizeBytes()).isEqualTo(MIB + Segment.PAGE_SIZE_BYTES);
            assertThat(segment.id()).isEqualTo(7);
            assertThat(segment.name()).isEqualTo("node/seg0");
        }
    }

    @Test
    void shouldMapHugePageSegmentsOnTwoMibBoundariesAndBackThemWithHugePagesOnceTouched()
    {
        assumeTrue(HugePages.unavailabilityCause() == null, HugePages::unavailabilityCause);
        final long size = 64 * MIB + Segment.PAGE_SIZE_BYTES;
        for (final HugePages mode : new HugePages[] {HugePages.AUTO, HugePages.ON})
        {
            try (Segment segment = new Segment(3, "huge", size, mode))
            {
                assertThat(segment.hugePagesAdvised()).isTrue();
                assertThat(segment.address() % (2 * MIB)).isZero();
                assertThat(segment.sizeBytes()).isEqualTo(size);
                final UnsafeBuffer view = new UnsafeBuffer(segment.address(), (int)segment.sizeBytes());
                assertThat(view.getLong(0)).isZero();
                assertThat(view.getLong((int)size - 8)).isZero();
                segment.preTouch();
                view.putLong(0, 0x1122334455667788L);
                view.putLong((int)size - 8, -2L);
                assertThat(view.getLong(0)).isEqualTo(0x1122334455667788L);
                assertThat(view.getLong((int)size - 8)).isEqualTo(-2L);
                // The kernel backs touched, advised memory with huge pages (defrag "madvise" compacts on fault).
                assertThat(segment.hugePageBytes()).as("AnonHugePages of the segment after touching it")
                    .isGreaterThan(0).isLessThanOrEqualTo(size);
            }
        }
    }

    @Test
    void shouldUsePlainMemoryWhenHugePagesAreOff()
    {
        try (Segment segment = new Segment(3, "plain", MIB, HugePages.OFF))
        {
            assertThat(segment.hugePagesAdvised()).isFalse();
            assertThat(segment.hugePageBytes()).isZero();
            segment.preTouch();
        }
    }

    @Test
    void shouldSayWhyHugePagesCannotBeHad()
    {
        assertThat(hugePagesUnavailabilityCause(null, "madvise")).isNull();
        assertThat(hugePagesUnavailabilityCause(null, "always")).isNull();
        assertThat(hugePagesUnavailabilityCause(null, "never")).contains("'never'").contains("madvise");
        assertThat(hugePagesUnavailabilityCause(null, null)).contains("no transparent huge pages");
        assertThat(hugePagesUnavailabilityCause("no such file", "madvise"))
            .contains("native transfer library").contains("no such file");
        assertThat(HugePages.parse(" Auto ")).isEqualTo(HugePages.AUTO);
        assertThatThrownBy(() -> HugePages.parse("yes")).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("auto, on or off");
        assertThatThrownBy(() -> HugePages.parse(null)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldHoldWrittenBytesAtBothEnds()
    {
        try (Segment segment = new Segment(1, "s", MIB))
        {
            segment.preTouch();
            final UnsafeBuffer view = new UnsafeBuffer(segment.address(), (int)segment.sizeBytes());
            view.putByte(0, (byte)1);
            view.putByte((int)segment.sizeBytes() - 1, (byte)2);
            assertThat(view.getByte(0)).isEqualTo((byte)1);
            assertThat(view.getByte((int)segment.sizeBytes() - 1)).isEqualTo((byte)2);
        }
    }

    @Test
    void shouldCheckBoundsWithoutOverflow()
    {
        try (Segment segment = new Segment(1, "s", MIB))
        {
            final long size = segment.sizeBytes();
            assertThat(segment.contains(0, size)).isTrue();
            assertThat(segment.contains(0, 0)).isTrue();
            assertThat(segment.contains(size - 1, 1)).isTrue();
            assertThat(segment.contains(size, 0)).isTrue();

            assertThat(segment.contains(size, 1)).isFalse();
            assertThat(segment.contains(size - 1, 2)).isFalse();
            assertThat(segment.contains(0, size + 1)).isFalse();
            assertThat(segment.contains(-1, 1)).isFalse();
            assertThat(segment.contains(0, -1)).isFalse();
            assertThat(segment.contains(Long.MAX_VALUE, 1)).isFalse();
            assertThat(segment.contains(Long.MAX_VALUE - 10, 20)).isFalse();
            assertThat(segment.contains(1, Long.MAX_VALUE)).isFalse();
            assertThat(segment.contains(Long.MIN_VALUE, 10)).isFalse();
        }
    }

    @Test
    void shouldSupportSizesBeyondTwoGibibytes()
    {
        final long size = 3L << 30; // virtual memory only: nothing is touched
        try (Segment segment = new Segment(1, "big", size))
        {
            assertThat(segment.sizeBytes()).isEqualTo(size);
            assertThat(segment.contains((2L << 30) + 5, 1 << 20)).isTrue();
            assertThat(segment.contains(size - 4096, 4097)).isFalse();
            new UnsafeBuffer(segment.address() + size - 8, 8).putLong(0, 42L);
            assertThat(new UnsafeBuffer(segment.address() + size - 8, 8).getLong(0)).isEqualTo(42L);
        }
    }

    @Test
    void shouldRefuseZeroIdAndNonPositiveSize()
    {
        assertThatThrownBy(() -> new Segment(0, "s", MIB)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Segment(1, "s", 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Segment(1, "s", -5)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldFreeOnceWhenClosedTwice()
    {
        final Segment segment = new Segment(1, "s", MIB);
        assertThat(segment.isClosed()).isFalse();
        segment.close();
        segment.close();
        assertThat(segment.isClosed()).isTrue();
    }

    @Test
    void shouldGiveDistinctNonzeroIdsAndFindSegmentsById()
    {
        try (SegmentRegistry registry = new SegmentRegistry())
        {
            final Set<Integer> ids = new HashSet<>();
            for (int i = 0; i < 64; i++)
            {
                final Segment segment = registry.allocate("n/seg" + i, MIB);
                assertThat(segment.id()).isNotZero();
                assertThat(ids.add(segment.id())).isTrue();
                assertThat(registry.get(segment.id())).isSameAs(segment);
            }
            assertThat(registry.segments()).hasSize(64);
            assertThat(registry.segments().get(3).name()).isEqualTo("n/seg3");
            final int unknown = findUnused(ids);
            assertThat(registry.get(unknown)).isNull();
        }
    }

    @Test
    void shouldFreeEverySegmentWhenRegistryCloses()
    {
        final SegmentRegistry registry = new SegmentRegistry();
        final Segment a = registry.allocate("a", MIB);
        final Segment b = registry.allocate("b", MIB);
        registry.close();
        assertThat(a.isClosed()).isTrue();
        assertThat(b.isClosed()).isTrue();
        assertThat(registry.segments()).isEmpty();
        assertThat(registry.get(a.id())).isNull();
    }

    @Test
    void shouldRefuseADuplicateId()
    {
        try (SegmentRegistry registry = new SegmentRegistry(); Segment other = new Segment(5, "x", MIB))
        {
            final Segment first = new Segment(5, "y", MIB);
            registry.add(first);
            assertThatThrownBy(() -> registry.add(other)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    private static int findUnused(final Set<Integer> ids)
    {
        int candidate = 1;
        while (ids.contains(candidate))
        {
            candidate++;
        }
        return candidate;
    }
}
