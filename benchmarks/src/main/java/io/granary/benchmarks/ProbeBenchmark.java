package io.granary.benchmarks;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.KeyBatch;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.LeaseMode;
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
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Master-side cost of the lookup paths an engine calls per request, without any transport, on the
 * keys as the lookup port decodes them (bytes + hashes; one variant starts from Strings as gRPC does):
 * BatchProbeKey NONE and LAST_HIT_ONLY over 128 candidates x 5 keys (640 keys, the RFC's
 * follow-up benchmark shape), and BatchExistKey over the same 640 keys. The store holds 100k
 * other objects so shards are not trivially small.
 *
 * <p>{@code layout}: ALL_PRESENT (the last candidate is complete: LastHitOnly locks and leases 5
 * keys), HALF_PRESENT (candidates 0..63 complete; the scan misses 320 keys), NONE_PRESENT.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ProbeBenchmark
{
    static final int CANDIDATES = 128;
    static final int CANDIDATE_SIZE = 5;
    static final String TENANT = "default";

    public enum Layout
    {
        ALL_PRESENT, HALF_PRESENT, NONE_PRESENT
    }

    @Param({"ALL_PRESENT", "HALF_PRESENT"})
    public Layout layout;

    private MetadataStore store;
    private BatchProbe probe;
    private List<String> keys;
    /** The keys as the lookup port hands them to the store: bytes and hashes, no Strings. */
    private KeyBatch batch;

    @Setup
    public void setUp()
    {
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        registry.mount("node", "node", "127.0.0.1:7000", 1, "node/seg0", 64L << 30);
        store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        probe = new BatchProbe(store);
        for (int i = 0; i < 100_000; i++)
        {
            put("background/" + i);
        }
        keys = new ArrayList<>(CANDIDATES * CANDIDATE_SIZE);
        for (int c = 0; c < CANDIDATES; c++)
        {
            for (int r = 0; r < CANDIDATE_SIZE; r++)
            {
                final String key = "model/w5/kda" + (c * 128) + "/r" + r;
                keys.add(key);
                final boolean present = layout == Layout.ALL_PRESENT || (layout == Layout.HALF_PRESENT && c < CANDIDATES / 2);
                if (present)
                {
                    put(key);
                }
            }
        }
        batch = KeyBatch.of(keys);
    }

    private void put(final String key)
    {
        store.putStart(TENANT, "bench", key, 4096, PutOptions.getDefaultInstance(), new ArrayList<>());
        store.putEnd(TENANT, "bench", key);
    }

    @Benchmark
    public void probeNone(final Blackhole bh)
    {
        final boolean[] mask = new boolean[keys.size()];
        bh.consume(probe.probe(TENANT, LeaseMode.LEASE_MODE_NONE, 0, batch, mask, new int[keys.size()]));
        bh.consume(mask);
    }

    @Benchmark
    public void probeLastHitOnly(final Blackhole bh)
    {
        final boolean[] mask = new boolean[keys.size()];
        bh.consume(probe.probe(TENANT, LeaseMode.LEASE_MODE_LAST_HIT_ONLY, CANDIDATE_SIZE, batch, mask, new int[keys.size()]));
        bh.consume(mask);
    }

    /** The same probe from Strings, as the gRPC path calls it (UTF-8 encoding and hashing included). */
    @Benchmark
    public void probeLastHitOnlyFromStrings(final Blackhole bh)
    {
        final boolean[] mask = new boolean[keys.size()];
        bh.consume(probe.probe(TENANT, LeaseMode.LEASE_MODE_LAST_HIT_ONLY, CANDIDATE_SIZE, keys, mask, new int[keys.size()]));
        bh.consume(mask);
    }

    @Benchmark
    public void probeLongestPrefix(final Blackhole bh)
    {
        final boolean[] mask = new boolean[keys.size()];
        bh.consume(probe.probe(TENANT, LeaseMode.LEASE_MODE_LONGEST_PREFIX, CANDIDATE_SIZE, batch, mask, new int[keys.size()]));
        bh.consume(mask);
    }

    @Benchmark
    public void batchExistKey(final Blackhole bh)
    {
        final int[] out = new int[keys.size()];
        store.existsBatch(TENANT, batch, true, out);
        bh.consume(out);
    }
}
