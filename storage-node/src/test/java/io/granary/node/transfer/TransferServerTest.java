package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.Await;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransferEngine;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** The transfer server and the Java engine together over loopback. */
class TransferServerTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private static final long SEGMENT_BYTES = 64L << 20;
    private static final int MAX_FRAME_BYTES = 4 << 20;

    private final List<AutoCloseable> resources = new ArrayList<>();
    private final Random random = new Random(20240607);
    private SegmentRegistry registry;
    private Segment segment;
    private TransferServer server;
    private String endpoint;

    @BeforeEach
    void startServer()
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("test/seg0", SEGMENT_BYTES);
        server = new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 2, true, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED, serverTransport()).start();
        endpoint = "127.0.0.1:" + server.port();
    }

    @AfterEach
    void stopServer() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
        server.close();
        assertThat(server.isTerminated()).isTrue();
        registry.close();
    }

    private NettyTransferEngine engine(final TransferConfig config)
    {
        final NettyTransferEngine engine = new NettyTransferEngine(config);
        resources.add(engine);
        return engine;
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(30, TimeUnit.SECONDS);
    }

    private static int write(
        final NettyTransferEngine engine, final String endpoint, final int segmentId, final long offset,
        final ByteBuffer from, final int length) throws Exception
    {
        return await(engine.submit(TransferRequest.write(endpoint, segmentId, offset, from, length)));
    }

    private static int read(
        final NettyTransferEngine engine, final String endpoint, final int segmentId, final long offset,
        final ByteBuffer into, final int length) throws Exception
    {
        return await(engine.submit(TransferRequest.read(endpoint, segmentId, offset, into, length)));
    }

    private byte[] randomBytes(final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    private static ByteBuffer buffer(final byte[] content, final boolean direct, final int position)
    {
        final ByteBuffer buffer = direct ?
            ByteBuffer.allocateDirect(position + content.length + 3) :
            ByteBuffer.allocate(position + content.length + 3);
        buffer.position(position);
        buffer.put(content);
        buffer.position(position).limit(position + content.length);
        return buffer;
    }

    private static byte[] contentOf(final ByteBuffer buffer, final int position, final int length)
    {
        final byte[] bytes = new byte[length];
        buffer.duplicate().clear().position(position).get(bytes);
        return bytes;
    }

    private byte[] segmentBytes(final Segment seg, final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new UnsafeBuffer(seg.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    @Test
    void shouldWriteThenReadBackRandomDataOfMixedSizes() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig());
        final int[] sizes = {1, 2, 63, 64, 65, 4095, 4096, 4097, 65_537, (1 << 20) - 1, (1 << 20) + 1, 4 << 20};
        long offset = 13;
        for (int i = 0; i < sizes.length; i++)
        {
            final int size = sizes[i];
            final byte[] content = randomBytes(size);
            final boolean direct = i % 2 == 0;

            final ByteBuffer source = buffer(content, direct, 0);
            assertThat(write(engine, endpoint, segment.id(), offset, source, size))
                .as("write of %d bytes", size).isZero();
            assertThat(source.position()).isZero();
            assertThat(segmentBytes(segment, offset, size)).as("segment after write of %d bytes", size)
                .isEqualTo(content);

            final ByteBuffer target = direct ? ByteBuffer.allocateDirect(size) : ByteBuffer.allocate(size);
            assertThat(read(engine, endpoint, segment.id(), offset, target, size))
                .as("read of %d bytes", size).isZero();
            assertThat(contentOf(target, 0, size)).as("read back %d bytes", size).isEqualTo(content);
            offset += size + 7;
        }
        assertThat(server.errorResponses()).isZero();
        final long moved = offset - 13 - 7 * sizes.length;
        assertThat(server.bytesIn()).isGreaterThan(moved);
        // A server counts bytes out once its send returned, which may be after the client has them all.
        final long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (server.bytesOut() <= moved && System.nanoTime() < until)
        {
            Thread.sleep(1);
        }
        assertThat(server.bytesOut()).isGreaterThan(moved);
    }

    @Test
    void shouldServeThousandsOfPipelinedConcurrentRequestsAcrossLanes() throws Exception
    {
        final int requests = 4000;
        final int size = 512;
        final NettyTransferEngine engine = engine(
            new TransferConfig().lanesPerPeer(4).maxQueuedTransfersPerPeer(2 * requests));
        final byte[][] contents = new byte[requests][];
        for (int i = 0; i < requests; i++)
        {
            contents[i] = randomBytes(size);
        }

        final ExecutorService submitters = Executors.newFixedThreadPool(4);
        try
        {
            final List<Future<List<CompletableFuture<Integer>>>> batches = new ArrayList<>();
            for (int t = 0; t < 4; t++)
            {
                final int first = t;
                batches.add(submitters.submit(() ->
                {
                    final List<CompletableFuture<Integer>> futures = new ArrayList<>();
                    for (int i = first; i < requests; i += 4)
                    {
                        futures.add(engine.submit(TransferRequest.write(
                            endpoint, segment.id(), (long)i * size, ByteBuffer.wrap(contents[i]), size)));
                    }
                    return futures;
                }));
            }
            for (final Future<List<CompletableFuture<Integer>>> batch : batches)
            {
                for (final CompletableFuture<Integer> future : batch.get(30, TimeUnit.SECONDS))
                {
                    assertThat(await(future)).isZero();
                }
            }
        }
        finally
        {
            submitters.shutdownNow();
        }

        final ByteBuffer[] targets = new ByteBuffer[requests];
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        for (int i = requests - 1; i >= 0; i--)
        {
            targets[i] = ByteBuffer.allocateDirect(size);
            reads.add(engine.submit(TransferRequest.read(endpoint, segment.id(), (long)i * size, targets[i], size)));
        }
        for (final CompletableFuture<Integer> future : reads)
        {
            assertThat(await(future)).isZero();
        }
        for (int i = 0; i < requests; i++)
        {
            assertThat(contentOf(targets[i], 0, size)).as("request %d", i).isEqualTo(contents[i]);
        }
        assertThat(server.requests()).isEqualTo(2L * requests);
        assertThat(server.openConnections()).isEqualTo(4);
    }

    @Test
    void shouldServeManyClientsOnManyConnectionsOverEveryEventLoopWithTheSharedStateRight() throws Exception
    {
        // Three event loops, six clients (Java and native engines, three lanes each: 18 connections), tokens on.
        final SegmentRegistry loopsRegistry = new SegmentRegistry();
        resources.add(loopsRegistry);
        final Segment seg = loopsRegistry.allocate("loops/seg0", 24L << 20);
        final byte[] key = AccessTokenCodec.newRandomKey();
        final AccessTokenVerifier verifier = new AccessTokenVerifier(Clock.SYSTEM);
        verifier.updateKey(key);
        final TransferServer loops = new TransferServer("127.0.0.1", 0, loopsRegistry, MAX_FRAME_BYTES, 3, true,
            TransferMetrics.NONE, verifier, TlsSettings.DISABLED, serverTransport()).start();
        resources.add(loops);
        final String at = "127.0.0.1:" + loops.port();
        final int clients = 6;
        final TransferEngine[] engines = new TransferEngine[clients];
        for (int c = 0; c < clients; c++)
        {
            // Every byte and token through the server's loops: a same-host copy checks no MAC (protocol.md,
            // "LOCAL_CONNECT"), so the old key's tokens below would read locally.
            final TransferConfig config = new TransferConfig().lanesPerPeer(3).sliceBytes(256 << 10)
                .localTransfers(false);
            engines[c] = c % 2 == 0 ? new NettyTransferEngine(config) : new NativeTransferEngine(config);
            resources.add(engines[c]);
        }
        final AccessTokenCodec signer = new AccessTokenCodec(key);
        final long expiry = System.currentTimeMillis() / 1000 + 600;
        final ExecutorService threads = Executors.newFixedThreadPool(clients);
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
        try
        {
            final List<Future<long[]>> results = new ArrayList<>();
            for (int c = 0; c < clients; c++)
            {
                final int client = c;
                results.add(threads.submit(() ->
                {
                    // Each client owns 4 MiB of the segment: 8 values per round, small ones and sliced ones.
                    final Random values = new Random(1000 + client);
                    final AccessTokenCodec signing = new AccessTokenCodec(key); // a codec is not thread safe
                    final long base = client * (4L << 20);
                    long rounds = 0;
                    long bytes = 0;
                    while (rounds == 0 || System.nanoTime() < deadline)
                    {
                        final List<byte[]> written = new ArrayList<>();
                        final List<CompletableFuture<Integer>> puts = new ArrayList<>();
                        long offset = base;
                        for (int v = 0; v < 8; v++)
                        {
                            final byte[] value = new byte[v % 4 == 3 ? 300_000 + values.nextInt(200_000) :
                                1 + values.nextInt(9000)];
                            values.nextBytes(value);
                            written.add(value);
                            final CommitRecord record = new CommitRecord(0, "tenant", "c" + client + "-v" + v, "",
                                value.length, rounds + 1, 0, 0);
                            puts.add(engines[client].submit(new TransferRequest(TransferRequest.Op.WRITE, at,
                                seg.id(), offset, ByteBuffer.wrap(value), value.length,
                                signing.sign(Opcode.WRITE, seg.id(), offset, value.length, expiry), record.encode())));
                            offset += value.length;
                        }
                        for (final CompletableFuture<Integer> put : puts)
                        {
                            assertThat(await(put)).isZero();
                        }
                        final List<ByteBuffer> back = new ArrayList<>();
                        final List<CompletableFuture<Integer>> gets = new ArrayList<>();
                        offset = base;
                        for (final byte[] value : written)
                        {
                            final ByteBuffer into = ByteBuffer.allocateDirect(value.length);
                            back.add(into);
                            gets.add(engines[client].submit(new TransferRequest(TransferRequest.Op.READ, at,
                                seg.id(), offset, into, value.length,
                                signing.sign(Opcode.READ, seg.id(), offset, value.length, expiry))));
                            offset += value.length;
                        }
                        for (int v = 0; v < written.size(); v++)
                        {
                            assertThat(await(gets.get(v))).isZero();
                            assertThat(contentOf(back.get(v), 0, written.get(v).length)).isEqualTo(written.get(v));
                            bytes += 2L * written.get(v).length;
                        }
                        rounds++;
                    }
                    return new long[] {rounds, bytes};
                }));
            }
            final long[] rounds = new long[clients];
            for (int c = 0; c < clients; c++)
            {
                rounds[c] = results.get(c).get(60, TimeUnit.SECONDS)[0];
                assertThat(rounds[c]).isPositive();
            }
            // Every client's last values are in the ledger: COMMITs from every loop reached the one ledger.
            final List<SegmentLedger.Entry> ledger = seg.ledger().snapshot();
            for (int c = 0; c < clients; c++)
            {
                final long last = rounds[c];
                for (int v = 0; v < 8; v++)
                {
                    final String name = "c" + c + "-v" + v;
                    assertThat(ledger).as(name).filteredOn(e -> e.key().equals(name) && e.version() == last)
                        .hasSize(1);
                }
            }
        }
        finally
        {
            threads.shutdownNow();
        }
        assertThat(loops.openConnections()).isEqualTo(3L * clients);
        assertThat(loops.protocolErrors()).isZero();

        // A new key reaches every connection: the old tokens are refused on all of them, the new ones served.
        final byte[] next = AccessTokenCodec.newRandomKey();
        verifier.updateKey(next);
        final AccessTokenCodec nextSigner = new AccessTokenCodec(next);
        for (final TransferEngine engine : engines)
        {
            for (final AccessTokenCodec codec : List.of(signer, nextSigner))
            {
                final List<CompletableFuture<Integer>> reads = new ArrayList<>();
                for (int lane = 0; lane < 3; lane++)
                {
                    reads.add(engine.submit(new TransferRequest(TransferRequest.Op.READ, at, seg.id(), 0,
                        ByteBuffer.allocateDirect(100_000), 100_000,
                        codec.sign(Opcode.READ, seg.id(), 0, 100_000, expiry))));
                }
                for (final CompletableFuture<Integer> read : reads)
                {
                    assertThat(await(read)).isEqualTo(codec == signer ? ACCESS_DENIED_VALUE : 0);
                }
            }
        }
        assertThat(loops.openConnections()).isEqualTo(3L * clients);
    }

    @Test
    void shouldSliceTransfersLongerThanTheSliceSize() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().sliceBytes(4096).lanesPerPeer(3));
        final int size = (1 << 20) + 123;
        final byte[] content = randomBytes(size);
        final long offset = 5 * 4096 + 11;

        assertThat(write(engine, endpoint, segment.id(), offset, buffer(content, true, 0), size))
            .isZero();
        final long slices = (size + 4095) / 4096;
        assertThat(server.requests()).isEqualTo(slices);
        assertThat(segmentBytes(segment, offset, size)).isEqualTo(content);

        final ByteBuffer target = ByteBuffer.allocate(size);
        assertThat(read(engine, endpoint, segment.id(), offset, target, size)).isZero();
        assertThat(target.array()).isEqualTo(content);
        assertThat(server.requests()).isEqualTo(2 * slices);
    }

    @Test
    void shouldReadIntoHeapAndDirectBuffersAtNonZeroPositions() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().sliceBytes(8192));
        final int size = 20_000;
        final byte[] content = randomBytes(size);
        final long offset = 1 << 20;
        new UnsafeBuffer(segment.address() + offset, size).putBytes(0, content);

        for (final boolean direct : new boolean[] {false, true})
        {
            final int position = 1001;
            final ByteBuffer target = direct ? ByteBuffer.allocateDirect(position + size + 50) :
                ByteBuffer.allocate(position + size + 50);
            target.position(position).limit(position + size);

            assertThat(read(engine, endpoint, segment.id(), offset, target, size)).isZero();

            assertThat(target.position()).isEqualTo(position);
            assertThat(target.limit()).isEqualTo(position + size);
            assertThat(contentOf(target, position, size)).isEqualTo(content);
            assertThat(contentOf(target, 0, position)).containsOnly(0);
            assertThat(contentOf(target, position + size, 50)).containsOnly(0);
        }
    }

    @Test
    void shouldAnswerOutOfRangeWithInvalidParamsAndKeepServingTheConnection() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1));
        final long size = segment.sizeBytes();
        final ByteBuffer buffer = ByteBuffer.allocate(64);
        final byte[] before = segmentBytes(segment, size - 32, 32);

        assertThat(read(engine, endpoint, segment.id(), size - 32, buffer, 64))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(write(engine, endpoint, segment.id(), size - 32, buffer(randomBytes(64), false, 0), 64))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(write(engine, endpoint, segment.id(), Long.MAX_VALUE - 8, buffer, 64))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(read(engine, endpoint, segment.id(), 0, buffer, 0))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(segmentBytes(segment, size - 32, 32)).isEqualTo(before);

        final byte[] content = randomBytes(64);
        assertThat(write(engine, endpoint, segment.id(), size - 64, buffer(content, false, 0), 64))
            .isZero();
        assertThat(segmentBytes(segment, size - 64, 64)).isEqualTo(content);
        assertThat(server.openConnections()).isEqualTo(1);
        assertThat(server.protocolErrors()).isZero();
        assertThat(server.errorResponses()).isEqualTo(4);
    }

    @Test
    void shouldAnswerUnknownSegmentWithSegmentNotFound() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1));
        final int unknown = segment.id() + 1;

        assertThat(read(engine, endpoint, unknown, 0, ByteBuffer.allocate(16), 16))
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(write(engine, endpoint, unknown, 0, ByteBuffer.allocate(16), 16))
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(write(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(16), 16))
            .isZero();
        assertThat(server.openConnections()).isEqualTo(1);
    }

    @Test
    void shouldDiscardTheExactPayloadOfARejectedWriteAndStayInSync() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            final byte[] payload = randomBytes(1000);
            client.send(RawClient.header(Opcode.WRITE, 1, segment.id() + 1, 0, payload.length));
            client.send(payload);
            client.send(RawClient.header(Opcode.WRITE, 2, segment.id(), segment.sizeBytes() - 10, payload.length));
            client.send(payload);
            client.send(RawClient.header(Opcode.PING, 3, 0, 0, 0));

            final FrameHeader first = client.readHeader();
            assertThat(first.opcode).isEqualTo(Opcode.WRITE_RESPONSE);
            assertThat(first.requestId).isEqualTo(1);
            assertThat(first.status).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
            final FrameHeader second = client.readHeader();
            assertThat(second.requestId).isEqualTo(2);
            assertThat(second.status).isEqualTo(INVALID_PARAMS_VALUE);
            final FrameHeader pong = client.readHeader();
            assertThat(pong.opcode).isEqualTo(Opcode.PING_RESPONSE);
            assertThat(pong.requestId).isEqualTo(3);
            assertThat(pong.status).isZero();
        }
    }

    @Test
    void shouldLandLargeWritesArrivingInUnevenPiecesExactlyInTheirRangeAndStayInSync() throws Exception
    {
        // Large WRITE payloads are read from the socket straight into segment memory; every piece must land
        // at the right place, nothing around the range may change, and the frames behind must still decode.
        final int size = (1 << 20) + 123;
        final long offset = 8192;
        final byte[] before = randomBytes((int)offset + size + 8192);
        new UnsafeBuffer(segment.address(), before.length).putBytes(0, before);
        final byte[] first = randomBytes(size);
        final byte[] second = randomBytes(size);
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.WRITE, 1, segment.id(), offset, size));
            int sent = 0;
            for (final int piece : new int[]{1, 63, 4096, 100_000, 17, 300_000})
            {
                client.send(Arrays.copyOfRange(first, sent, sent + piece));
                sent += piece;
            }
            client.send(Arrays.copyOfRange(first, sent, size));
            // A second large WRITE over the same range, its header glued to its payload and to a READ request.
            final byte[] glued = new byte[64 + size + 64];
            System.arraycopy(RawClient.header(Opcode.WRITE, 2, segment.id(), offset, size), 0, glued, 0, 64);
            System.arraycopy(second, 0, glued, 64, size);
            System.arraycopy(RawClient.header(Opcode.READ, 3, segment.id(), offset, size), 0, glued, 64 + size, 64);
            client.send(glued);

            final FrameHeader one = client.readHeader();
            assertThat(one.requestId).isEqualTo(1);
            assertThat(one.status).isZero();
            final FrameHeader two = client.readHeader();
            assertThat(two.requestId).isEqualTo(2);
            assertThat(two.status).isZero();
            final FrameHeader three = client.readHeader();
            assertThat(three.requestId).isEqualTo(3);
            assertThat(three.status).isZero();
            assertThat(client.readPayload(size)).isEqualTo(second);
        }
        assertThat(segmentBytes(segment, offset, size)).isEqualTo(second);
        assertThat(segmentBytes(segment, 0, (int)offset))
            .isEqualTo(Arrays.copyOfRange(before, 0, (int)offset));
        assertThat(segmentBytes(segment, offset + size, 8192))
            .isEqualTo(Arrays.copyOfRange(before, (int)offset + size, before.length));
    }

    @Test
    void shouldAnswerAReadVectorWithAStatusPerEntryAndTheBytesOfTheGoodOnesInOrder() throws Exception
    {
        final byte[] content = randomBytes(64 << 10);
        new UnsafeBuffer(segment.address(), content.length).putBytes(0, content);
        final long[][] entries = {
            {segment.id(), 0, 4096},                        // good
            {segment.id() + 1, 0, 100},                     // unknown segment
            {segment.id(), 10_000, 1},                      // good, one byte
            {segment.id(), SEGMENT_BYTES - 10, 100},        // past the end
            {segment.id(), 5, 0},                           // empty
            {segment.id(), 20_000, 40_000}};                // good
        final byte[] vector = new byte[64 * (entries.length + 1)];
        System.arraycopy(RawClient.header(Opcode.READV, 7, 0, 0, 64L * entries.length), 0, vector, 0, 64);
        for (int i = 0; i < entries.length; i++)
        {
            System.arraycopy(RawClient.header(Opcode.READ, i, (int)entries[i][0], entries[i][1], entries[i][2]), 0,
                vector, 64 * (i + 1), 64);
        }
        try (RawClient client = new RawClient(server.port()))
        {
            client.sendByteByByte(Arrays.copyOf(vector, 100)); // entries split across reads
            client.send(Arrays.copyOfRange(vector, 100, vector.length));
            client.send(RawClient.header(Opcode.PING, 8, 0, 0, 0));

            final FrameHeader answer = client.readHeader();
            assertThat(answer.opcode).isEqualTo(Opcode.READV_RESPONSE);
            assertThat(answer.requestId).isEqualTo(7);
            assertThat(answer.status).isZero();
            assertThat(answer.length).isEqualTo(4L * entries.length + 4096 + 1 + 40_000);
            final ByteBuffer statuses = ByteBuffer.wrap(client.readPayload(4 * entries.length));
            assertThat(new int[]{statuses.getInt(), statuses.getInt(), statuses.getInt(), statuses.getInt(),
                statuses.getInt(), statuses.getInt()})
                .containsExactly(0, SEGMENT_NOT_FOUND_VALUE, 0, INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE, 0);
            assertThat(client.readPayload(4096)).isEqualTo(Arrays.copyOfRange(content, 0, 4096));
            assertThat(client.readPayload(1)).isEqualTo(Arrays.copyOfRange(content, 10_000, 10_001));
            assertThat(client.readPayload(40_000)).isEqualTo(Arrays.copyOfRange(content, 20_000, 60_000));
            assertThat(client.readHeader().opcode).isEqualTo(Opcode.PING_RESPONSE); // still in sync
        }
    }

    /** A request header with a nonzero {@code status}, which no well-behaved client sends. */
    private static byte[] headerWithStatus(
        final int opcode, final long requestId, final int segmentId, final int status, final long offset,
        final long length)
    {
        final io.netty.buffer.ByteBuf buf = io.netty.buffer.Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        FrameHeader.encode(buf, opcode, 0, requestId, segmentId, status, offset, length, 0, null);
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
        buf.readBytes(bytes).release();
        return bytes;
    }

    @Test
    void shouldRefuseAVectorEntryWithANonzeroStatusAloneAndAVectorHeaderWithOneWhole() throws Exception
    {
        final byte[] content = randomBytes(4096);
        new UnsafeBuffer(segment.address(), content.length).putBytes(0, content);
        try (RawClient client = new RawClient(server.port()))
        {
            // Entry 0 is a good READ, entry 1 the same READ with status -1.
            client.send(RawClient.header(Opcode.READV, 1, 0, 0, 128));
            client.send(RawClient.header(Opcode.READ, 0, segment.id(), 0, 100));
            client.send(headerWithStatus(Opcode.READ, 1, segment.id(), -1, 0, 100));
            // A vector whose own header carries a status, with one good entry: consumed and refused whole.
            client.send(headerWithStatus(Opcode.READV, 2, 0, 7, 0, 64));
            client.send(RawClient.header(Opcode.READ, 0, segment.id(), 0, 100));
            client.send(RawClient.header(Opcode.PING, 3, 0, 0, 0));

            final FrameHeader first = client.readHeader();
            assertThat(first.requestId).isEqualTo(1);
            assertThat(first.status).isZero();
            assertThat(first.length).isEqualTo(8 + 100);
            final ByteBuffer statuses = ByteBuffer.wrap(client.readPayload(8));
            assertThat(new int[]{statuses.getInt(), statuses.getInt()}).containsExactly(0, INVALID_PARAMS_VALUE);
            assertThat(client.readPayload(100)).isEqualTo(Arrays.copyOf(content, 100));
            final FrameHeader second = client.readHeader();
            assertThat(second.requestId).isEqualTo(2);
            assertThat(second.status).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(second.length).isZero();
            assertThat(client.readHeader().opcode).isEqualTo(Opcode.PING_RESPONSE); // still in sync
        }
    }

    @Test
    void shouldRefuseMalformedReadVectorsWholeAndStayInSync() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            // Not a whole number of entries: the 70 bytes are consumed and refused.
            client.send(RawClient.header(Opcode.READV, 1, 0, 0, 70));
            client.send(new byte[70]);
            // An entry that is not a READ.
            client.send(RawClient.header(Opcode.READV, 2, 0, 0, 64));
            client.send(RawClient.header(Opcode.WRITE, 0, segment.id(), 0, 10));
            // More entries than a vector may carry.
            final int tooMany = FrameDescriptor.MAX_VECTOR_ENTRIES + 1;
            client.send(RawClient.header(Opcode.READV, 3, 0, 0, 64L * tooMany));
            client.send(new byte[64 * tooMany]);
            client.send(RawClient.header(Opcode.PING, 4, 0, 0, 0));

            final FrameHeader first = client.readHeader();
            assertThat(first.requestId).isEqualTo(1);
            assertThat(first.status).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(first.length).isZero();
            final FrameHeader second = client.readHeader();
            assertThat(second.requestId).isEqualTo(2);
            assertThat(second.status).isZero();
            assertThat(client.readPayload(4)).isEqualTo(new byte[]{(byte)0xFF, (byte)0xFF, (byte)0xFD, (byte)0xA8});
            final FrameHeader third = client.readHeader();
            assertThat(third.requestId).isEqualTo(3);
            assertThat(third.status).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(client.readHeader().opcode).isEqualTo(Opcode.PING_RESPONSE);
        }
    }

    @Test
    void shouldBatchSmallReadsOfAnEngineIntoVectorsAndPlaceEveryByte() throws Exception
    {
        final int n = 300;
        final byte[] content = randomBytes(n * 1000);
        new UnsafeBuffer(segment.address(), content.length).putBytes(0, content);
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1));
        final ByteBuffer into = ByteBuffer.allocateDirect(n * 1000);
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final long requestsBefore = server.requests();
        final long vectorsBefore = server.readVectors();
        for (int i = 0; i < n; i++)
        {
            final ByteBuffer slot = into.duplicate().position(i * 1000).limit(i * 1000 + 999);
            // Every tenth read asks past the segment's end: that entry fails alone.
            final long offset = i % 10 == 9 ? SEGMENT_BYTES - 5 : i * 1000L;
            reads.add(engine.submit(TransferRequest.read(endpoint, segment.id(), offset, slot.slice(), 999)));
        }
        for (int i = 0; i < n; i++)
        {
            assertThat(await(reads.get(i))).as("read %d", i).isEqualTo(i % 10 == 9 ? INVALID_PARAMS_VALUE : 0);
            if (i % 10 != 9)
            {
                assertThat(contentOf(into, i * 1000, 999))
                    .isEqualTo(Arrays.copyOfRange(content, i * 1000, i * 1000 + 999));
            }
        }
        assertThat(server.requests() - requestsBefore).isEqualTo(n);
        final long vectors = server.readVectors() - vectorsBefore;
        assertThat(vectors).as("READV frames for %d small reads", n).isPositive().isLessThan(n / 2);
    }

    @Test
    void shouldPauseReadingWhileResponsesPileUpAndDeliverThemAllLater() throws Exception
    {
        final int size = 1 << 20;
        final int requests = 48; // far more response bytes than the write watermark and socket buffers hold
        final byte[] content = randomBytes(size);
        new UnsafeBuffer(segment.address(), size).putBytes(0, content);
        try (RawClient client = new RawClient(server.port()))
        {
            for (int i = 0; i < requests; i++)
            {
                client.send(RawClient.header(Opcode.READ, i, segment.id(), 0, size));
            }
            for (int i = 0; i < requests; i++)
            {
                final FrameHeader response = client.readHeader();
                assertThat(response.requestId).isEqualTo(i);
                assertThat(response.status).isZero();
                assertThat(client.readPayload(size)).isEqualTo(content);
            }
        }
        assertThat(server.requests()).isEqualTo(requests);
    }

    @Test
    void shouldReassembleFramesSplitIntoSingleBytes() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            final byte[] payload = randomBytes(300);
            client.sendByteByByte(RawClient.header(Opcode.WRITE, 77, segment.id(), 4096, payload.length));
            client.sendByteByByte(payload);
            final FrameHeader written = client.readHeader();
            assertThat(written.opcode).isEqualTo(Opcode.WRITE_RESPONSE);
            assertThat(written.requestId).isEqualTo(77);
            assertThat(written.status).isZero();
            assertThat(segmentBytes(segment, 4096, payload.length)).isEqualTo(payload);

            client.sendByteByByte(RawClient.header(Opcode.READ, 78, segment.id(), 4096, payload.length));
            final FrameHeader read = client.readHeader();
            assertThat(read.opcode).isEqualTo(Opcode.READ_RESPONSE);
            assertThat(read.requestId).isEqualTo(78);
            assertThat(read.status).isZero();
            assertThat(read.offset).isEqualTo(4096);
            assertThat(read.length).isEqualTo(payload.length);
            assertThat(client.readPayload(payload.length)).isEqualTo(payload);
        }
    }

    @Test
    void shouldCloseTheConnectionOnGarbageAndKeepServingNewClients() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(randomBytes(64));
            assertThat(client.closedByServer()).isTrue();
        }
        assertThat(server.protocolErrors()).isEqualTo(1);

        final NettyTransferEngine engine = engine(new TransferConfig());
        assertThat(write(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(8), 8))
            .isZero();
    }

    @Test
    void shouldDropTruncatedFramesWithTheirConnectionAndKeepServing() throws Exception
    {
        final byte[] before = segmentBytes(segment, 0, 4096);
        // A header cut short, then a WRITE whose payload stops half way: the peer goes away inside a frame.
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(Arrays.copyOf(RawClient.header(Opcode.WRITE, 1, segment.id(), 0, 4096), 40));
        }
        final byte[] half = randomBytes(2048);
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.WRITE, 2, segment.id(), 8192, 4096));
            client.send(half);
        }
        // A READ whose answer the peer never reads: the server lets the connection go.
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.READ, 3, segment.id(), 0, 1 << 20));
        }
        Await.until("the three connections accepted and closed",
            () -> server.connectionsOpened() == 3 && server.openConnections() == 0);
        assertThat(segmentBytes(segment, 0, 4096)).isEqualTo(before);
        // The bytes of the truncated WRITE that did arrive landed in its own range only.
        assertThat(segmentBytes(segment, 8192, 2048)).isEqualTo(half);

        final NettyTransferEngine engine = engine(new TransferConfig());
        final byte[] value = randomBytes(4096);
        assertThat(write(engine, endpoint, segment.id(), 0, ByteBuffer.wrap(value), value.length)).isZero();
        assertThat(segmentBytes(segment, 0, 4096)).isEqualTo(value);
    }

    @Test
    void shouldCloseTheConnectionOnAnOversizedLength() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.READ, 1, segment.id(), 0, MAX_FRAME_BYTES + 1L));
            assertThat(client.closedByServer()).isTrue();
        }
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.READ_RESPONSE, 1, segment.id(), 0, 0));
            assertThat(client.closedByServer()).isTrue();
        }
        assertThat(server.protocolErrors()).isEqualTo(2);
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(RawClient.header(Opcode.PING, 9, 0, 0, 0));
            assertThat(client.readHeader().requestId).isEqualTo(9);
        }
    }

    @Test
    void shouldFailTheLaneThatTheServerClosedAndRecoverOnAFreshOne() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1).sliceBytes(2 * MAX_FRAME_BYTES));
        final int tooLong = MAX_FRAME_BYTES + 1;

        assertThat(read(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(tooLong), tooLong))
            .isEqualTo(TRANSFER_FAIL_VALUE);
        assertThat(read(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(16), 16))
            .isZero();
        Await.until("the broken connection is gone", () -> server.openConnections() == 1);
    }

    @Test
    void shouldServeOffsetsBeyondTwoGibibytes() throws Exception
    {
        try (SegmentRegistry bigRegistry = new SegmentRegistry())
        {
            final Segment big = bigRegistry.allocate("test/big", 3L << 30);
            final TransferServer bigServer =
                new TransferServer("127.0.0.1", 0, bigRegistry, MAX_FRAME_BYTES, 1, true, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED, serverTransport()).start();
            try
            {
                final String bigEndpoint = "127.0.0.1:" + bigServer.port();
                final NettyTransferEngine engine = engine(new TransferConfig());
                final int size = 3 << 20;
                final long offset = (5L << 29) + 3; // 2.5 GiB + 3
                final byte[] content = randomBytes(size);

                assertThat(write(engine, bigEndpoint, big.id(), offset, buffer(content, true, 0), size))
                    .isZero();
                assertThat(segmentBytes(big, offset, size)).isEqualTo(content);
                final ByteBuffer target = ByteBuffer.allocateDirect(size);
                assertThat(read(engine, bigEndpoint, big.id(), offset, target, size)).isZero();
                assertThat(contentOf(target, 0, size)).isEqualTo(content);
                assertThat(read(engine, bigEndpoint, big.id(), big.sizeBytes() - 1, target, 2))
                    .isEqualTo(INVALID_PARAMS_VALUE);
            }
            finally
            {
                bigServer.close();
                assertThat(bigServer.isTerminated()).isTrue();
            }
        }
    }

    @Test
    void shouldFailPendingTransfersWhenTheServerCloses() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1));
        assertThat(read(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(16), 16)).isZero();

        server.close();

        assertThat(read(engine, endpoint, segment.id(), 0, ByteBuffer.allocate(16), 16))
            .isEqualTo(TRANSFER_FAIL_VALUE);
        assertThat(server.isTerminated()).isTrue();
    }
}
