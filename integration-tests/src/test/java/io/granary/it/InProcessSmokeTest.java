package io.granary.it;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class InProcessSmokeTest
{
    @Test
    void shouldPutAndGetThroughARealMasterAndNode()
    {
        final long lookups = run(0);
        assertThat(lookups).as("lookups served on the framed port").isPositive();
    }

    @Test
    void shouldWorkOverGrpcAloneWhenTheLookupPortIsDisabled()
    {
        assertThat(run(-1)).isZero();
    }

    /** Runs the scenario against a fresh cluster; returns the lookups the master's lookup port served. */
    private static long run(final int lookupPort)
    {
        try (MasterServer master = MasterServer.launch(
                 new MasterServer.Context().port(0).lookupPort(lookupPort).adminPort(-1));
             StorageNode node = StorageNode.launch(new StorageNode.Context()
                 .masterAddress("127.0.0.1:" + master.grpcPort()).segmentSizeBytes(64L << 20)))
        {
            Await.until(Duration.ofSeconds(10), () -> master.registry().liveSegments().length == 1,
                () -> "the master to mount the segment of " + node.name());
            try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
                .masterAddress("127.0.0.1:" + master.grpcPort()).build()))
            {
                final Random random = new Random(7);
                final byte[] value = new byte[300_000];
                random.nextBytes(value);
                client.put("k", value);
                assertThat(client.get("k")).isEqualTo(value);
                assertThat(client.exists("k")).isTrue();
                assertThatThrownBy(() -> client.get("missing"))
                    .isInstanceOfSatisfying(GranaryException.class,
                        e -> assertThat(e.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND));

                final List<String> keys = new ArrayList<>();
                final List<ByteBuffer> values = new ArrayList<>();
                for (int i = 0; i < 100; i++)
                {
                    final byte[] v = new byte[4096 + i];
                    random.nextBytes(v);
                    keys.add("batch-" + i);
                    values.add(ByteBuffer.wrap(v));
                }
                for (final OpResult<Void> r : client.putBatch(keys, values, PutOptions.defaults()))
                {
                    assertThat(r.ok()).isTrue();
                }
                final List<OpResult<byte[]>> got = client.getBatch(keys);
                for (int i = 0; i < keys.size(); i++)
                {
                    assertThat(got.get(i).value()).isEqualTo(values.get(i).array());
                }
                assertThat(client.existsBatch(keys)).allMatch(r -> r.value());
            }
            return master.lookupRequests();
        }
    }
}
