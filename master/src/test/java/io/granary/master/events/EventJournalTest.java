package io.granary.master.events;

import io.granary.common.ManualClock;
import io.granary.proto.KvEventReason;
import io.granary.proto.KvEventType;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import static org.assertj.core.api.Assertions.assertThat;

class EventJournalTest
{
    private static byte[] key(final String k)
    {
        return k.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void shouldStartWithClearedAtSequenceZeroAndNumberWithoutGaps()
    {
        final EventJournal journal = new EventJournal(16, 42, new ManualClock());

        assertThat(journal.nextSequence()).isEqualTo(1);
        final KvEventRecord first = journal.read(0);
        assertThat(first.type()).isEqualTo(KvEventType.KV_EVENT_CLEARED);
        assertThat(first.reason()).isEqualTo(KvEventReason.KV_REASON_MASTER_START);
        assertThat(first.tenant()).isEmpty();

        assertThat(journal.stored("t", key("a"), null, 10, false)).isEqualTo(1);
        assertThat(journal.removed("t", key("a"), "g", 10, KvEventReason.KV_REASON_EVICTED)).isEqualTo(2);
        assertThat(journal.read(1).key()).isEqualTo("a");
        assertThat(journal.read(2).groupId()).isEqualTo("g");
        assertThat(journal.read(3)).as("not yet written").isNull();
    }

    @Test
    void shouldReportOverwrittenOnceTheRingWentRound()
    {
        final EventJournal journal = new EventJournal(16, 42, new ManualClock());
        for (int i = 0; i < 40; i++)
        {
            journal.stored("t", key("k" + i), null, 1, false);
        }
        assertThat(journal.nextSequence()).isEqualTo(41);
        assertThat(journal.oldestRetained()).isEqualTo(25);
        assertThat(journal.read(10)).isSameAs(EventJournal.OVERWRITTEN);
        assertThat(journal.read(24)).isSameAs(EventJournal.OVERWRITTEN);
        assertThat(journal.read(25).key()).isEqualTo("k24");
        assertThat(journal.read(40).key()).isEqualTo("k39");
        assertThat(journal.read(41)).isNull();
    }

    @Test
    void shouldGiveConcurrentWritersEverySequenceExactlyOnceAndKeepEachWritersOrder() throws Exception
    {
        final int writers = 4;
        final int perWriter = 20_000;
        final EventJournal journal = new EventJournal(1 << 17, 42, new ManualClock());
        final CountDownLatch start = new CountDownLatch(1);
        final List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < writers; w++)
        {
            final String tenant = "w" + w;
            final Thread t = new Thread(() ->
            {
                try
                {
                    start.await();
                }
                catch (final InterruptedException ex)
                {
                    return;
                }
                for (int i = 0; i < perWriter; i++)
                {
                    journal.stored(tenant, key(Integer.toString(i)), null, i, false);
                }
            });
            t.start();
            threads.add(t);
        }
        start.countDown();
        // Read concurrently, in sequence order, as the dispatcher does.
        final int total = writers * perWriter + 1;
        final int[] nextPerWriter = new int[writers];
        final Set<Long> seen = new HashSet<>();
        long sequence = 1;
        final long deadline = System.nanoTime() + 30_000_000_000L;
        while (sequence < total)
        {
            final KvEventRecord e = journal.read(sequence);
            assertThat(e).isNotSameAs(EventJournal.OVERWRITTEN);
            if (e == null)
            {
                assertThat(System.nanoTime()).as("reader stuck at " + sequence).isLessThan(deadline);
                Thread.onSpinWait();
                continue;
            }
            assertThat(e.sequence()).isEqualTo(sequence);
            assertThat(seen.add(e.sequence())).isTrue();
            final int w = e.tenant().charAt(1) - '0';
            assertThat(e.key()).as("writer " + w + " order").isEqualTo(Integer.toString(nextPerWriter[w]));
            nextPerWriter[w]++;
            sequence++;
        }
        for (final Thread t : threads)
        {
            t.join();
        }
        assertThat(journal.nextSequence()).isEqualTo(total);
        assertThat(nextPerWriter).containsOnly(perWriter);
    }
}
