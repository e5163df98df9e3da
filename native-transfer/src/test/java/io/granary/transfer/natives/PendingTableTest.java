package io.granary.transfer.natives;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PendingTableTest
{
    private record Entry(long id)
    {
    }

    private static PendingTable<Entry> table(final int slots)
    {
        return new PendingTable<>(slots, Entry::id);
    }

    @Test
    void shouldGiveBackEachEntryOnceWhetherItSatInItsSlotOrOverflowed()
    {
        final PendingTable<Entry> table = table(4);
        final Entry[] entries = new Entry[10];
        for (int id = 1; id < entries.length; id++)
        {
            entries[id] = new Entry(id);
            table.add(id, entries[id]); // ids 5..9 find their slots taken by 1..4: they overflow
        }
        assertThat(table.size()).isEqualTo(9);
        assertThat(table.remove(6)).isSameAs(entries[6]); // from the overflow, its slot held id 2
        assertThat(table.remove(6)).isNull();
        assertThat(table.remove(2)).isSameAs(entries[2]);
        assertThat(table.remove(2)).isNull();
        assertThat(table.remove(42)).isNull();
        table.add(10, new Entry(10)); // slot 2 is free again
        assertThat(table.remove(10)).isEqualTo(new Entry(10));

        final List<Entry> left = table.drain();
        assertThat(left).containsExactlyInAnyOrder(entries[1], entries[3], entries[4], entries[5], entries[7],
            entries[8], entries[9]);
        assertThat(table.isEmpty()).isTrue();
        assertThat(table.drain()).isEmpty();
        assertThatThrownBy(() -> table(12)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldNeitherLoseNorDuplicateEntriesWhileThreadsAddAndOneRemoves() throws InterruptedException
    {
        final PendingTable<Entry> table = table(64);
        final AtomicLong ids = new AtomicLong(1);
        final ConcurrentLinkedQueue<Long> added = new ConcurrentLinkedQueue<>();
        final int perThread = 50_000;
        final List<Thread> adders = new ArrayList<>();
        for (int t = 0; t < 3; t++)
        {
            final Thread adder = new Thread(() ->
            {
                for (int i = 0; i < perThread; i++)
                {
                    final long id = ids.getAndIncrement();
                    table.add(id, new Entry(id));
                    added.add(id);
                }
            });
            adders.add(adder);
            adder.start();
        }
        final Set<Long> removed = new HashSet<>();
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (removed.size() < 3 * perThread && System.nanoTime() < deadline)
        {
            final Long id = added.poll();
            if (id != null)
            {
                final Entry entry = table.remove(id);
                assertThat(entry).as("entry %d", id).isNotNull();
                assertThat(entry.id()).isEqualTo(id);
                assertThat(removed.add(id)).isTrue();
                assertThat(table.remove(id)).isNull();
            }
        }
        for (final Thread adder : adders)
        {
            adder.join();
        }
        assertThat(removed).hasSize(3 * perThread);
        assertThat(table.isEmpty()).isTrue();
        assertThat(table.drain()).isEmpty();
    }
}
