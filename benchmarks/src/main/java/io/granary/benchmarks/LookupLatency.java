package io.granary.benchmarks;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.master.MasterServer;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.SegmentInfo;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.HdrHistogram.Histogram;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * End-to-end latency of the engine's lookup calls through the client over loopback, with the
 * master in a separate JVM (as in production): BatchExistKey over 640 keys and BatchProbeKey
 * LAST_HIT_ONLY over 128 candidates x 5 keys, over the master's framed lookup port (the client's
 * default) and, for comparison in the same run, over gRPC only. Prints p50/p90/p99/max per call.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.LookupLatency [iterations] [master host:port]
 * </pre>
 * Without a master address it starts one in a child JVM on a free port and stops it at the end.
 * The keys are registered metadata-only (a synthetic segment kept alive by heartbeats), so only
 * the control plane is measured.
 */
public final class LookupLatency
{
    static final int CANDIDATES = 128;
    static final int CANDIDATE_SIZE = 5;

    public static void main(final String[] args) throws Exception
    {
        quietLogging();
        final int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 5000;
        Process child = null;
        String master = args.length > 1 ? args[1] : null;
        if (master == null)
        {
            child = spawnMaster();
            master = readReadyAddress(child);
        }
        final ScheduledExecutorService heartbeats = Executors.newSingleThreadScheduledExecutor(r ->
        {
            final Thread t = new Thread(r, "lookup-bench-heartbeat");
            t.setDaemon(true);
            return t;
        });
        final ManagedChannel channel = ManagedChannelBuilder.forTarget(master).usePlaintext().build();
        try
        {
            final MasterServiceGrpc.MasterServiceBlockingStub stub = MasterServiceGrpc.newBlockingStub(channel);
            final String nodeId = "lookup-bench-node";
            stub.mountSegment(MountSegmentRequest.newBuilder().setNodeId(nodeId).setNodeName(nodeId)
                .setEndpoint("127.0.0.1:1").setSegment(SegmentInfo.newBuilder()
                    .setSegmentId(1).setName(nodeId + "/seg0").setSizeBytes(64L << 30)).build());
            heartbeats.scheduleAtFixedRate(() ->
                stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId(nodeId).build()), 0, 500, TimeUnit.MILLISECONDS);

            final List<String> keys = new ArrayList<>();
            for (int c = 0; c < CANDIDATES; c++)
            {
                for (int r = 0; r < CANDIDATE_SIZE; r++)
                {
                    final String key = "model/w5/kda" + (c * 128) + "/r" + r;
                    keys.add(key);
                    stub.putStart(PutStartRequest.newBuilder().setClientId("bench").setKey(key).setValueLength(4096).build());
                    stub.putEnd(PutEndRequest.newBuilder().setClientId("bench").setKey(key).build());
                }
            }

            try (GranaryClient client = GranaryClient.connect(ClientConfig.builder().masterAddress(master).build()))
            {
                System.out.printf(Locale.ROOT, "lookup latency through the client, master %s, %d keys, %d iterations%n",
                    master, keys.size(), iterations);
                final List<String> names = List.of("BatchExistKey 640 keys", "BatchProbeKey LAST_HIT_ONLY 128x5",
                    "BatchProbeKey NONE 640 keys", "ExistKey 1 key");
                final List<Supplier<Object>> calls = List.of(
                    () -> client.existsBatch(keys),
                    () -> client.probeBatch(keys, LeasePolicy.lastHitOnly(CANDIDATE_SIZE)),
                    () -> client.probeBatch(keys, LeasePolicy.none()),
                    () -> client.exists(keys.get(0)));
                // Warm every path up first (JIT), then measure each in turn.
                for (int i = 0; i < Math.max(2000, iterations / 4); i++)
                {
                    calls.forEach(call -> check(call.get()));
                }
                for (int c = 0; c < calls.size(); c++)
                {
                    measure(names.get(c), iterations, calls.get(c));
                }
            }
            // The same calls over gRPC only, for comparison in the same run.
            try (GranaryClient grpc = GranaryClient.connect(
                ClientConfig.builder().masterAddress(master).fastLookups(false).build()))
            {
                for (int i = 0; i < Math.max(2000, iterations / 4); i++)
                {
                    check(grpc.existsBatch(keys));
                    check(grpc.probeBatch(keys, LeasePolicy.lastHitOnly(CANDIDATE_SIZE)));
                }
                measure("gRPC: BatchExistKey 640 keys", iterations / 2, () -> grpc.existsBatch(keys));
                measure("gRPC: BatchProbeKey LAST_HIT_ONLY 128x5", iterations / 2,
                    () -> grpc.probeBatch(keys, LeasePolicy.lastHitOnly(CANDIDATE_SIZE)));
            }
        }
        finally
        {
            heartbeats.shutdownNow();
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            if (child != null)
            {
                child.destroy();
                child.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static void measure(final String name, final int iterations, final Supplier<Object> call)
    {
        final Histogram h = new Histogram(3);
        for (int i = 0; i < iterations; i++)
        {
            final long start = System.nanoTime();
            check(call.get());
            h.recordValue((System.nanoTime() - start) / 1000);
        }
        System.out.printf(Locale.ROOT, "%-42s p50 %6d us  p90 %6d us  p99 %6d us  max %6d us  (n=%d)%n",
            name, h.getValueAtPercentile(50), h.getValueAtPercentile(90), h.getValueAtPercentile(99), h.getMaxValue(),
            h.getTotalCount());
    }

    private static void check(final Object result)
    {
        if (result instanceof List)
        {
            for (final Object r : (List<?>)result)
            {
                if (!((OpResult<?>)r).ok())
                {
                    throw new IllegalStateException("lookup failed: " + ((OpResult<?>)r).error());
                }
            }
        }
    }

    private static Process spawnMaster() throws IOException
    {
        final String java = System.getProperty("java.home") + "/bin/java";
        return new ProcessBuilder(java, "-Xmx1g", "-Dlogback.configurationFile=logback-bench.xml",
            "-cp", System.getProperty("java.class.path"),
            LookupLatency.class.getName() + "$MasterMain")
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    }

    private static String readReadyAddress(final Process child) throws IOException
    {
        final BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = out.readLine()) != null)
        {
            if (line.startsWith("ready "))
            {
                return line.substring("ready ".length()).trim();
            }
        }
        throw new IllegalStateException("master child exited before it was ready");
    }

    static void quietLogging()
    {
        if (System.getProperty("logback.configurationFile") == null)
        {
            System.setProperty("logback.configurationFile", "logback-bench.xml");
        }
    }

    /** The master child: prints "ready host:port", then serves until killed. */
    public static final class MasterMain
    {
        public static void main(final String[] args) throws InterruptedException
        {
            final MasterServer server = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(0).adminPort(-1));
            Runtime.getRuntime().addShutdownHook(new Thread(server::close));
            System.out.println("ready 127.0.0.1:" + server.grpcPort());
            System.out.flush();
            Thread.currentThread().join();
        }
    }
}
