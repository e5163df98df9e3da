package io.granary.master.segment;

import io.granary.proto.FreedExtent;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class FreedExtentsTest
{
    @Test
    void shouldHandOutFreesOldestFirstInBoundedBatches()
    {
        final FreedExtents freed = new FreedExtents();
        for (int i = 0; i < 5; i++)
        {
            freed.add(7, i * 64L, 100 + i);
        }

        assertThat(freed.drain(3)).extracting(FreedExtent::getOffset).containsExactly(0L, 64L, 128L);
        assertThat(freed.size()).isEqualTo(2);
        assertThat(freed.drain(10)).extracting(FreedExtent::getVersion).containsExactly(103L, 104L);
        assertThat(freed.drain(10)).isEmpty();
    }

    @Test
    void shouldKeepTheOrderAcrossWrapsGrowthAndAShrinkOnceDrained()
    {
        final FreedExtents freed = new FreedExtents();
        long next = 0;
        long expected = 0;
        // interleave adds and drains so the ring wraps, then grow it well past its first size while it holds a wrap
        for (int round = 0; round < 5; round++)
        {
            for (int i = 0; i < 700; i++)
            {
                freed.add(round, next * 64, next);
                next++;
            }
            for (final FreedExtent f : freed.drain(500))
            {
                assertThat(f.getVersion()).isEqualTo(expected);
                assertThat(f.getOffset()).isEqualTo(expected * 64);
                expected++;
            }
        }
        for (int i = 0; i < 5000; i++)
        {
            freed.add(9, next * 64, next);
            next++;
        }
        assertThat(freed.size()).isEqualTo((int)(next - expected));
        while (freed.size() > 0)
        {
            for (final FreedExtent f : freed.drain(FreedExtents.MAX_PER_HEARTBEAT))
            {
                assertThat(f.getVersion()).isEqualTo(expected);
                expected++;
            }
        }
        assertThat(expected).isEqualTo(next);
        freed.add(3, 64, 1); // after the shrink
        assertThat(freed.drain(10)).extracting(FreedExtent::getSegmentId).containsExactly(3);
        assertThat(freed.dropped()).isZero();
    }

    @Test
    void shouldDropTheOldestFreesBeyondItsBoundAndCountThem()
    {
        final FreedExtents freed = new FreedExtents();
        for (int i = 0; i < FreedExtents.MAX_QUEUED + 3; i++)
        {
            freed.add(1, i, 1);
        }

        assertThat(freed.size()).isEqualTo(FreedExtents.MAX_QUEUED);
        assertThat(freed.dropped()).isEqualTo(3);
        assertThat(freed.drain(1)).extracting(FreedExtent::getOffset).containsExactly(3L);
    }
}
