package io.granary.benchmarks.trace;

import io.granary.master.evict.EvictionPolicy;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Reader;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The trace replay on a short slice of the conversation trace (its first 1,000 requests) through a real in-process
 * cluster, both eviction policies, with the pool at 25% of the slice's working set: the cluster must agree with the
 * in-Java model request by request, prefix-leaf-first must leave no hole, and the offline bound must hold.
 */
class TraceReplayTest
{
    private static final int K = 2;
    private static final int PAGE_BYTES = 1024;
    private static Trace slice;

    @BeforeAll
    static void loadSlice() throws IOException
    {
        try (Reader in = new InputStreamReader(TraceReplayTest.class.getResourceAsStream(
            "/traces/conversation_trace_first1000.jsonl"), StandardCharsets.UTF_8))
        {
            slice = Trace.read("conversation_trace_first1000.jsonl", in, Integer.MAX_VALUE);
        }
    }

    @Test
    void shouldReadTheSliceAsFullBlocksOnly()
    {
        assertThat(slice.requestCount()).isEqualTo(1000);
        assertThat(slice.uniqueBlocks()).isEqualTo(20_527); // also what prefix_policy_sim.py counts
        assertThat(slice.blockReferences()).isEqualTo(26_307);
        assertThat(slice.request(0)).hasSize(6758 / 512).startsWith(0, 1, 2);
    }

    @Test
    void shouldReplayBothPoliciesAsTheModelPredictsWithNoHolesLeafFirst()
    {
        final TraceReplay.Settings s = new TraceReplay.Settings();
        s.fractions = new double[] {0.25};
        s.objectsPerBlock = K;
        s.pageBytes = PAGE_BYTES;

        final List<TraceReplay.Row> rows = TraceReplay.run(slice, s, null);

        assertThat(rows).extracting(TraceReplay.Row::policy)
            .containsExactly(EvictionPolicy.OLDEST_LEASE, EvictionPolicy.PREFIX_LEAF_FIRST);
        for (final TraceReplay.Row r : rows)
        {
            assertThat(r.evictedObjects()).as(r.policy() + ": the pool overflowed").isPositive();
            assertThat(r.requestsDisagreeing()).as(r.policy() + ": requests whose hit differs from the model").isZero();
            assertThat(r.hitRate()).as(r.policy().flagValue()).isEqualTo(r.modelHitRate()).isGreaterThan(0.05);
            assertThat(r.strandedBlocks()).as(r.policy().flagValue()).isEqualTo(r.modelStrandedBlocks());
            assertThat(r.bound()).isGreaterThanOrEqualTo(r.hitRate()).isLessThanOrEqualTo(slice.maxReuse() + 1e-12);
            assertThat(r.bytesLoaded()).as("every hit block's pages loaded")
                .isEqualTo(Math.round(r.hitRate() * slice.blockReferences()) * K * PAGE_BYTES);
            assertThat(r.bytesSaved()).isPositive();
        }
        final TraceReplay.Row oldest = rows.get(0);
        final TraceReplay.Row leafFirst = rows.get(1);
        assertThat(oldest.strandedBlocks()).as("oldest-lease evicts from the middle of prefixes").isPositive();
        assertThat(leafFirst.strandedBlocks()).isZero();
        assertThat(leafFirst.holes()).isZero();
        assertThat(leafFirst.prefixBreaks()).isZero();
        assertThat(leafFirst.hitRate()).isGreaterThanOrEqualTo(oldest.hitRate());
    }

    /**
     * The master restarted halfway through a leaf-first replay: with the pages' parent keys in the node's ledger the
     * rebuilt master keeps every chain's order and leaves no hole; without them (a client with commitParents off, as
     * every client was before they were carried) it strands blocks behind evicted ones.
     */
    @Test
    void shouldLeaveNoHoleAcrossAMasterRestartOnlyWithParentKeysInTheLedger()
    {
        final TraceReplay.Settings s = new TraceReplay.Settings();
        s.fractions = new double[] {0.25};
        s.policies = List.of(EvictionPolicy.PREFIX_LEAF_FIRST);
        s.objectsPerBlock = K;
        s.pageBytes = PAGE_BYTES;
        s.restartAfter = 500;

        final TraceReplay.Row with = TraceReplay.run(slice, s, null).get(0);
        s.commitParents = false;
        final TraceReplay.Row without = TraceReplay.run(slice, s, null).get(0);

        assertThat(with.evictedObjects()).as("the pool overflowed").isPositive();
        assertThat(with.strandedBlocks()).isZero();
        assertThat(with.holes()).isZero();
        assertThat(with.prefixBreaks()).isZero();
        assertThat(without.strandedBlocks()).as("rebuilt without parent links, leaf first evicts from the middle")
            .isPositive();
    }

    @Test
    void shouldBoundWithBeladyOnATraceWhoseOptimumIsKnown() throws IOException
    {
        // Blocks a, b, c (ids 1, 2, 3) in one-block requests: a b c a b c with room for 2.
        // MIN keeps a and b, bypasses c: hits on the second a and b only -> 2 of 6.
        final StringBuilder lines = new StringBuilder();
        for (final int id : new int[] {1, 2, 3, 1, 2, 3})
        {
            lines.append("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [")
                .append(id).append(", 99]}\n"); // 600 tokens: one full block, the partial one is left out
        }
        final Trace t = Trace.read("abc", new StringReader(lines.toString()), Integer.MAX_VALUE);

        assertThat(t.uniqueBlocks()).isEqualTo(3);
        assertThat(BeladyBound.hitRate(t, 2)).isEqualTo(2.0 / 6);
        assertThat(BeladyBound.hitRate(t, 3)).isEqualTo(3.0 / 6);
        assertThat(BeladyBound.hitRate(t, 0)).isZero();
    }

    @Test
    void shouldModelLeafFirstKeepingAChainWhoseMiddleIsOlder()
    {
        // Chain 1-2-3 stored; then 1 alone is read again (now the youngest), then block 9 needs room for one block.
        final PoolModel leafFirst = new PoolModel(EvictionPolicy.PREFIX_LEAF_FIRST, 3, 1, 100, 0.0, 300);
        final PoolModel oldest = new PoolModel(EvictionPolicy.OLDEST_LEASE, 3, 1, 100, 0.0, 300);
        for (final PoolModel m : List.of(leafFirst, oldest))
        {
            m.request(new int[] {1, 2, 3});
            m.request(new int[] {1});
            m.request(new int[] {9});
            m.request(new int[] {1, 2, 3});
        }
        assertThat(leafFirst.hitBlocks()).as("the tail 3 went: 1 and 2 still load").isEqualTo(1 + 2);
        assertThat(leafFirst.strandedBlocks()).isZero();
        assertThat(oldest.hitBlocks()).as("the middle 2 went: only 1 loads").isEqualTo(1 + 1);
        assertThat(oldest.strandedBlocks()).isEqualTo(1);
        assertThat(oldest.prefixBreaks()).isEqualTo(1);
    }

    @Test
    void shouldRefuseALineThatDoesNotParseNamingIt()
    {
        assertThatThrownBy(() -> Trace.read("bad", new StringReader("{\"input_length\": 10}\n"), 10))
            .isInstanceOf(IOException.class).hasMessageContaining("bad line 1").hasMessageContaining("hash_ids");
        assertThatThrownBy(() -> TraceReplay.parse(new String[] {"--requests", "5"}))
            .hasMessageContaining("--trace");
        assertThatThrownBy(() -> TraceReplay.parse(new String[] {"--trace", "x", "--policies", "lru"}))
            .hasMessageContaining("oldest-lease or prefix-leaf-first");
    }
}
