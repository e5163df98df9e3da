package io.granary.examples;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Embedding the Granary client: connect, put and get one value, read into a caller's buffer, then store and
 * load a batch of KV pages in one master round trip per phase. Run against a cluster:
 * {@code java -cp ... io.granary.examples.EmbeddedClientExample 127.0.0.1:50051}.
 */
public final class EmbeddedClientExample
{
    private EmbeddedClientExample()
    {
    }

    public static void main(final String[] args)
    {
        final String masterAddress = args.length > 0 ? args[0] : "127.0.0.1:50051";
        System.out.println(run(masterAddress));
    }

    /** Runs the example against the master at {@code masterAddress}; returns what it did, for people and tests. */
    public static String run(final String masterAddress)
    {
        final StringBuilder report = new StringBuilder();
        // One client per process, shared by every thread; it is thread safe.
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(masterAddress)
            .tenant("examples")
            .build()))
        {
            // A single value. Objects are immutable: putting an existing key again leaves it unchanged.
            final byte[] hello = "hello from an embedded client".getBytes(StandardCharsets.UTF_8);
            client.put("example/hello", hello);
            final byte[] back = client.get("example/hello");
            report.append("get example/hello -> \"").append(new String(back, StandardCharsets.UTF_8)).append("\"\n");

            // Zero-copy-friendly read into a buffer the caller owns (e.g. a pinned staging buffer).
            final ByteBuffer staging = ByteBuffer.allocateDirect(4096);
            final int length = client.getInto("example/hello", staging);
            report.append("getInto example/hello -> ").append(length).append(" bytes\n");

            // A miss is an exception with a code, never a null.
            try
            {
                client.get("example/missing");
            }
            catch (final GranaryException ex)
            {
                report.append("get example/missing -> ").append(ex.code()).append('\n');
            }

            // A batch: the KV pages of one block, two replicas each, evicted together as one group.
            final List<String> keys = new ArrayList<>();
            final List<ByteBuffer> values = new ArrayList<>();
            for (int layer = 0; layer < 8; layer++)
            {
                keys.add("example/block-42/layer-" + layer);
                final byte[] page = new byte[16 * 1024];
                Arrays.fill(page, (byte)layer);
                values.add(ByteBuffer.wrap(page));
            }
            final PutOptions options = PutOptions.builder().replicas(2).groupId("example/block-42").build();
            int stored = 0;
            for (final OpResult<Void> result : client.putBatch(keys, values, options))
            {
                // A page someone stored before us is ok too: objects are immutable, the stored value stands.
                stored += result.ok() ? 1 : 0;
            }
            int loaded = 0;
            final List<OpResult<byte[]>> pages = client.getBatch(keys);
            for (int i = 0; i < pages.size(); i++)
            {
                loaded += pages.get(i).ok() && Arrays.equals(pages.get(i).value(), values.get(i).array()) ? 1 : 0;
            }
            report.append("putBatch ").append(stored).append('/').append(keys.size()).append(" stored, getBatch ")
                .append(loaded).append('/').append(keys.size()).append(" loaded intact\n");
        }
        return report.toString();
    }
}
