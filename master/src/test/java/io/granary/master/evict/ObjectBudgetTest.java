package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_ALREADY_EXISTS_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The master's object budget ({@code --max-objects}): metadata must not outgrow the heap, however much room the
 * segments have. A put that would pass the budget evicts first (oldest lease first, like a put finding no room), is
 * refused with NO_AVAILABLE_HANDLE when nothing may go, and the background round keeps the count below the budget's
 * high watermark.
 */
class ObjectBudgetTest
{
    private static final long PAGE = 4096;

    /** A pool with room for far more values than the budget: only the budget can stop a put. */
    private static MetadataFixture fixture(final long maxObjects)
    {
        return new MetadataFixture(8, 0, maxObjects).mount("node-a", 64L << 20);
    }

    private static void fill(final MetadataFixture f, final int from, final int to)
    {
        for (int i = from; i < to; i++)
        {
            f.clock.advance(Duration.ofMillis(1)); // distinct ages, k0 the oldest
            f.put("k" + i, PAGE);
        }
    }

    @Test
    void shouldEvictTheOldestObjectsWhenAPutWouldPassTheBudget()
    {
        final MetadataFixture f = fixture(20);
        final Evictor evictor = f.evictor(1.0, 0.1, false); // a round frees 10 % of the budget: 2 objects
        fill(f, 0, 20);
        assertThat(f.store.objectCount()).isEqualTo(20);
        assertThat(evictor.onDemandRounds()).isZero();

        f.clock.advance(Duration.ofMillis(1));
        f.put("k20", PAGE);

        assertThat(f.present("k0")).as("oldest").isFalse();
        assertThat(f.present("k1")).as("second oldest").isFalse();
        for (int i = 2; i <= 20; i++)
        {
            assertThat(f.present("k" + i)).as("k" + i).isTrue();
        }
        assertThat(f.store.objectCount()).isEqualTo(19);
        assertThat(evictor.onDemandRounds()).isEqualTo(1);
        assertThat(evictor.evictedObjects(0)).isEqualTo(2);
        assertThat(f.store.objectBudgetRefusals()).isZero();
        assertThat(f.store.allocationFailures()).as("the pool had room all along").isZero();

        f.clock.advance(Duration.ofMillis(1));
        f.put("k21", PAGE); // fits the room the round left: no second round
        assertThat(evictor.onDemandRounds()).isEqualTo(1);
        assertThat(f.store.objectCount()).isEqualTo(20);
    }

    @Test
    void shouldRefuseANewKeyWhenNothingMayBeEvictedAndAnswerExistingKeysAsBefore()
    {
        final MetadataFixture f = fixture(5);
        final Evictor evictor = f.evictor(1.0, 0.2, false);
        fill(f, 0, 5);
        for (int i = 0; i < 5; i++)
        {
            f.clock.advance(Duration.ofMillis(1)); // leases end in the order taken, k0's first
            assertThat(f.store.exists(T, "k" + i, true)).as("read k" + i).isEqualTo(1); // a lease: not evictable
        }

        assertThat(f.putCode(T, "k5", PAGE, PutOptions.getDefaultInstance())).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(f.store.objectBudgetRefusals()).isEqualTo(1);
        assertThat(f.store.objectCount()).isEqualTo(5);
        assertThat(f.present("k5")).isFalse();
        for (int i = 0; i < 5; i++)
        {
            assertThat(f.present("k" + i)).as("leased k" + i + " kept").isTrue();
        }
        // A put of a key already there is answered as always: the budget only bounds new objects.
        assertThat(f.putCode(T, "k3", PAGE, PutOptions.getDefaultInstance())).isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(f.store.objectBudgetRefusals()).isEqualTo(1);

        f.clock.advance(Duration.ofSeconds(11)); // the leases (10 s) run out
        assertThat(f.putCode(T, "k5", PAGE, PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
        assertThat(f.present("k0")).as("oldest, now evictable").isFalse();
        assertThat(f.store.objectCount()).isLessThanOrEqualTo(5);
        assertThat(evictor.evictedObjects(0)).isEqualTo(1);
    }

    @Test
    void shouldLetTheSameClientRetryAnUnfinishedPutAtTheBudget()
    {
        final MetadataFixture f = fixture(3);
        fill(f, 0, 2);
        f.start("k2", PAGE); // the third object: the budget is reached with a put in flight
        final ArrayList<io.granary.proto.Replica> first = new ArrayList<>();
        final ArrayList<io.granary.proto.Replica> again = new ArrayList<>();
        assertThat(f.store.putStart(T, CLIENT, "k3", PAGE, PutOptions.getDefaultInstance(), first))
            .as("no evictor: a new key is refused").isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(first).isEmpty();
        assertThat(f.store.putStart(T, CLIENT, "k2", PAGE, PutOptions.getDefaultInstance(), again))
            .as("a retried PutStart of the put in flight").isEqualTo(OK_VALUE);
        assertThat(again).hasSize(1);
        assertThat(f.store.putEnd(T, CLIENT, "k2")).isEqualTo(OK_VALUE);
        assertThat(f.store.objectCount()).isEqualTo(3);
    }

    @Test
    void shouldBringTheCountBelowTheBudgetsWatermarkInTheBackground()
    {
        final MetadataFixture f = fixture(20);
        final Evictor evictor = f.evictor(0.9, 0.2, false);
        fill(f, 0, 18);
        assertThat(evictor.maybeEvict()).as("at the watermark (18 of 20), not above").isNull();

        fill(f, 18, 19);
        final Evictor.Result round = evictor.maybeEvict();

        // Above 0.9 x 20: down to (0.9 - 0.2) x 20 = 14 objects, the oldest going.
        assertThat(round).isNotNull();
        assertThat(round.totalObjects()).isEqualTo(5);
        assertThat(f.store.objectCount()).isEqualTo(14);
        for (int i = 0; i < 19; i++)
        {
            assertThat(f.present("k" + i)).as("k" + i).isEqualTo(i >= 5);
        }
        assertThat(evictor.onDemandRounds()).isZero();
        assertThat(f.store.objectBudgetRefusals()).isZero();
    }

    @Test
    void shouldEvictByCountWhenTheOldestObjectsAreSmallerThanTheAverage()
    {
        final MetadataFixture f = fixture(10);
        final Evictor evictor = f.evictor(1.0, 0.1, false); // one object's worth of the average size per round
        for (int i = 0; i < 10; i++)
        {
            f.clock.advance(Duration.ofMillis(1));
            f.put("k" + i, i < 5 ? 64 : 64 * PAGE); // the oldest half tiny, the rest 256 KiB
        }

        f.clock.advance(Duration.ofMillis(1));
        f.put("k10", PAGE);

        // The round's target is one object of the average size (131,104 bytes): the five tiny ones do not cover it,
        // so the oldest large one goes too. More room than the put needed, never less.
        for (int i = 0; i <= 10; i++)
        {
            assertThat(f.present("k" + i)).as("k" + i).isEqualTo(i > 5);
        }
        assertThat(evictor.evictedObjects(0)).isEqualTo(6);
        assertThat(f.store.objectCount()).isEqualTo(5);
        assertThat(f.store.objectBudgetRefusals()).isZero();
    }
}
