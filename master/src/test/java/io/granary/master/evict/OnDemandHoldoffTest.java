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
 * A round scans every object, an on-demand one on the RPC thread that asked for it. When one freed nothing
 * (everything leased, pinned or unfinished), an on-demand round within {@link Evictor#FRUITLESS_HOLDOFF_NS} answers at
 * once and the background check waits {@link Evictor#FRUITLESS_BACKGROUND_HOLDOFF_NS}, unless a put completed or a soft
 * pin changed since; after that time a round runs again.
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
    void shouldNotRescanEveryHundredMillisecondsInTheBackground()
    {
        final MetadataFixture f = new MetadataFixture(8, 0, 10).mount("node-a", 64 * PAGE);
        final Evictor evictor = f.evictor(0.5, 0.1, false); // above 5 of the 10 objects allowed: evict
        for (int i = 0; i < 8; i++)
        {
            f.clock.advance(Duration.ofMillis(1));
            f.put("k" + i, PAGE);
            assertThat(f.store.exists(T, "k" + i, true)).isEqualTo(1);
        }

        final Evictor.Result first = evictor.maybeEvict();
        assertThat(first).isNotNull();
        assertThat(first.totalObjects()).as("everything leased").isZero();
        for (int check = 0; check < 9; check++) // the background thread's checks over the next 900 ms
        {
            f.clock.advance(Duration.ofMillis(100));
            assertThat(evictor.maybeEvict()).as("check %d", check).isNull();
        }
        assertThat(evictor.rounds()).isEqualTo(1);
        assertThat(evictor.heldOffRounds()).isEqualTo(9);

        f.clock.advance(Duration.ofMillis(100)); // 1 s after the fruitless round: look again
        assertThat(evictor.maybeEvict()).isNotNull();
        assertThat(evictor.rounds()).isEqualTo(2);

        f.put("fresh", PAGE); // a completed put is a candidate: the next check evicts at once
        final Evictor.Result round = evictor.maybeEvict();
        assertThat(round).isNotNull();
        assertThat(round.totalObjects()).isEqualTo(1);
        assertThat(f.present("fresh")).isFalse();
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
