package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.ReadLease;
import io.granary.client.internal.GranaryClientImpl;
import io.granary.common.ManualClock;
import io.granary.transfer.TransferEngines;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * probeBatchForRead and readBatchInto against a real in-process cluster (a master with gRPC and the lookup port, one
 * storage node over TCP): the probe's answer carries the selected keys' replica lists, and reading them costs no
 * BatchGetReplicaList while the lease lasts; afterwards, or for another client's leases, it does or is refused.
 */
class ReadLeaseClusterTest
{
    private static final int VALUE_BYTES = 64 << 10;

    private static LocalCluster cluster;
    private static GranaryClient client;

    @BeforeAll
    static void startCluster()
    {
        cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(64L << 20).start();
        client = cluster.newClient();
        for (final String key : List.of("a", "b", "c", "d"))
        {
            client.put(key, value(key));
        }
    }

    @AfterAll
    static void stopCluster()
    {
        cluster.close();
    }

    private static byte[] value(final String key)
    {
        final byte[] v = new byte[VALUE_BYTES];
        for (int i = 0; i < v.length; i++)
        {
            v[i] = (byte)(key.charAt(0) * 31 + i * 7);
        }
        return v;
    }

    /** BatchGetReplicaList calls the master served so far, over either transport. */
    private static long replicaListCalls()
    {
        return cluster.masterCalls("BatchGetReplicaList");
    }

    private static List<ByteBuffer> buffers(final int n)
    {
        final List<ByteBuffer> out = new ArrayList<>();
        for (int i = 0; i < n; i++)
        {
            out.add(ByteBuffer.allocateDirect(VALUE_BYTES + 16));
        }
        return out;
    }

    private static List<ReadLease> leases(final List<OpResult<ReadLease>> probed, final int count)
    {
        final List<ReadLease> out = new ArrayList<>();
        for (int i = 0; i < count; i++)
        {
            out.add(probed.get(i).value());
        }
        return out;
    }

    private static void assertHolds(final ByteBuffer dst, final String key)
    {
        final byte[] got = new byte[dst.position()];
        dst.flip().get(got);
        assertThat(Arrays.equals(got, value(key))).as(key).isTrue();
    }

    @Test
    void shouldReadWhatTheProbeLeasedWithoutAnotherLookup()
    {
        final List<OpResult<ReadLease>> probed =
            client.probeBatchForRead(List.of("a", "b", "missing", "c"), LeasePolicy.longestPrefix(1));
        assertThat(probed).hasSize(4);
        assertThat(probed.get(0).value().key()).isEqualTo("a");
        assertThat(probed.get(1).value().length()).isEqualTo(VALUE_BYTES);
        assertThat(probed.get(0).value().usable()).isTrue();
        assertThat(probed.get(2)).isEqualTo(OpResult.ok(null));
        assertThat(probed.get(3).ok()).isTrue();
        assertThat(probed.get(3).value()).as("behind the first miss: not selected").isNull();

        final long before = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(2);
        final List<OpResult<Integer>> read = client.readBatchInto(leases(probed, 2), dsts);
        assertThat(read).containsExactly(OpResult.ok(VALUE_BYTES), OpResult.ok(VALUE_BYTES));
        assertHolds(dsts.get(0), "a");
        assertHolds(dsts.get(1), "b");
        assertThat(replicaListCalls()).as("no lookup of its own").isEqualTo(before);

        // The counter does count: the same read through getBatchInto asks the master once.
        client.getBatchInto(List.of("a", "b"), buffers(2));
        assertThat(replicaListCalls()).isEqualTo(before + 1);
    }

    @Test
    void shouldLookUpAgainOnlyTheLeasesThatRanLow()
    {
        final ManualClock clock = new ManualClock();
        final ClientConfig config = cluster.clientConfig().build();
        try (GranaryClient manual = GranaryClientImpl.connect(config, TransferEngines::create, clock))
        {
            final ReadLease early = manual.probeBatchForRead(List.of("a"), LeasePolicy.lastHitOnly(1)).get(0).value();
            clock.advance(Duration.ofSeconds(6));
            final ReadLease late = manual.probeBatchForRead(List.of("b"), LeasePolicy.lastHitOnly(1)).get(0).value();
            // The master's TTL is 10 s; a lease is used while more than 1 s of it is left.
            clock.advance(Duration.ofMillis(3_500));
            assertThat(early.usable()).isFalse();
            assertThat(late.usable()).isTrue();

            final long before = replicaListCalls();
            final List<ByteBuffer> dsts = buffers(2);
            assertThat(manual.readBatchInto(List.of(early, late), dsts))
                .containsExactly(OpResult.ok(VALUE_BYTES), OpResult.ok(VALUE_BYTES));
            assertHolds(dsts.get(0), "a");
            assertHolds(dsts.get(1), "b");
            assertThat(replicaListCalls()).as("one lookup, for the early lease").isEqualTo(before + 1);

            assertThatThrownBy(() -> client.readBatchInto(List.of(late), buffers(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not made by this client");
        }
    }

    @Test
    void shouldRefuseBadArgumentsAndReportPerKeyErrors()
    {
        assertThatThrownBy(() -> client.probeBatchForRead(List.of("a"), LeasePolicy.none()))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("leases");
        assertThatThrownBy(() -> client.readBatchInto(Arrays.asList((ReadLease)null), buffers(1)))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("leases[0]: null");
        final ReadLease a = client.probeBatchForRead(List.of("a"), LeasePolicy.lastHitOnly(1)).get(0).value();
        assertThatThrownBy(() -> client.readBatchInto(List.of(a), buffers(2)))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("one buffer per key");

        final List<OpResult<Integer>> small = client.readBatchInto(List.of(a), List.of(ByteBuffer.allocateDirect(16)));
        assertThat(small.get(0).error()).isEqualTo(ErrorCode.BUFFER_OVERFLOW);
    }

    @Test
    void shouldBringBackOnlyTheListsOfTheMembersAskedFor()
    {
        // Candidates (a, b) and (c, d); the caller reads the second member of each.
        final List<OpResult<ReadLease>> probed =
            client.probeBatchForRead(List.of("a", "b", "c", "d"), LeasePolicy.longestPrefix(2), 1, 1);
        assertThat(probed).allSatisfy(r -> assertThat(r.value()).as("every member is selected").isNotNull());
        assertThat(probed).extracting(r -> r.value().usable()).containsExactly(false, true, false, true);
        assertThat(probed.get(0).value().length()).isZero();

        final long before = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(4);
        assertThat(client.readBatchInto(leases(probed, 4), dsts))
            .allSatisfy(r -> assertThat(r.value()).isEqualTo(VALUE_BYTES));
        for (int i = 0; i < 4; i++)
        {
            assertHolds(dsts.get(i), List.of("a", "b", "c", "d").get(i));
        }
        assertThat(replicaListCalls()).as("one lookup, for the members without a list").isEqualTo(before + 1);

        for (final int[] bad : new int[][]{{2, 1}, {1, 2}, {0, 0}, {-1, 1}})
        {
            assertThatThrownBy(() -> client.probeBatchForRead(List.of("a", "b"), LeasePolicy.longestPrefix(2), bad[0],
                bad[1])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not within a candidate");
        }
    }

    @Test
    void shouldCountLeaseReadsWithAndWithoutTheirListInTheClientsRegistry()
    {
        final SimpleMeterRegistry registry = new SimpleMeterRegistry();
        final GranaryClient metered = cluster.newClient(cluster.clientConfig().meterRegistry(registry).build());
        final List<OpResult<ReadLease>> probed =
            metered.probeBatchForRead(List.of("a", "b", "c", "d"), LeasePolicy.longestPrefix(2), 0, 1);
        assertThat(metered.readBatchInto(leases(probed, 4), buffers(4)))
            .allSatisfy(r -> assertThat(r.value()).isEqualTo(VALUE_BYTES));
        assertThat(registry.get("granary.client.lease.reads").tag("outcome", "with_list").functionCounter().count())
            .isEqualTo(2);
        assertThat(registry.get("granary.client.lease.reads").tag("outcome", "looked_up").functionCounter().count())
            .isEqualTo(2);
    }

    @Test
    void shouldReadLeasesThroughTheAsyncView() throws Exception
    {
        final List<OpResult<ReadLease>> probed = client.async()
            .probeBatchForRead(List.of("c", "d"), LeasePolicy.longestPrefix(2)).get(10, TimeUnit.SECONDS);
        assertThat(probed).allSatisfy(r -> assertThat(r.value()).isNotNull());
        final long before = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(2);
        assertThat(client.async().readBatchInto(leases(probed, 2), dsts).get(10, TimeUnit.SECONDS))
            .containsExactly(OpResult.ok(VALUE_BYTES), OpResult.ok(VALUE_BYTES));
        assertHolds(dsts.get(0), "c");
        assertHolds(dsts.get(1), "d");
        assertThat(replicaListCalls()).isEqualTo(before);
    }
}
