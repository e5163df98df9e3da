package io.granary.transfer.natives;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class StagingPoolTest
{
    @Test
    void shouldHandOutDirectBuffersOfThePowerOfTwoAtOrAboveTheLength()
    {
        final StagingPool pool = new StagingPool(4L << 20);

        assertThat(pool.acquire(1).capacity()).isEqualTo(4096);
        assertThat(pool.acquire(4096).capacity()).isEqualTo(4096);
        assertThat(pool.acquire(4097).capacity()).isEqualTo(8192);
        assertThat(pool.acquire(1 << 20).capacity()).isEqualTo(1 << 20);
        final ByteBuffer large = pool.acquire((1 << 20) + 1);
        assertThat(large.capacity()).as("above the largest class: exactly the length").isEqualTo((1 << 20) + 1);
        assertThat(large.isDirect()).isTrue();
        assertThat(pool.acquire(100).isDirect()).isTrue();
    }

    @Test
    void shouldReuseWhatCameBackClearedAndOnlyForItsOwnSize()
    {
        final StagingPool pool = new StagingPool(4L << 20);
        final ByteBuffer first = pool.acquire(5000);
        first.position(17).limit(100);
        pool.release(first);
        assertThat(pool.idleBytes()).isEqualTo(8192);

        assertThat(pool.acquire(4096)).as("another size class").isNotSameAs(first);
        final ByteBuffer again = pool.acquire(8000);
        assertThat(again).isSameAs(first);
        assertThat(again.position()).isZero();
        assertThat(again.limit()).isEqualTo(8192);
        assertThat(pool.idleBytes()).isZero();
        assertThat(pool.acquire(8000)).as("taken: a new one").isNotSameAs(first);
    }

    @Test
    void shouldKeepNoMoreIdleBytesThanItsCapacityNorForeignOrLargeBuffers()
    {
        final StagingPool pool = new StagingPool(1 << 20);
        final ByteBuffer small = pool.acquire(4096);
        pool.release(pool.acquire(1 << 20));
        assertThat(pool.idleBytes()).isEqualTo(1 << 20);
        pool.release(small);
        assertThat(pool.idleBytes()).as("full: the GC gets the rest").isEqualTo(1 << 20);
        assertThat(pool.acquire(4096)).as("the dropped one was not kept").isNotSameAs(small);

        final StagingPool other = new StagingPool(1 << 20);
        other.release(ByteBuffer.allocate(4096)); // a heap buffer is never handed out as staging
        other.release(ByteBuffer.allocateDirect(5000)); // not a size the pool hands out
        other.release(ByteBuffer.allocateDirect((1 << 20) + 1)); // a large transfer's own buffer
        assertThat(other.idleBytes()).isZero();

        assertThatThrownBy(() -> new StagingPool(1000)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("at least");
    }
}
