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
