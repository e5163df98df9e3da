package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LocalClusterTest
{
    @Test
    void shouldStartWithEverySegmentMountedAndCloseEverything()
    {
        final LocalCluster cluster =
            LocalCluster.builder().nodes(2).segmentsPerNode(2).segmentSizeBytes(8L << 20).start();
        final GranaryClient client;
        try (cluster)
        {
            assertThat(cluster.master().registry().liveSegments()).hasSize(4);
            assertThat(cluster.nodes()).extracting(StorageNode::name).containsExactly("local-node-0", "local-node-1");
            assertThat(cluster.masterAddress()).isEqualTo("127.0.0.1:" + cluster.master().grpcPort());

            client = cluster.newClient();
            client.put("k", new byte[]{1, 2, 3});
            assertThat(client.get("k")).containsExactly(1, 2, 3);
        }
        assertThat(cluster.master().isClosed()).isTrue();
        assertThatThrownBy(() -> client.get("k")).hasMessageContaining("UNAVAILABLE_IN_CURRENT_STATUS");
    }

    @Test
    void shouldAddAndStopNodesWhileRunning()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(0).segmentSizeBytes(4L << 20).start())
        {
            assertThat(cluster.master().registry().liveSegments()).isEmpty();

            final StorageNode first = cluster.startNode();
            final StorageNode second = cluster.startNode();
            assertThat(cluster.master().registry().liveSegments()).hasSize(2);

            cluster.stopNode(first);
            assertThat(cluster.nodes()).containsExactly(second);
            assertThat(cluster.master().registry().liveSegments()).hasSize(1);
            assertThatThrownBy(() -> cluster.stopNode(first)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void shouldRestartTheMasterOnItsPortsAndRebuildWhatTheNodesHoldWithTheirParentLinks()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(8L << 20).start())
        {
            final GranaryClient client = cluster.newClient();
            client.put("block-0", java.nio.ByteBuffer.wrap(new byte[] {1}), io.granary.client.PutOptions.defaults());
            for (int i = 1; i < 5; i++)
            {
                client.put("block-" + i, java.nio.ByteBuffer.wrap(new byte[] {(byte)(i + 1)}),
                    io.granary.client.PutOptions.builder().parent("block-" + (i - 1)).build());
            }
            final int port = cluster.master().grpcPort();
            final String before = cluster.master().masterId();

            final io.granary.master.MasterServer restarted = cluster.restartMaster();

            assertThat(restarted.masterId()).isNotEqualTo(before);
            assertThat(restarted.grpcPort()).isEqualTo(port);
            assertThat(restarted.registry().liveSegments()).hasSize(2);
            assertThat(restarted.store().objectCount()).isEqualTo(5);
            assertThat(restarted.store().rebuildCounters().parentsLinked()).isEqualTo(4);
            assertThat(restarted.store().rebuiltAwaitingParents()).isZero();
            for (int i = 0; i < 5; i++)
            {
                assertThat(client.get("block-" + i)).as("block-%d through the same client", i)
                    .containsExactly((byte)(i + 1));
            }
        }
    }

    @Test
    void shouldRefuseABadNodeSetting()
    {
        final LocalCluster.Builder builder = LocalCluster.builder().nodes(1).segmentSizeBytes(1024);

        assertThatThrownBy(builder::start).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("segmentSizeBytes");
    }
}
