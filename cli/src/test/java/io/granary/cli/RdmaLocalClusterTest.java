package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.node.StorageNode;
import io.granary.node.transfer.TransferServer;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransfer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A whole in-process cluster with {@code --transport rdma} on the node and the client and data tokens off: puts go
 * over TCP, gets come one-sided over RDMA, every byte checked. The JVM of cli's surefire execution
 * {@code fake-verbs} loads the native library's test build with the fake verbs of the C tests (one device; READs
 * are copies between this process's registrations with keys, bounds and queue-pair states checked), since no RDMA
 * device exists on the build machines. Skipped in any other JVM.
 */
class RdmaLocalClusterTest
{
    @BeforeAll
    static void requireTheFakeDevice()
    {
        assumeTrue(String.valueOf(System.getProperty(NativeTransfer.LIBRARY_PROPERTY))
            .endsWith("libgranary_transfer_fake_verbs.so"), "not the JVM of the fake-verbs execution");
        assertThat(NativeTransfer.unavailabilityCause()).as("the JNI test library (built by native-transfer)").isNull();
        assumeTrue(NativeTransfer.version().contains("rdma"), "built without <infiniband/verbs.h>: no RDMA transport");
        assertThat(NativeTransfer.rdmaUnavailabilityCause()).as("the fake device").isNull();
    }

    @Test
    void shouldGetEveryValueOneSidedFromANodeServingRdma()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(64L << 20)
            .masterContext(LocalCluster.defaultMasterContext().dataTokens(false))
            .nodeContext(ctx -> ctx.transport(TransportKind.RDMA))
            .start();
             GranaryClient client = cluster.newClient(cluster.clientConfig().transport(TransportKind.RDMA).build()))
        {
            final TransferServer node = cluster.nodes().get(0).transferServer();
            assertThat(node.transport()).as("RDMA is served by the native server").isEqualTo(TransportKind.NATIVE);
            final Random random = new Random(21);
            final int[] sizes = {1, 100, 4096, 65_537, 1 << 20, 3 << 20};
            final byte[][] values = new byte[sizes.length * 4][];
            for (int i = 0; i < values.length; i++)
            {
                values[i] = new byte[sizes[i % sizes.length]];
                random.nextBytes(values[i]);
                client.put("rdma/" + i, values[i]);
            }
            long valueBytes = 0;
            final long outBefore = node.bytesOut();
            for (int i = 0; i < values.length; i++)
            {
                assertThat(client.get("rdma/" + i)).as("value %d", i).isEqualTo(values[i]);
                final ByteBuffer into = ByteBuffer.allocateDirect(values[i].length);
                assertThat(client.getInto("rdma/" + i, into)).isEqualTo(values[i].length);
                final byte[] copy = new byte[values[i].length];
                into.get(0, copy);
                assertThat(copy).isEqualTo(values[i]);
                valueBytes += 2L * values[i].length;
            }
            // The same into pages of a registered pool (one memory registration for all of them).
            final ByteBuffer pool = ByteBuffer.allocateDirect(16 << 20);
            assertThat(client.registerBuffer(pool)).isTrue();
            int at = 0;
            for (int i = 0; i < values.length; i++)
            {
                if (at + values[i].length > pool.capacity())
                {
                    at = 0;
                }
                final ByteBuffer page = pool.duplicate().position(at).slice();
                assertThat(client.getInto("rdma/" + i, page)).isEqualTo(values[i].length);
                final byte[] copy = new byte[values[i].length];
                page.get(0, copy);
                assertThat(copy).as("value %d read into the registered pool", i).isEqualTo(values[i]);
                valueBytes += values[i].length;
                at += values[i].length;
            }
            assertThat(client.unregisterBuffer(pool)).isTrue();
            // Over TCP the node sent at most the RDMA_CONNECT answers (one per engine loop that read): the values'
            // bytes came one-sided.
            assertThat(valueBytes).isGreaterThan(45L << 20);
            assertThat(node.bytesOut() - outBefore).as("bytes the node sent over TCP for the gets")
                .isLessThan(64L << 10);
        }
    }
}
