package io.granary.cli;

import io.granary.client.GranaryClient;
import io.granary.client.HostBuffer;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeMemory;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Host buffers as an engine uses them against a real in-process cluster (gRPC master, lookup port, node over loopback
 * TCP): pages put from slots of one host buffer and loaded with getBatchInto into slots of another, every byte
 * checked, over both client transports, with huge pages where this machine has them.
 */
class HostBufferClusterTest
{
    private static final int PAGE = 64 << 10;
    private static final int PAGES = 48;

    @ParameterizedTest
    @EnumSource(value = TransportKind.class, names = {"JAVA", "NATIVE"})
    void shouldPutFromAndLoadIntoHostBuffers(final TransportKind transport)
    {
        org.junit.jupiter.api.Assumptions.assumeTrue(transport != TransportKind.NATIVE ||
            io.granary.transfer.natives.NativeTransfer.isAvailable(), "no native library");
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(64L << 20).start();
             GranaryClient client = cluster.newClient(cluster.clientConfig().transport(transport).build());
             HostBuffer source = HostBuffer.allocate(PAGES * PAGE);
             HostBuffer target = HostBuffer.allocate(PAGES * PAGE + 4096))
        {
            final boolean huge = NativeMemory.hugePagesUnavailabilityCause() == null;
            assertThat(source.hugePagesAdvised()).as(String.valueOf(source.plainReason())).isEqualTo(huge);
            assertThat(client.registerBuffer(target.buffer())).isEqualTo(transport == TransportKind.NATIVE);

            final Random random = new Random(5);
            final byte[] bytes = new byte[PAGES * PAGE];
            random.nextBytes(bytes);
            source.buffer().put(bytes);
            final List<String> keys = new ArrayList<>();
            final List<ByteBuffer> values = new ArrayList<>();
            final List<PutOptions> options = new ArrayList<>();
            for (int i = 0; i < PAGES; i++)
            {
                keys.add("host/" + transport + "/" + i);
                values.add(source.buffer().position(i * PAGE).limit((i + 1) * PAGE).slice());
                options.add(PutOptions.defaults());
            }
            assertThat(client.putBatch(keys, values, options)).allMatch(result -> result.ok());

            // Loaded in reverse order into slots 4 KiB off the page boundaries of the target.
            final List<String> back = new ArrayList<>(keys);
            java.util.Collections.reverse(back);
            final List<ByteBuffer> dsts = new ArrayList<>();
            for (int i = 0; i < PAGES; i++)
            {
                dsts.add(target.buffer().position(4096 + i * PAGE).limit(4096 + (i + 1) * PAGE).slice());
            }
            final List<OpResult<Integer>> loaded = client.getBatchInto(back, dsts);
            for (int i = 0; i < PAGES; i++)
            {
                assertThat(loaded.get(i).value()).isEqualTo(PAGE);
                final int original = PAGES - 1 - i;
                final ByteBuffer expected = ByteBuffer.wrap(bytes, original * PAGE, PAGE);
                assertThat(target.buffer().position(4096 + i * PAGE).limit(4096 + (i + 1) * PAGE).slice()
                    .mismatch(expected.slice())).as("page %d", i).isEqualTo(-1);
            }
            assertThat(target.buffer().getInt(0)).as("nothing written before the first slot").isZero();
            if (huge)
            {
                assertThat(target.hugePageBytes()).isLessThanOrEqualTo(NativeMemory.roundUp(target.capacity()));
            }
            client.unregisterBuffer(target.buffer());
        }
    }

    @Test
    void shouldRefuseUseAfterCloseAndBadCapacities()
    {
        final HostBuffer buffer = HostBuffer.allocate(1 << 20);
        assertThat(buffer.buffer().capacity()).isEqualTo(1 << 20);
        assertThat(buffer.buffer().isDirect()).isTrue();
        buffer.close();
        buffer.close(); // idempotent
        assertThatThrownBy(buffer::buffer).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThat(buffer.hugePageBytes()).isZero();
        assertThatThrownBy(() -> HostBuffer.allocate(0)).isInstanceOf(IllegalArgumentException.class);

        try (HostBuffer plain = HostBuffer.allocate(4096, false))
        {
            assertThat(plain.hugePagesAdvised()).isFalse();
            assertThat(plain.plainReason()).contains("not asked");
            assertThat(plain.buffer().getLong(4088)).isZero();
        }
    }
}
