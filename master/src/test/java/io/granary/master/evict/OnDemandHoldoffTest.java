package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * An on-demand round scans every object on the RPC thread that asked for it. When one freed nothing (everything
 * leased, pinned or unfinished), the next within {@link Evictor#FRUITLESS_HOLDOFF_NS} answers at once, unless a put
 * completed or a soft pin changed since; after that time a round runs again.
 */
class OnDemandHoldoffTest
{
    private static final long PAGE = 64 << 10;

    @Test
    void shouldNotRescanAPoolFullOfLeasedObjectsForEveryPut()
    {
        final MetadataFixture f = new MetadataFixture(8).mount("node-a", 16 * PAGE);
        final Evictor evictor = f.evictor(1.0, 0.05, false);
        f.start("unfinished", PAGE);
        for (int i = 0; i < 15; i++)
        {
            f.clock.advance(Duration.ofMillis(1));
            f.put("k" + i, PAGE);
            assertThat(f.store.exists(T, "k" + i, true)).isEqualTo(1); // leased for 10 s
        }

        assertThat(f.putCode(T, "x", PAGE, PutOptions.getDefaultInstance())).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(evictor.onDemandRounds()).isEqualTo(1);
        assertThat(f.putCode(T, "y", PAGE, PutOptions.getDefaultInstance())).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(evictor.onDemandRounds()).as("no second scan with nothing changed").isEqualTo(1);
        assertThat(evictor.heldOffRounds()).isEqualTo(1);

        f.clock.advance(Duration.ofMillis(101));
        assertThat(f.putCode(T, "y", PAGE, PutOptions.getDefaultInstance())).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(evictor.onDemandRounds()).as("the hold-off is over: a round again").isEqualTo(2);

        // A put completing makes a candidate: the next failed allocation scans at once and takes it.
        assertThat(f.store.putEnd(T, CLIENT, "unfinished")).isEqualTo(OK_VALUE);
        assertThat(f.putCode(T, "y", PAGE, PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
        assertThat(evictor.onDemandRounds()).isEqualTo(3);
        assertThat(f.present("unfinished")).as("evicted for y").isFalse();
        assertThat(evictor.heldOffRounds()).isEqualTo(1);
        assertThat(f.store.allocationFailures()).isEqualTo(3);
    }

    @Test
    void shouldHoldOffTheObjectBudgetsRoundsAlike()
    {
        final MetadataFixture f = new MetadataFixture(8, 0, 4).mount("node-a", 64 * PAGE);
        final Evictor evictor = f.evictor(1.0, 0.25, false);
        for (int i = 0; i < 4; i++)
        {
            f.clock.advance(Duration.ofMillis(1));
            f.put("k" + i, PAGE);
            assertThat(f.store.exists(T, "k" + i, true)).isEqualTo(1);
        }

        for (int i = 0; i < 5; i++)
        {
            assertThat(f.putCode(T, "x" + i, PAGE, PutOptions.getDefaultInstance())).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        }
        assertThat(evictor.onDemandRounds()).isEqualTo(1);
        assertThat(evictor.heldOffRounds()).isEqualTo(4);
        assertThat(f.store.objectBudgetRefusals()).isEqualTo(5);

        f.clock.advance(Duration.ofSeconds(11)); // the leases run out (and the hold-off with them)
        assertThat(f.putCode(T, "x5", PAGE, PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
        assertThat(evictor.onDemandRounds()).isEqualTo(2);
        assertThat(f.present("k0")).isFalse();
    }
}
