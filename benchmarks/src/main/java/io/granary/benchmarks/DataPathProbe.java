package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.client.GranaryClient;
import io.granary.client.PutOptions;
import io.granary.node.StorageNode;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.node.segment.Segment;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import org.HdrHistogram.Histogram;

import java.nio.ByteBuffer;
import java.util.Locale;
import java.util.function.IntSupplier;

/**
 * Where the time of a put and a get goes: the transfer engine alone (READ/WRITE of one value
 * against an in-process node) next to the full client put/get (master round trips included), and the
 * master round trips alone (an exists over the lookup port; PutStart + PutEnd over gRPC without any
 * data), for one value size. A diagnostic, not a target check.
 *
 * <pre>java -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.DataPathProbe [sizeBytes] [iterations]</pre>
 */
public final class DataPathProbe
{
    public static void main(final String[] args) throws Exception
    {
        LookupLatency.quietLogging();
        final int size = args.length > 0 ? Integer.parseInt(args[0]) : 1 << 20;
        final int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(1L << 30)
            .nodeContext(c -> c.preTouch(true)).start())
        {
            final StorageNode node = cluster.nodes().get(0);
            final Segment segment = node.segments().get(0);
            final ByteBuffer direct = ByteBuffer.allocateDirect(size);
            final ByteBuffer heap = ByteBuffer.allocate(size);
            try (TransferEngine engine = new NettyTransferEngine(new TransferConfig().conclude()))
            {
                final String endpoint = node.endpoint();
                measure("engine WRITE from direct", iterations, size, () ->
                    engine.submit(TransferRequest.write(endpoint, segment.id(), 0, direct.duplicate(), size)).join());
                measure("engine READ into direct", iterations, size, () ->
                    engine.submit(TransferRequest.read(endpoint, segment.id(), 0, direct.duplicate(), size)).join());
                measure("engine READ into heap", iterations, size, () ->
                    engine.submit(TransferRequest.read(endpoint, segment.id(), 0, heap.duplicate(), size)).join());
            }
            try (GranaryClient client = cluster.newClient())
            {
                final int[] n = {0};
                measure("client put (PutStart+WRITE+PutEnd)", iterations, size, () ->
                {
                    client.put("probe/" + n[0]++, direct.duplicate(), PutOptions.defaults());
                    return 0;
                });
                final int[] m = {0};
                measure("client getInto direct", iterations, size, () ->
                {
                    final ByteBuffer into = direct.duplicate();
                    client.getInto("probe/" + (n[0] - 1 - m[0]++ % 500), into);
                    return 0;
                });
                measure("client get (byte[])", iterations, size, () -> client.get("probe/" + (n[0] - 1 - m[0]++ % 500)).length > 0 ? 0 : 1);
                measure("client exists (lookup port, no data)", iterations, 0,
                    () -> client.exists("probe/" + (n[0] - 1 - m[0]++ % 500)) ? 0 : 1);
            }
            // The control plane of a put without its data: PutStart + PutEnd over gRPC, as the client sends them.
            final ManagedChannel channel = NettyChannelBuilder.forTarget(cluster.masterAddress()).usePlaintext()
                .directExecutor().build();
            try
            {
                final MasterServiceGrpc.MasterServiceBlockingStub stub = MasterServiceGrpc.newBlockingStub(channel);
                final int[] k = {0};
                measure("master PutStart+PutEnd (gRPC, no data)", iterations, 0, () ->
                {
                    final String key = "meta/" + k[0]++;
                    final int started = stub.putStart(PutStartRequest.newBuilder().setTenant("default")
                        .setClientId("probe").setKey(key).setValueLength(size).build()).getCode();
                    final int ended = stub.putEnd(PutEndRequest.newBuilder().setTenant("default").setClientId("probe")
                        .setKey(key).build()).getCode();
                    if (k[0] % 256 == 0)
                    {
                        stub.removeByRegex(RemoveByRegexRequest.newBuilder().setTenant("default").setRegex("meta/.*")
                            .build());
                    }
                    return started | ended;
                });
            }
            finally
            {
                channel.shutdownNow();
            }
        }
    }

    private static void measure(final String name, final int iterations, final int size, final IntSupplier call)
    {
        for (int i = 0; i < Math.max(200, iterations / 5); i++)
        {
            check(name, call.getAsInt());
        }
        final Histogram h = new Histogram(3);
        final long start = System.nanoTime();
        for (int i = 0; i < iterations; i++)
        {
            final long t = System.nanoTime();
            check(name, call.getAsInt());
            h.recordValue((System.nanoTime() - t) / 1000);
        }
        final double seconds = (System.nanoTime() - start) / 1e9;
        final String rate = size == 0 ? "       -     " :
            String.format(Locale.ROOT, "%8.3f GB/s", (double)size * iterations / seconds / 1e9);
        System.out.printf(Locale.ROOT, "%-40s %s  p50 %6d us  p99 %6d us%n",
            name, rate, h.getValueAtPercentile(50), h.getValueAtPercentile(99));
    }

    private static void check(final String name, final int status)
    {
        if (status != 0)
        {
            throw new IllegalStateException(name + " failed with " + status);
        }
    }
}
