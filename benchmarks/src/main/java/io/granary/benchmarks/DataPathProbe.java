package io.granary.benchmarks;

import io.granary.cli.LocalCluster;
import io.granary.cli.LoopbackBaseline;
import io.granary.client.GranaryClient;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import io.granary.node.segment.Segment;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.natives.NativeTransferEngine;
import io.granary.transfer.tcp.CallerDrivenEngine;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;

/**
 * Where the time of a put and a get goes: the transfer engine alone (READ/WRITE of one value
 * against an in-process node) next to the full client put/get (master round trips included), and the
 * master round trips alone (an exists over the lookup port; PutStart + PutEnd over gRPC without any
 * data), for one value size. For reference in the same run: the node driven by the calling thread over a
 * blocking socket (no engine), and the loopback limit of the same shapes without any node
 * ({@link LoopbackBaseline}). A diagnostic, not a target check.
 *
 * <pre>java -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.DataPathProbe [sizeBytes] [iterations] [batch]</pre>
 * With a batch above 1 it measures batches of that many values instead (engine with the whole batch in flight,
 * pipelined blocking client, client getBatch/existsBatch/putBatch, BatchPutStart + BatchPutEnd).
 */
public final class DataPathProbe
{
    public static void main(final String[] args) throws Exception
    {
        LookupLatency.quietLogging();
        final int size = args.length > 0 ? Integer.parseInt(args[0]) : 1 << 20;
        final int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        final int batch = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        if (batch > 1024)
        {
            throw new IllegalArgumentException("batch must be at most 1024, was " + batch);
        }
        if (batch > 1)
        {
            probeBatch(size, iterations, batch);
            return;
        }
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(1L << 30)
            .masterContext(rawDataPath()).nodeContext(c -> c.preTouch(true)).start())
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
            // The engines synchronous calls use, the calling thread moving the bytes itself (no event loop): the Java
            // one, and the JNI one (the client's native transport).
            try (TransferEngine engine = new CallerDrivenEngine(new TransferConfig().conclude()))
            {
                measureCallerDriven("caller-driven", engine, node.endpoint(), segment, direct, heap, iterations);
            }
            try (TransferEngine engine = new NativeTransferEngine(new TransferConfig().conclude()))
            {
                measureCallerDriven("native caller-driven", engine, node.endpoint(), segment, direct, heap, iterations);
            }
            catch (final UnsatisfiedLinkError | IllegalStateException unavailable)
            {
                System.out.println("native engine unavailable: " + unavailable.getMessage());
            }
            final java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
            measure("CRC32C of the value (direct buffer)", iterations, size, () ->
            {
                crc.reset();
                crc.update(direct.duplicate());
                return (int)crc.getValue() == 42 ? 1 : 0;
            });
            // The node served by the calling thread itself over one blocking socket (no engine, no event loop):
            // what the node can give an ideal client, next to plain sockets without any node at all.
            try (BlockingFrameClient blocking = new BlockingFrameClient(node.endpoint()))
            {
                measure("blocking NIO WRITE frame to the node", iterations, size,
                    () -> blocking.write(segment.id(), 0, direct.duplicate(), size));
                measure("blocking NIO READ frame from the node", iterations, size,
                    () -> blocking.read(segment.id(), 0, direct.duplicate(), size));
                final long extents = segment.sizeBytes() / size;
                final long[] next = {0};
                measure("blocking NIO WRITE frame, fresh offsets", iterations, size,
                    () -> blocking.write(segment.id(), (next[0]++ % extents) * size, direct.duplicate(), size));
                measure("blocking NIO READ frame, fresh offsets", iterations, size,
                    () -> blocking.read(segment.id(), (next[0]++ % extents) * size, direct.duplicate(), size));
            }
            for (final LoopbackBaseline.Shape shape : List.of(LoopbackBaseline.Shape.PUT, LoopbackBaseline.Shape.GET))
            {
                final LoopbackBaseline.Result limit = LoopbackBaseline.measure(shape, size, 1, 1,
                    Duration.ofMillis(500), Duration.ofSeconds(2), null);
                System.out.printf(Locale.ROOT, "%-40s %8.3f GB/s  p50 %6d us  p99 %6d us%n",
                    "loopback limit, " + shape.label() + " shape (no node)", limit.gbPerSecond(),
                    Math.round(limit.p50Ms() * 1000), Math.round(limit.p99Ms() * 1000));
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
                // The same lookup round trip right after a put of the size, untimed (its data just went over loopback
                // and the node just answered): what a round trip costs inside a put loop rather than in a tight one.
                measure("client exists right after a put", iterations, 0, 1, () ->
                {
                    client.put("probe/" + n[0]++, direct.duplicate(), PutOptions.defaults());
                    return 0;
                }, () -> client.exists("probe/" + (n[0] - 1 - m[0]++ % 500)) ? 0 : 1);
                // The same calls with one byte of data: what a call costs apart from moving its bytes.
                final ByteBuffer one = ByteBuffer.allocateDirect(1);
                final int[] t = {0};
                measure("client put of 1 byte (the calls alone)", iterations, 1, () ->
                {
                    client.put("tiny/" + t[0]++, one.duplicate(), PutOptions.defaults());
                    return 0;
                });
                measure("client getInto of 1 byte (the calls alone)", iterations, 1,
                    () -> client.getInto("tiny/" + (t[0] - 1 - m[0]++ % 500), one.duplicate()) == 1 ? 0 : 1);
            }
            // The control plane of a put without its data: PutStart + PutEnd over gRPC (the client's fallback path).
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

    /** Drives {@code driver} until {@code future} is done; its code. */
    /**
     * WRITE and READ of one value by {@code engine} driven by the calling thread: to the same extent every time, and
     * to the next extent of the segment every time (as puts and reads of many keys meet memory no cache holds).
     */
    private static void measureCallerDriven(
        final String label, final TransferEngine engine, final String endpoint, final Segment segment,
        final ByteBuffer direct, final ByteBuffer heap, final int iterations)
    {
        final int size = direct.capacity();
        final long extents = segment.sizeBytes() / size;
        final long[] next = {0};
        final LongSupplier fresh = () -> (next[0]++ % extents) * size;
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            measure(label + " WRITE from direct", iterations, size, () -> drive(driver,
                engine.submit(TransferRequest.write(endpoint, segment.id(), 0, direct.duplicate(), size))));
            measure(label + " WRITE, fresh offsets", iterations, size, () -> drive(driver,
                engine.submit(TransferRequest.write(endpoint, segment.id(), fresh.getAsLong(), direct.duplicate(),
                    size))));
            measure(label + " READ into direct", iterations, size, () -> drive(driver,
                engine.submit(TransferRequest.read(endpoint, segment.id(), 0, direct.duplicate(), size))));
            measure(label + " READ, fresh offsets", iterations, size, () -> drive(driver,
                engine.submit(TransferRequest.read(endpoint, segment.id(), fresh.getAsLong(), direct.duplicate(),
                    size))));
            measure(label + " READ into heap", iterations, size, () -> drive(driver,
                engine.submit(TransferRequest.read(endpoint, segment.id(), 0, heap.duplicate(), size))));
        }
    }

    private static int drive(final TransferEngine.Driver driver, final CompletableFuture<Integer> future)
    {
        while (!future.isDone())
        {
            driver.drive(100_000_000L);
        }
        return future.join();
    }

    /**
     * The probe's cluster: the engine and the blocking client send raw frames without access tokens, so the master
     * issues none (the client calls measured in the same cluster then run without tokens too).
     */
    private static MasterServer.Context rawDataPath()
    {
        return LocalCluster.defaultMasterContext().dataTokens(false);
    }

    /**
     * The same split for batches of {@code batch} values: engine (all READs/WRITEs of a batch in flight, then joined),
     * the node driven by a blocking pipelined client, the loopback limit, and the client's batch calls with and
     * without data.
     */
    private static void probeBatch(final int size, final int iterations, final int batch) throws Exception
    {
        System.out.printf(Locale.ROOT, "batches of %d x %d bytes; GB/s and values/s per batch call%n", batch, size);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(1L << 30)
            .masterContext(rawDataPath()).nodeContext(c -> c.preTouch(true)).start())
        {
            final StorageNode node = cluster.nodes().get(0);
            final Segment segment = node.segments().get(0);
            final String endpoint = node.endpoint();
            final ByteBuffer direct = ByteBuffer.allocateDirect(size * batch);
            final ByteBuffer[] slices = new ByteBuffer[batch];
            for (int i = 0; i < batch; i++)
            {
                slices[i] = direct.duplicate().position(i * size).limit((i + 1) * size).slice();
            }
            final long bytes = (long)size * batch;
            try (TransferEngine engine = new NettyTransferEngine(new TransferConfig().conclude()))
            {
                @SuppressWarnings("unchecked")
                final CompletableFuture<Integer>[] futures = new CompletableFuture[batch];
                measure("engine WRITE x" + batch + " from direct", iterations, bytes, batch, () ->
                {
                    for (int i = 0; i < batch; i++)
                    {
                        futures[i] = engine.submit(
                            TransferRequest.write(endpoint, segment.id(), (long)i * size, slices[i].duplicate(), size));
                    }
                    return joinAll(futures);
                });
                measure("engine READ x" + batch + " into direct", iterations, bytes, batch, () ->
                {
                    for (int i = 0; i < batch; i++)
                    {
                        futures[i] = engine.submit(
                            TransferRequest.read(endpoint, segment.id(), (long)i * size, slices[i].duplicate(), size));
                    }
                    return joinAll(futures);
                });
            }
            try (CallerDrivenEngine engine = new CallerDrivenEngine(new TransferConfig().conclude());
                 TransferEngine.Driver driver = engine.openDriver())
            {
                @SuppressWarnings("unchecked")
                final CompletableFuture<Integer>[] futures = new CompletableFuture[batch];
                measure("caller-driven WRITE x" + batch + " from direct", iterations, bytes, batch, () ->
                {
                    for (int i = 0; i < batch; i++)
                    {
                        futures[i] = engine.submit(
                            TransferRequest.write(endpoint, segment.id(), (long)i * size, slices[i].duplicate(), size));
                    }
                    return driveAll(driver, futures);
                });
                measure("caller-driven READ x" + batch + " into direct", iterations, bytes, batch, () ->
                {
                    for (int i = 0; i < batch; i++)
                    {
                        futures[i] = engine.submit(
                            TransferRequest.read(endpoint, segment.id(), (long)i * size, slices[i].duplicate(), size));
                    }
                    return driveAll(driver, futures);
                });
            }
            try (BlockingFrameClient blocking = new BlockingFrameClient(endpoint))
            {
                final ByteBuffer in = ByteBuffer.allocateDirect((FrameDescriptor.HEADER_LENGTH + size) * batch);
                measure("blocking NIO READ x" + batch + " pipelined", iterations, bytes, batch,
                    () -> blocking.readPipelined(segment.id(), batch, size, in));
            }
            final LoopbackBaseline.Result limit = LoopbackBaseline.measure(LoopbackBaseline.Shape.GET, size, 1, batch,
                Duration.ofMillis(500), Duration.ofSeconds(2), null);
            System.out.printf(Locale.ROOT, "%-40s %8.3f GB/s %10.0f values/s  p50 %6d us  p99 %6d us%n",
                "loopback limit, get shape x" + batch, limit.gbPerSecond(), limit.valuesPerSecond(),
                Math.round(limit.p50Ms() * 1000), Math.round(limit.p99Ms() * 1000));

            try (GranaryClient client = cluster.newClient())
            {
                final List<String> keys = new ArrayList<>(batch);
                final List<ByteBuffer> values = new ArrayList<>(batch);
                for (int i = 0; i < batch; i++)
                {
                    keys.add("probe/get/" + i);
                    values.add(slices[i]);
                }
                check("putBatch", failures(client.putBatch(keys, values, PutOptions.defaults())));
                measure("client getBatch x" + batch + " (byte[])", iterations, bytes, batch,
                    () -> failures(client.getBatch(keys)));
                measure("client existsBatch x" + batch + " (no data)", iterations, 0, batch,
                    () -> failures(client.existsBatch(keys)));
                final int[] n = {0};
                measure("client putBatch x" + batch, iterations, bytes, batch, () ->
                {
                    final List<String> fresh = new ArrayList<>(batch);
                    for (int i = 0; i < batch; i++)
                    {
                        fresh.add("probe/put/" + n[0]++);
                    }
                    final int failed = failures(client.putBatch(fresh, values, PutOptions.defaults()));
                    if (n[0] % (batch * 64) == 0)
                    {
                        client.removeByRegex("probe/put/.*");
                    }
                    return failed;
                });
            }
            final ManagedChannel channel = NettyChannelBuilder.forTarget(cluster.masterAddress()).usePlaintext()
                .directExecutor().build();
            try
            {
                final MasterServiceGrpc.MasterServiceBlockingStub stub = MasterServiceGrpc.newBlockingStub(channel);
                final int[] k = {0};
                measure("master BatchPutStart+BatchPutEnd (gRPC)", iterations, 0, batch, () ->
                {
                    final BatchPutStartRequest.Builder start = BatchPutStartRequest.newBuilder().setTenant("default")
                        .setClientId("probe");
                    final BatchKeysRequest.Builder end = BatchKeysRequest.newBuilder().setTenant("default")
                        .setClientId("probe");
                    for (int i = 0; i < batch; i++)
                    {
                        final String key = "meta/" + k[0]++;
                        start.addKeys(key).addValueLengths(size);
                        end.addKeys(key);
                    }
                    final int started = stub.batchPutStart(start.build()).getCode();
                    final int ended = stub.batchPutEnd(end.build()).getCode();
                    if (k[0] % (batch * 64) == 0)
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

    private static int driveAll(final TransferEngine.Driver driver, final CompletableFuture<Integer>[] futures)
    {
        int status = 0;
        for (final CompletableFuture<Integer> future : futures)
        {
            status |= drive(driver, future);
        }
        return status;
    }

    private static int joinAll(final CompletableFuture<Integer>[] futures)
    {
        int status = 0;
        for (final CompletableFuture<Integer> future : futures)
        {
            status |= future.join();
        }
        return status;
    }

    private static int failures(final List<? extends OpResult<?>> results)
    {
        int failed = 0;
        for (final OpResult<?> result : results)
        {
            failed += result.ok() ? 0 : 1;
        }
        return failed;
    }

    private static void measure(final String name, final int iterations, final int size, final IntSupplier call)
    {
        measure(name, iterations, size, 1, call);
    }

    private static void measure(
        final String name, final int iterations, final long bytesPerCall, final int valuesPerCall, final IntSupplier call)
    {
        measure(name, iterations, bytesPerCall, valuesPerCall, () -> 0, call);
    }

    /**
     * Times {@code call} alone, {@code iterations} times, each right after an untimed {@code before} (a call that
     * returns 0 on success); the GB/s column is then per second of the timed calls only.
     */
    private static void measure(
        final String name, final int iterations, final long bytesPerCall, final int valuesPerCall,
        final IntSupplier before, final IntSupplier call)
    {
        for (int i = 0; i < Math.max(200, iterations / 5); i++)
        {
            check(name, before.getAsInt());
            check(name, call.getAsInt());
        }
        final Histogram h = new Histogram(3);
        long timedNs = 0;
        for (int i = 0; i < iterations; i++)
        {
            check(name, before.getAsInt());
            final long t = System.nanoTime();
            check(name, call.getAsInt());
            final long took = System.nanoTime() - t;
            timedNs += took;
            h.recordValue(took / 1000);
        }
        final double seconds = timedNs / 1e9;
        final String rate = bytesPerCall == 0 ? "       -     " :
            String.format(Locale.ROOT, "%8.3f GB/s", (double)bytesPerCall * iterations / seconds / 1e9);
        final String values = valuesPerCall == 1 ? "" :
            String.format(Locale.ROOT, " %10.0f values/s", (double)valuesPerCall * iterations / seconds);
        System.out.printf(Locale.ROOT, "%-40s %s%s  p50 %6d us  p90 %6d us  p99 %6d us  p99.9 %6d us%n",
            name, rate, values, h.getValueAtPercentile(50), h.getValueAtPercentile(90), h.getValueAtPercentile(99),
            h.getValueAtPercentile(99.9));
    }

    /** The frame protocol driven by the calling thread over one blocking SocketChannel. Single-threaded. */
    private static final class BlockingFrameClient implements AutoCloseable
    {
        private final SocketChannel channel;
        private final ByteBuf request = Unpooled.directBuffer(FrameDescriptor.HEADER_LENGTH);
        private final ByteBuffer response = ByteBuffer.allocateDirect(FrameDescriptor.HEADER_LENGTH);
        private final ByteBuffer[] gather = new ByteBuffer[2];
        private final ByteBuffer requests = ByteBuffer.allocateDirect(FrameDescriptor.HEADER_LENGTH * 1024);
        private long requestId;

        BlockingFrameClient(final String endpoint) throws IOException
        {
            final int colon = endpoint.lastIndexOf(':');
            channel = SocketChannel.open();
            channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            channel.setOption(StandardSocketOptions.SO_SNDBUF, LoopbackBaseline.SOCKET_BUFFER_BYTES);
            channel.setOption(StandardSocketOptions.SO_RCVBUF, LoopbackBaseline.SOCKET_BUFFER_BYTES);
            channel.connect(new InetSocketAddress(endpoint.substring(0, colon),
                Integer.parseInt(endpoint.substring(colon + 1))));
        }

        int write(final int segmentId, final long offset, final ByteBuffer src, final int length)
        {
            try
            {
                gather[0] = header(Opcode.WRITE, segmentId, offset, length);
                gather[1] = src;
                while (gather[1].hasRemaining())
                {
                    channel.write(gather);
                }
                return readResponseStatus();
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        }

        /**
         * {@code count} READs of {@code length} bytes (offsets i x length), all written before any is read; the
         * responses are read in bulk into {@code in} (large enough for all of them) and parsed there, without copying
         * the payloads anywhere else, as the loopback baseline treats its values.
         */
        int readPipelined(final int segmentId, final int count, final int length, final ByteBuffer in)
        {
            try
            {
                requests.clear();
                for (int i = 0; i < count; i++)
                {
                    requests.put(header(Opcode.READ, segmentId, (long)i * length, length));
                }
                requests.flip();
                while (requests.hasRemaining())
                {
                    channel.write(requests);
                }
                in.clear();
                int status = 0;
                int cursor = 0;
                for (int i = 0; i < count; i++)
                {
                    fill(in, cursor + FrameDescriptor.HEADER_LENGTH);
                    final int one = in.getInt(cursor + FrameDescriptor.STATUS_OFFSET);
                    status |= one;
                    cursor += FrameDescriptor.HEADER_LENGTH + (one == 0 ? length : 0);
                }
                fill(in, cursor);
                return status;
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        }

        private void fill(final ByteBuffer in, final int upTo) throws IOException
        {
            while (in.position() < upTo)
            {
                if (channel.read(in) < 0)
                {
                    throw new IOException("the node closed the connection");
                }
            }
        }

        int read(final int segmentId, final long offset, final ByteBuffer dst, final int length)
        {
            try
            {
                final ByteBuffer header = header(Opcode.READ, segmentId, offset, length);
                while (header.hasRemaining())
                {
                    channel.write(header);
                }
                final int status = readResponseStatus();
                dst.limit(dst.position() + length);
                while (status == 0 && dst.hasRemaining())
                {
                    if (channel.read(dst) < 0)
                    {
                        throw new IOException("the node closed the connection");
                    }
                }
                return status;
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        }

        private ByteBuffer header(final int opcode, final int segmentId, final long offset, final int length)
        {
            request.clear();
            FrameHeader.encode(request, opcode, 0, ++requestId, segmentId, 0, offset, length, 0, null);
            return request.nioBuffer();
        }

        private int readResponseStatus() throws IOException
        {
            response.clear();
            while (response.hasRemaining())
            {
                if (channel.read(response) < 0)
                {
                    throw new IOException("the node closed the connection");
                }
            }
            return response.getInt(FrameDescriptor.STATUS_OFFSET);
        }

        @Override
        public void close() throws IOException
        {
            request.release();
            channel.close();
        }
    }

    private static void check(final String name, final int status)
    {
        if (status != 0)
        {
            throw new IllegalStateException(name + " failed with " + status);
        }
    }
}
