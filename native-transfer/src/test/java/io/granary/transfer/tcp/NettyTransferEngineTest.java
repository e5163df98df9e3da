package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** Engine behaviour against scripted peers; round trips against the real server live in storage-node. */
class NettyTransferEngineTest
{
    private static final long WAIT_SECONDS = 10;
    private final List<AutoCloseable> resources = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
    }

    private NettyTransferEngine engine(final TransferConfig config)
    {
        final NettyTransferEngine engine = new NettyTransferEngine(config);
        resources.add(engine);
        return engine;
    }

    private FakeNode node(final FakeNode.Mode mode) throws Exception
    {
        final FakeNode node = new FakeNode(mode);
        resources.add(node);
        return node;
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    private static TransferRequest read(final String endpoint, final long offset, final int length)
    {
        return TransferRequest.read(endpoint, 42, offset, ByteBuffer.allocate(length), length);
    }

    @Test
    void shouldReportJavaTransport()
    {
        final NettyTransferEngine engine = engine(new TransferConfig());
        assertThat(engine.kind()).isEqualTo(TransportKind.JAVA);
        assertThat(engine.transportName()).isIn("epoll", "nio");
    }

    @Test
    void shouldFailWithTransferFailWhenPeerIsNotListening() throws Exception
    {
        final int port;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            port = probe.getLocalPort();
        }
        final NettyTransferEngine engine = engine(new TransferConfig().connectTimeoutMs(2_000));

        assertThat(await(engine.submit(read("127.0.0.1:" + port, 0, 16)))).isEqualTo(TRANSFER_FAIL_VALUE);
        assertThat(await(engine.submit(read("127.0.0.1:" + port, 0, 16)))).isEqualTo(TRANSFER_FAIL_VALUE);
        assertThat(engine.outstandingFrames("127.0.0.1:" + port)).isZero();
    }

    @Test
    void shouldTimeOutWhenPeerAcceptsButNeverAnswers() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.SILENT);
        final NettyTransferEngine engine = engine(new TransferConfig().transferTimeoutMs(200).lanesPerPeer(2));

        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 4; i++)
        {
            futures.add(engine.submit(read(node.endpoint(), i * 100L, 100)));
        }
        futures.add(engine.submit(TransferRequest.write(node.endpoint(), 42, 0, ByteBuffer.allocateDirect(64), 64)));
        for (final CompletableFuture<Integer> future : futures)
        {
            assertThat(await(future)).isEqualTo(RPC_TIMEOUT_VALUE);
        }
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldTimeOutAndLetGoOfAWritePayloadThePeerNeverReads() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.NO_READ);
        final NettyTransferEngine engine = engine(
            new TransferConfig().transferTimeoutMs(300).lanesPerPeer(1).sliceBytes(64 << 20));
        final int length = 48 << 20; // more than the socket buffers of both ends hold
        final ByteBuffer payload = ByteBuffer.allocateDirect(length);

        assertThat(await(engine.submit(TransferRequest.write(node.endpoint(), 42, 0, payload, length))))
            .isEqualTo(RPC_TIMEOUT_VALUE);
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldRejectBeyondMaxQueuedTransfersAtOnceWithoutPendingAdmissions() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        final int max = 8;
        final NettyTransferEngine engine = engine(
            new TransferConfig().maxQueuedTransfersPerPeer(max).maxPendingAdmissionsPerPeer(0).lanesPerPeer(2));

        final List<CompletableFuture<Integer>> admitted = new ArrayList<>();
        final List<CompletableFuture<Integer>> excess = new ArrayList<>();
        for (int i = 0; i < max + 12; i++)
        {
            (i < max ? admitted : excess).add(engine.submit(read(node.endpoint(), i, 32)));
        }
        for (final CompletableFuture<Integer> future : excess)
        {
            assertThat(future).isCompletedWithValue(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        }
        assertThat(admitted).noneMatch(CompletableFuture::isDone);
        assertThat(engine.outstandingFrames(node.endpoint())).isEqualTo(max);
        assertThat(engine.pendingAdmissions(node.endpoint())).isZero();
        assertThat(engine.rejectedQueueFull()).isEqualTo(excess.size());

        node.openGate();
        for (final CompletableFuture<Integer> future : admitted)
        {
            assertThat(await(future)).isZero();
        }
        assertThat(await(engine.submit(read(node.endpoint(), 0, 32)))).isZero();
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldCompleteFuturesOnEngineThreads() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        final NettyTransferEngine engine = engine(new TransferConfig());
        final CompletableFuture<String> thread = engine.submit(read(node.endpoint(), 0, 8))
            .thenApply(status -> status + "@" + Thread.currentThread().getName());

        node.openGate();

        assertThat(thread.get(WAIT_SECONDS, TimeUnit.SECONDS)).startsWith("0@granary-transfer");
    }

    @Test
    void shouldAdmitATransferWithMoreSlicesThanTheBoundWhenThePeerIsIdle() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        node.openGate();
        final NettyTransferEngine engine = engine(new TransferConfig().maxQueuedTransfersPerPeer(2).sliceBytes(4096));
        final ByteBuffer into = ByteBuffer.allocate(5 * 4096);

        assertThat(await(engine.submit(TransferRequest.read(node.endpoint(), 42, 0, into, into.capacity())))).isZero();
        assertThat(node.requests()).hasSize(5);
    }

    @Test
    void shouldSliceAndPlaceEveryByteOfAReadAtTheRightPosition() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        node.openGate();
        final NettyTransferEngine engine = engine(new TransferConfig().sliceBytes(4096).lanesPerPeer(3));
        final int length = 3 * 4096 + 100;
        final long remoteOffset = 1_000_003;
        final ByteBuffer into = ByteBuffer.allocate(length + 20);
        into.position(7).limit(7 + length);

        assertThat(await(engine.submit(TransferRequest.read(node.endpoint(), 42, remoteOffset, into, length))))
            .isZero();

        assertThat(into.position()).isEqualTo(7);
        assertThat(into.limit()).isEqualTo(7 + length);
        for (int i = 0; i < length; i++)
        {
            assertThat(into.get(7 + i)).as("byte %d", i).isEqualTo((byte)(remoteOffset + i));
        }
        assertThat(into.get(6)).isZero();
        assertThat(into.duplicate().clear().get(7 + length)).isZero();
        assertThat(node.requests()).hasSize(4)
            .allSatisfy(h -> assertThat(h.opcode).isEqualTo(Opcode.READ))
            .extracting(h -> h.length).containsExactlyInAnyOrder(4096L, 4096L, 4096L, 100L);
        assertThat(node.requests()).extracting(h -> h.offset).containsExactlyInAnyOrder(
            remoteOffset, remoteOffset + 4096, remoteOffset + 8192, remoteOffset + 12288);
        assertThat(node.connections()).isEqualTo(3);
    }

    @Test
    void shouldFailPendingRequestsWithTransferFailOnClose() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.SILENT);
        final NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig());
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 10; i++)
        {
            futures.add(engine.submit(read(node.endpoint(), i, 8)));
        }
        waitFor(() -> node.requests().size() == 10);

        engine.close();

        for (final CompletableFuture<Integer> future : futures)
        {
            assertThat(future).isCompletedWithValue(TRANSFER_FAIL_VALUE);
        }
        assertThat(engine.submit(read(node.endpoint(), 0, 8))).isCompletedWithValue(TRANSFER_FAIL_VALUE);
        engine.close(); // idempotent
    }

    @Test
    void shouldFailPendingWhenConnectionBreaksAndUseAFreshLaneAfterwards() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.DROP_FIRST_CONNECTION);
        final NettyTransferEngine engine = engine(new TransferConfig().lanesPerPeer(1));

        assertThat(await(engine.submit(read(node.endpoint(), 0, 8)))).isEqualTo(TRANSFER_FAIL_VALUE);
        assertThat(await(engine.submit(read(node.endpoint(), 0, 8)))).isZero();
        assertThat(node.connections()).isEqualTo(2);
    }

    @Test
    void shouldCarryTheAccessTokenInTheHeader() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        node.openGate();
        final NettyTransferEngine engine = engine(new TransferConfig());
        final byte[] token = token(1_700_000_000L);
        final ByteBuffer data = ByteBuffer.allocate(10);
        final TransferRequest request = new TransferRequest(
            TransferRequest.Op.WRITE, node.endpoint(), 7, 99, data, 10, token);

        assertThat(await(engine.submit(request))).isZero();

        final FrameHeader header = node.requests().peek();
        assertThat(header.opcode).isEqualTo(Opcode.WRITE);
        assertThat(header.segmentId).isEqualTo(7);
        assertThat(header.offset).isEqualTo(99);
        assertThat(header.length).isEqualTo(10);
        assertThat(header.grantDelta).isZero();
        assertThat(header.grantLength).isEqualTo(10);
        assertThat(header.tokenExpirySec).isEqualTo(1_700_000_000L);
        for (int i = 0; i < FrameDescriptor.TOKEN_MAC_LENGTH; i++)
        {
            assertThat(header.tokenMac[i]).isEqualTo((byte)(4 + i));
        }
    }

    @Test
    void shouldPlaceEverySliceInTheGrantOfItsToken() throws Exception
    {
        final FakeNode node = node(FakeNode.Mode.ANSWER);
        node.openGate();
        final NettyTransferEngine engine = engine(new TransferConfig().sliceBytes(4096).lanesPerPeer(2));
        final ByteBuffer data = ByteBuffer.allocate(10_000);
        // The grant is the whole extent [1000, 21000); the request reads 10000 bytes from 5000 in 3 slices.
        final TransferRequest request = new TransferRequest(
            TransferRequest.Op.READ, node.endpoint(), 7, 5_000, data, 10_000, token(1_700_000_000L), 1_000, 20_000);

        assertThat(await(engine.submit(request))).isZero();

        final List<FrameHeader> frames = new ArrayList<>(node.requests());
        frames.sort(Comparator.comparingLong(h -> h.offset));
        assertThat(frames).hasSize(3);
        assertThat(frames).extracting(h -> h.offset).containsExactly(5_000L, 9_096L, 13_192L);
        assertThat(frames).extracting(h -> h.grantDelta).containsExactly(4_000L, 8_096L, 12_192L);
        assertThat(frames).allSatisfy(h ->
        {
            assertThat(h.grantLength).isEqualTo(20_000);
            assertThat(h.tokenExpirySec).isEqualTo(1_700_000_000L);
        });
    }

    @Test
    void shouldRefuseTokensThatCannotGrantTheRequest() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig());
        final ByteBuffer buffer = ByteBuffer.allocate(8);
        final byte[] token = token(1_700_000_000L);

        assertThat(engine.submit(new TransferRequest(
            TransferRequest.Op.READ, "127.0.0.1:1", 1, 96, buffer, 8, token, 100, 50)))
            .as("starts before the grant").isCompletedWithValue(INVALID_PARAMS_VALUE);
        assertThat(engine.submit(new TransferRequest(
            TransferRequest.Op.READ, "127.0.0.1:1", 1, 145, buffer, 8, token, 100, 50)))
            .as("ends after the grant").isCompletedWithValue(INVALID_PARAMS_VALUE);
        assertThat(engine.submit(new TransferRequest(
            TransferRequest.Op.READ, "127.0.0.1:1", 1, 0, buffer, 8, token, 0, 1L << 32)))
            .as("a grant the header cannot carry").isCompletedWithValue(INVALID_PARAMS_VALUE);
        assertThat(engine.submit(new TransferRequest(
            TransferRequest.Op.READ, "127.0.0.1:1", 1, 0, buffer, 8, token(0))))
            .as("no expiry").isCompletedWithValue(INVALID_PARAMS_VALUE);
    }

    private static byte[] token(final long expirySec)
    {
        final byte[] token = new byte[NettyTransferEngine.ACCESS_TOKEN_LENGTH];
        ByteBuffer.wrap(token).putInt((int)expirySec);
        for (int i = 4; i < token.length; i++)
        {
            token[i] = (byte)i;
        }
        return token;
    }

    @Test
    void shouldRefuseBadRequestsWithInvalidParams() throws Exception
    {
        final NettyTransferEngine engine = engine(new TransferConfig());
        final ByteBuffer buffer = ByteBuffer.allocate(8);

        assertThat(engine.submit(TransferRequest.read("no-port", 1, 0, buffer, 8)))
            .isCompletedWithValue(INVALID_PARAMS_VALUE);
        assertThat(engine.submit(TransferRequest.read("127.0.0.1:0", 1, 0, buffer, 8)))
            .isCompletedWithValue(INVALID_PARAMS_VALUE);
        assertThat(engine.submit(TransferRequest.read("127.0.0.1:1", 1, 0, buffer.asReadOnlyBuffer(), 8)))
            .isCompletedWithValue(INVALID_PARAMS_VALUE);
        final byte[] shortToken = new byte[3];
        assertThat(engine.submit(
            new TransferRequest(TransferRequest.Op.WRITE, "127.0.0.1:1", 1, 0, buffer, 8, shortToken)))
            .isCompletedWithValue(INVALID_PARAMS_VALUE);
    }

    @Test
    void shouldParseEndpoints()
    {
        assertThat(NettyTransferEngine.parseEndpoint("127.0.0.1:9000"))
            .isEqualTo(new InetSocketAddress("127.0.0.1", 9000));
        assertThat(NettyTransferEngine.parseEndpoint("[::1]:9000"))
            .isEqualTo(new InetSocketAddress("::1", 9000));
        assertThat(NettyTransferEngine.parseEndpoint("127.0.0.1")).isNull();
        assertThat(NettyTransferEngine.parseEndpoint(":9000")).isNull();
        assertThat(NettyTransferEngine.parseEndpoint("127.0.0.1:")).isNull();
        assertThat(NettyTransferEngine.parseEndpoint("127.0.0.1:x")).isNull();
        assertThat(NettyTransferEngine.parseEndpoint("127.0.0.1:70000")).isNull();
    }

    private static void waitFor(final java.util.function.BooleanSupplier condition) throws InterruptedException
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!condition.getAsBoolean())
        {
            assertThat(System.nanoTime()).as("condition not met in time").isLessThan(deadlineNs);
            Thread.sleep(5);
        }
    }
}
