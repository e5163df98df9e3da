package io.granary.benchmarks;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.events.EventJournal;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.PutOptions;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * What KV events cost the metadata hot path: a put (PutStart + PutEnd, one STORED event) and a remove (one REMOVED
 * event) on the store itself, without transport, with events off and on (journal of 65536 events, the default).
 * The dispatcher is not running: subscribers read on their own thread and never touch this path. The store holds
 * 100k other objects. {@code @Threads(2)} variants show the cost under two writers contending for the sequence;
 * {@code journalAppend*} measure the append alone ({@code events} does not apply to them).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class EventCostBenchmark
{
    static final String TENANT = "default";
    static final int KEYS = 4096;

    @Param({"OFF", "ON"})
    public String events;

    private MetadataStore store;
    private String[] keys;

    @Setup
    public void setUp()
    {
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        registry.mount("node", "node", "127.0.0.1:7000", 1, "node/seg0", 64L << 30);
        store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        if ("ON".equals(events))
        {
            store.eventJournal(new EventJournal(65_536, 1, Clock.SYSTEM));
        }
        for (int i = 0; i < 100_000; i++)
        {
            put("background/" + i);
        }
        keys = new String[KEYS * 2];
        for (int i = 0; i < keys.length; i++)
        {
            keys[i] = "model/w5/kda" + i + "/r0";
        }
    }

    private void put(final String key)
    {
        store.putStart(TENANT, "bench", key, 4096, PutOptions.getDefaultInstance(), new ArrayList<>());
        store.putEnd(TENANT, "bench", key);
    }

    /** Per thread: its own half of the keys, so that two threads never put the same key. */
    @State(Scope.Thread)
    public static class Cursor
    {
        private static final java.util.concurrent.atomic.AtomicInteger THREADS =
            new java.util.concurrent.atomic.AtomicInteger();
        final int base = (THREADS.getAndIncrement() & 1) * KEYS;
        int next;
        final List<io.granary.proto.Replica> replicas = new ArrayList<>(1);
    }

    private int putThenRemove(final Cursor c)
    {
        final String key = keys[c.base + (c.next++ & (KEYS - 1))];
        c.replicas.clear();
        store.putStart(TENANT, "bench", key, 4096, PutOptions.getDefaultInstance(), c.replicas);
        store.putEnd(TENANT, "bench", key);
        return store.remove(TENANT, key, false);
    }

    /** PutStart + PutEnd + Remove of one key: two events when on. */
    @Benchmark
    public int putThenRemove1Thread(final Cursor c)
    {
        return putThenRemove(c);
    }

    @Benchmark
    @Threads(2)
    public int putThenRemove2Threads(final Cursor c)
    {
        return putThenRemove(c);
    }

    /** What events add to one change, alone: one append to the journal (the ON case of the benchmarks above). */
    @State(Scope.Benchmark)
    public static class JournalOnly
    {
        final EventJournal journal = new EventJournal(65_536, 1, Clock.SYSTEM);
        final byte[] key = "model/w5/kda128/r0".getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    @Benchmark
    public long journalAppend1Thread(final JournalOnly j)
    {
        return j.journal.stored(TENANT, j.key, null, 4096, false);
    }

    @Benchmark
    @Threads(2)
    public long journalAppend2Threads(final JournalOnly j)
    {
        return j.journal.stored(TENANT, j.key, null, 4096, false);
    }
}
