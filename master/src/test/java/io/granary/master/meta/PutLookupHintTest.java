package io.granary.master.meta;

import io.granary.common.ManualClock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A put of a key its home index shows no entry for skips the locked lookup of an existing object
 * ({@link KeyIndex#mayContain}, read without the lock); an object found when inserting after all sends it through the
 * lookup, so that every answer is the one the locked path gives.
 */
class PutLookupHintTest
{
    private static final String T = "default";
    private static final long SEGMENT_BYTES = 64L << 20;

    private ManualClock clock;
    private MetadataStore store;
    private MountedSegment segment;

    @BeforeEach
    void setUp()
    {
        clock = new ManualClock();
        final SegmentRegistry registry = new SegmentRegistry(clock,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        store = new MetadataStore(new MetadataStore.Settings(), clock, registry);
        assertThat(registry.mount("node-1", "node-1", "127.0.0.1:7001", 11, "node-1/seg0", SEGMENT_BYTES).code)
            .isEqualTo(OK_VALUE);
        segment = registry.liveSegments()[0];
    }

    @Test
    void shouldSeeEveryEntryAnIndexHoldsAndNoneItLost()
    {
        final KeyIndex index = new KeyIndex();
        final List<ObjectMeta> metas = new ArrayList<>();
        assertThat(index.mayContain(42)).isFalse();
        // Hashes that share their low bits collide into runs; 5,000 entries make the arrays double many times.
        for (int i = 1; i <= 5_000; i++)
        {
            final long hash = ((long)i << 32) | (i % 7);
            final ObjectMeta m = new ObjectMeta(T, ("k" + i).getBytes(StandardCharsets.UTF_8), hash, 0, 1, "c", 0,
                false, null, new ReplicaRecord[0], 0);
            index.put(m);
            metas.add(m);
        }
        assertThat(metas).allSatisfy(m -> assertThat(index.mayContain(m.hash)).isTrue());
        assertThat(index.mayContain((9_999L << 32) | 3)).isFalse();
        for (int i = 0; i < metas.size(); i += 2)
        {
            assertThat(index.remove(metas.get(i))).isTrue();
        }
        for (int i = 0; i < metas.size(); i++)
        {
            assertThat(index.mayContain(metas.get(i).hash)).as("entry %d", i).isEqualTo(i % 2 == 1);
        }
    }

    @Test
    void shouldChangeNothingAndAskForTheLookupWhenAnAssumedAbsentKeyIsThere()
    {
        final List<Replica> first = new ArrayList<>();
        assertThat(store.putStart(T, "client-a", "k", 4096, options(), first)).isEqualTo(OK_VALUE);
        final long allocated = segment.allocatedBytes();

        // As if the read without the lock had missed it (a rehash in between): an unfinished put of the same client.
        assertThat(skippingLookup("client-a", "k")).isEqualTo(MetadataStore.RETRY_WITH_LOOKUP);
        assertThat(segment.allocatedBytes()).isEqualTo(allocated);
        assertThat(store.objectCount()).isEqualTo(1);

        // The locked path's answers, which the retry gives: the same extents to the same client, a refusal to another.
        final List<Replica> again = new ArrayList<>();
        assertThat(store.putStart(T, "client-a", "k", 4096, options(), again)).isEqualTo(OK_VALUE);
        assertThat(again).extracting(Replica::getOffset).isEqualTo(first.stream().map(Replica::getOffset).toList());
        assertThat(store.putStart(T, "client-b", "k", 4096, options(), new ArrayList<>()))
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(store.putEnd(T, "client-a", "k")).isEqualTo(OK_VALUE);
        assertThat(skippingLookup("client-b", "k")).isEqualTo(MetadataStore.RETRY_WITH_LOOKUP);
        assertThat(segment.allocatedBytes()).isEqualTo(allocated);
        assertThat(store.retriedPutLookups()).isEqualTo(2);
    }

    @Test
    void shouldReplaceAStaleUnfinishedPutThroughThePublicPathWhateverTheHintSays()
    {
        assertThat(store.putStart(T, "client-a", "k", 4096, options(), new ArrayList<>())).isEqualTo(OK_VALUE);
        clock.advance(Duration.ofNanos(new MetadataStore.Settings().putDiscardTimeoutNs + 1));

        assertThat(skippingLookup("client-b", "k")).isEqualTo(MetadataStore.RETRY_WITH_LOOKUP);
        assertThat(store.putStart(T, "client-b", "k", 4096, options(), new ArrayList<>())).isEqualTo(OK_VALUE);
        assertThat(store.putEnd(T, "client-b", "k")).isEqualTo(OK_VALUE);
        assertThat(store.objectCount()).isEqualTo(1);
    }

    @Test
    void shouldLetExactlyOneOfManyRacingPutsOfANewKeyWinAndLeakNoExtent() throws Exception
    {
        final int threads = 4;
        final int keys = 3_000;
        final CyclicBarrier start = new CyclicBarrier(threads);
        final ExecutorService pool = Executors.newFixedThreadPool(threads);
        try
        {
            final List<Future<int[]>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final String client = "client-" + t;
                results.add(pool.submit(() ->
                {
                    final int[] codes = new int[keys];
                    start.await();
                    for (int k = 0; k < keys; k++)
                    {
                        codes[k] = store.putStart(T, client, "race-" + k, 4096, options(), new ArrayList<>());
                    }
                    return codes;
                }));
            }
            final int[][] codes = new int[threads][];
            for (int t = 0; t < threads; t++)
            {
                codes[t] = results.get(t).get(60, TimeUnit.SECONDS);
            }
            for (int k = 0; k < keys; k++)
            {
                int winners = 0;
                for (int t = 0; t < threads; t++)
                {
                    assertThat(codes[t][k]).as("key %d, thread %d", k, t)
                        .isIn(OK_VALUE, OBJECT_ALREADY_EXISTS_VALUE);
                    winners += codes[t][k] == OK_VALUE ? 1 : 0;
                }
                assertThat(winners).as("winners of key %d", k).isEqualTo(1);
            }
        }
        finally
        {
            pool.shutdownNow();
        }
        assertThat(store.objectCount()).isEqualTo(keys);
        // Every loser gave its extent back: the segment holds exactly the winners' values.
        assertThat(segment.allocatedBytes()).isEqualTo(keys * 4096L);
    }

    private int skippingLookup(final String client, final String key)
    {
        final byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
        return store.putStart(T, client, bytes, MetadataStore.hashOf(T, bytes, 0, bytes.length), 4096, options(), Set.of(),
            new ArrayList<>(), null, null, new long[1], clock.nanoTime(), clock.epochMillis(), true);
    }

    private static PutOptions options()
    {
        return PutOptions.newBuilder().setReplicas(1).build();
    }
}
