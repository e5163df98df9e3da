package io.granary.cli;

import io.granary.cli.LoopbackBaseline.Result;
import io.granary.cli.LoopbackBaseline.Shape;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

class LoopbackBaselineTest
{
    private static final Duration WARMUP = Duration.ofMillis(50);
    // Long enough that a loaded 2-core CI machine still completes round trips in the window.
    private static final Duration BRIEF = Duration.ofMillis(1000);

    @Test
    void shouldMoveValuesInTheShapeOfAGet()
    {
        final Result result = LoopbackBaseline.measure(Shape.GET, 64 << 10, 1, 1, WARMUP, BRIEF, null);

        assertSane(result, Shape.GET, 64 << 10, 1, 1);
    }

    @Test
    void shouldMoveValuesInTheShapeOfAPutWithSeveralConnections()
    {
        final Result result = LoopbackBaseline.measure(Shape.PUT, 4096, 3, 1, WARMUP, BRIEF, null);

        assertSane(result, Shape.PUT, 4096, 3, 1);
    }

    @Test
    void shouldPipelineABatchPerRoundTrip()
    {
        final Result result = LoopbackBaseline.measure(Shape.GET, 4096, 2, 16, WARMUP, BRIEF, null);

        assertSane(result, Shape.GET, 4096, 2, 16);
        assertThat(result.values()).isEqualTo(result.roundTrips() * 16);
    }

    @Test
    void shouldPipelinePutsLargerThanTheReceiveBuffer()
    {
        // 2 x 3 MiB per round trip: the server reads each batch in several parts.
        final Result result = LoopbackBaseline.measure(Shape.PUT, 3 << 20, 1, 2, Duration.ZERO, BRIEF, null);

        assertSane(result, Shape.PUT, 3 << 20, 1, 2);
    }

    @Test
    void shouldStreamOneWay()
    {
        final Result result = LoopbackBaseline.measure(Shape.STREAM, 1 << 20, 1, 1, WARMUP, BRIEF, null);

        assertSane(result, Shape.STREAM, 1 << 20, 1, 1);
    }

    @Test
    void shouldLandTheValuesOfAColdPutAllOverTheRegion()
    {
        final ByteBuffer region = ByteBuffer.allocateDirect(8 << 20);

        final Result result = LoopbackBaseline.measure(Shape.PUT, 64 << 10, 2, 1, WARMUP, BRIEF, region);

        assertSane(result, Shape.PUT, 64 << 10, 2, 1);
        assertThat(result.cold()).isTrue();
        assertThat(result.describe()).startsWith("cold put 64.00 KiB c=2");
        // The values are random bytes and the region started zeroed: every 64 KiB part of it was written, once the
        // run moved more than the region (both servers wrapping around it).
        assertThat(result.values() * (64 << 10)).isGreaterThan(2L * region.capacity());
        for (int part = 0; part < region.capacity() / (64 << 10); part++)
        {
            assertThat(nonZeroBytes(region, part * (64 << 10), 64 << 10)).as("part %d", part).isPositive();
        }
    }

    @Test
    void shouldSendTheValuesOfAColdGetFromTheRegion()
    {
        final Result hot = LoopbackBaseline.measure(Shape.GET, 64 << 10, 1, 4, WARMUP, BRIEF, null);
        final Result cold = LoopbackBaseline.measure(Shape.GET, 64 << 10, 1, 4, WARMUP, BRIEF,
            ByteBuffer.allocateDirect(3 * (64 << 10) + 100));

        assertSane(cold, Shape.GET, 64 << 10, 1, 4);
        assertThat(cold.cold()).isTrue();
        assertThat(hot.cold()).isFalse();
        assertThat(hot.describe()).startsWith("get 64.00 KiB");
    }

    @Test
    void shouldRefuseAColdRegionSmallerThanAValueOrOnTheHeap()
    {
        assertThatThrownBy(() -> LoopbackBaseline.measure(Shape.GET, 4096, 1, 1, WARMUP, BRIEF,
            ByteBuffer.allocateDirect(4095))).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("at least one value");
        assertThatThrownBy(() -> LoopbackBaseline.measure(Shape.PUT, 4096, 1, 1, WARMUP, BRIEF,
            ByteBuffer.allocate(1 << 20))).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("heap buffer");
    }

    private static int nonZeroBytes(final ByteBuffer region, final int from, final int length)
    {
        int n = 0;
        for (int i = from; i < from + length; i++)
        {
            n += region.get(i) != 0 ? 1 : 0;
        }
        return n;
    }

    @Test
    void shouldRefuseAZeroBatch()
    {
        assertThatThrownBy(() -> LoopbackBaseline.measure(Shape.GET, 4096, 1, 0, WARMUP, BRIEF, null))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batch");
    }

    @Test
    void shouldRefuseAnEmptyValue()
    {
        assertThatThrownBy(() -> LoopbackBaseline.measure(Shape.PUT, 0, 1, 1, WARMUP, BRIEF, null))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("valueBytes");
    }

    private static void assertSane(
        final Result result, final Shape shape, final int valueBytes, final int concurrency, final int batch)
    {
        assertThat(result.shape()).isEqualTo(shape);
        assertThat(result.valueBytes()).isEqualTo(valueBytes);
        assertThat(result.concurrency()).isEqualTo(concurrency);
        assertThat(result.batch()).isEqualTo(batch);
        assertThat(result.roundTrips()).isPositive();
        assertThat(result.values()).isEqualTo(result.roundTrips() * batch);
        // The measured part is the requested duration plus at most the tail of the last round trips.
        assertThat(result.seconds()).isGreaterThan(0.1).isLessThan(30);
        assertThat(result.gbPerSecond()).isPositive()
            .isCloseTo(result.values() * (double)valueBytes / result.elapsedNs(), offset(1e-9));
        // Far above anything loopback can carry: catches a counting error, not a slow machine.
        assertThat(result.gbPerSecond()).isLessThan(1000);
        assertThat(result.valuesPerSecond()).isPositive();
        assertThat(result.p50Ms()).isPositive().isLessThanOrEqualTo(result.p99Ms());
        assertThat(result.p99Ms()).isLessThanOrEqualTo(result.maxMs());
        assertThat(result.describe()).startsWith((result.cold() ? "cold " : "") + shape.label() + " ").contains("GB/s");
    }
}
