package io.granary.transfer.natives;

import io.granary.common.tls.TlsSettings;
import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferEngines;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The JNI engine and server of libgranary_transfer from Java: the loader, transport selection, late commit records,
 * timeouts, admission, closing with work outstanding, and refusals before anything is sent.
 */
class NativeTransferEngineTest
{
    private static final int SEGMENT_ID = 7;
    private static final int SEGMENT_BYTES = 4 << 20;
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final List<byte[]> commits = new CopyOnWriteArrayList<>();
    private final List<String> closeReasons = new CopyOnWriteArrayList<>();
    private ByteBuffer segment;

    @BeforeAll
    static void requireTheLibrary()
    {
        assertThat(NativeTransfer.unavailabilityCause()).as("native transfer library").isNull();
        assertThat(NativeTransfer.version()).startsWith("granary-transfer");
    }

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
    }

    private <T extends AutoCloseable> T track(final T resource)
    {
        resources.add(resource);
        return resource;
    }

    /** A native server over one 4 MiB segment, without tokens; COMMIT payloads are recorded. */
    private NativeTransferServer server()
    {
        return server(false);
    }

    /** {@link #server()}, answering LOCAL_CONNECT when {@code localTransfers}. */
    private NativeTransferServer server(final boolean localTransfers)
    {
        segment = ByteBuffer.allocateDirect(SEGMENT_BYTES);
        final NativeTransferServer server = new NativeTransferServer("127.0.0.1", 0, 1 << 20, false, 1,
            localTransfers, loop -> new NativeTransferServer.Handler()
            {
                @Override
                public int onWrite(final int segmentId, final long offset, final int length)
                {
                    return 0;
                }

                @Override
                public int onCommit(final byte[] header, final byte[] payload, final int failedWriteStatus,
                    final int tokenStatus)
                {
                    if (payload == null)
                    {
                        return INVALID_PARAMS_VALUE;
                    }
                    commits.add(payload);
                    return failedWriteStatus;
                }

                @Override
                public void onClose(final String peer, final String reason)
                {
                    if (reason != null)
                    {
                        closeReasons.add(reason);
                    }
                }
            });
        track(server);
        server.segments(new int[] {SEGMENT_ID}, new long[] {PlatformDependent.directBufferAddress(segment)},
            new long[] {SEGMENT_BYTES});
        return server;
    }

    /** An engine of {@code config} with same-host transfers off, so that every byte crosses the sockets under test. */
    private NativeTransferEngine engine(final TransferConfig config)
    {
        return track(new NativeTransferEngine(config.localTransfers(false)));
    }

    /**
     * Against a server on this host that answers LOCAL_CONNECT: a value of 64 KiB or more moves with
     * process_vm_writev / process_vm_readv (not a byte of it through the socket) and its COMMIT over TCP, the READ
     * brings its CRC32C; a smaller value goes over TCP; with the switch off every value does.
     */
    @Test
    void shouldMoveBigValuesLocallyToAServerOnThisHostThatAgrees() throws Exception
    {
        final NativeTransferServer server = server(true);
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = track(new NativeTransferEngine(new TransferConfig().sliceBytes(64 << 10)));
        final byte[] value = new byte[300_000];
        new Random(11).nextBytes(value);
        final ByteBuffer source = ByteBuffer.allocateDirect(value.length).put(value).flip();
        final byte[] record = {1, 2, 3};

        long before = server.stats().bytesIn();
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT_ID, 4096,
            source, value.length, null, record)))).isZero();
        assertThat(server.stats().bytesIn() - before).as("only the COMMIT's bytes crossed the socket")
            .isLessThan(4096);
        assertThat(commits).hasSize(1);
        assertThat(commits.get(0)).containsExactly(record);
        final byte[] landed = new byte[value.length];
        segment.get(4096, landed);
        assertThat(landed).isEqualTo(value);
        assertThat(engine.localTransfers()).isEqualTo(1);

        final ByteBuffer into = ByteBuffer.allocateDirect(value.length);
        final TransferRequest read = new TransferRequest(TransferRequest.Op.READ, endpoint, SEGMENT_ID, 4096, into,
            value.length, null);
        read.requestReceivedCrc32c();
        final long out = server.stats().bytesOut();
        assertThat(await(engine.submit(read))).isZero();
        assertThat(server.stats().bytesOut()).as("nothing sent for the READ").isEqualTo(out);
        final byte[] back = new byte[value.length];
        into.get(back);
        assertThat(back).isEqualTo(value);
        final java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(value);
        assertThat(read.hasReceivedCrc32c()).isTrue();
        assertThat(read.receivedCrc32c()).isEqualTo((int)crc.getValue());
        assertThat(engine.localTransfers()).isEqualTo(2);

        before = server.stats().bytesIn();
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT_ID, 0,
            ByteBuffer.wrap(value), 1000, null, record)))).isZero();
        assertThat(server.stats().bytesIn() - before).as("a small value over TCP").isGreaterThanOrEqualTo(1000);
        assertThat(engine.localTransfers()).isEqualTo(2);
        assertThat(engine.localFallbacks()).isZero();

        final NativeTransferEngine off = engine(new TransferConfig().sliceBytes(64 << 10));
        before = server.stats().bytesIn();
        assertThat(await(off.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT_ID, 4096,
            source.rewind(), value.length, null, record)))).isZero();
        assertThat(server.stats().bytesIn() - before).isGreaterThanOrEqualTo(value.length);
        assertThat(off.localTransfers()).isZero();
    }

    /** A server that refuses LOCAL_CONNECT (its default): the value goes over TCP, counted as a fallback. */
    @Test
    void shouldFallBackToTcpWhenTheServerRefusesLocalTransfers() throws Exception
    {
        final NativeTransferServer server = server(false);
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = track(new NativeTransferEngine(new TransferConfig()));
        final byte[] value = new byte[100_000];
        new Random(12).nextBytes(value);
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT_ID, 0,
            ByteBuffer.wrap(value), value.length, null)))).isZero();
        final byte[] landed = new byte[value.length];
        segment.get(0, landed);
        assertThat(landed).isEqualTo(value);
        assertThat(server.stats().bytesIn()).isGreaterThanOrEqualTo(value.length);
        assertThat(engine.localTransfers()).isZero();
        assertThat(engine.localFallbacks()).isEqualTo(1);
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(20, TimeUnit.SECONDS);
    }

    @Test
    void shouldChooseTheNativeTransportForAutoWithoutTlsAndRefuseRdmaWithItsCause()
    {
        assertThat(TransferEngines.resolve(TransportKind.AUTO, false)).isEqualTo(TransportKind.NATIVE);
        assertThat(TransferEngines.resolve(TransportKind.AUTO, true)).isEqualTo(TransportKind.JAVA);
        assertThat(TransferEngines.resolve(TransportKind.JAVA, false)).isEqualTo(TransportKind.JAVA);
        assertThatThrownBy(() -> TransferEngines.resolve(TransportKind.NATIVE, true))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("plain TCP");
        // Without an RDMA device (none on the build machines; FakeVerbsRdmaTest has a fake one): a clear refusal.
        if (!NativeTransfer.isRdmaAvailable())
        {
            assertThatThrownBy(() -> TransferEngines.resolve(TransportKind.RDMA, false))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("transport rdma is not available");
            assertThat(NativeTransfer.rdmaUnavailabilityCause()).isNotBlank();
            assertThatThrownBy(() -> TransferEngines.create(TransportKind.RDMA, new TransferConfig()))
                .hasMessageContaining(NativeTransfer.rdmaUnavailabilityCause());
        }
        try (TransferEngine engine = TransferEngines.create(TransportKind.AUTO, new TransferConfig()))
        {
            assertThat(engine.kind()).isEqualTo(TransportKind.NATIVE);
        }
    }

    @Test
    void shouldRefuseTls()
    {
        final TransferConfig config = new TransferConfig().tls(TlsSettings.of(null, null, Path.of("/ca.pem"), null));
        assertThatThrownBy(() -> new NativeTransferEngine(config)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("no TLS");
    }

    @Test
    void shouldSendACommitWhoseRecordIsMadeWhileTheWriteIsInFlight() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig().sliceBytes(64 << 10));
        final byte[] value = new byte[200_000];
        new Random(5).nextBytes(value);
        for (final int length : new int[] {1000, value.length})
        {
            final CompletableFuture<byte[]> record = new CompletableFuture<>();
            final CompletableFuture<Integer> done = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                endpoint, SEGMENT_ID, 0, ByteBuffer.wrap(value), length, null, 0, length, record));
            // The WRITE lands, but the transfer waits for its COMMIT.
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (server.stats().bytesIn() < length && System.nanoTime() < deadline)
            {
                Thread.onSpinWait();
            }
            assertThat(done).isNotDone();
            assertThat(commits).hasSize(length == 1000 ? 0 : 1);
            record.complete(new byte[] {9, (byte)length});
            assertThat(await(done)).isZero();
            assertThat(commits.get(commits.size() - 1)).containsExactly(9, (byte)length);
        }
        final byte[] back = new byte[value.length];
        segment.get(0, back);
        assertThat(back).isEqualTo(value);

        final CompletableFuture<byte[]> broken = new CompletableFuture<>();
        final CompletableFuture<Integer> failed = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
            endpoint, SEGMENT_ID, 0, ByteBuffer.wrap(value), 100, null, 0, 100, broken));
        broken.completeExceptionally(new IllegalStateException("no checksum"));
        assertThat(await(failed)).isEqualTo(INTERNAL_ERROR_VALUE);
        assertThat(commits).hasSize(2);
    }

    @Test
    void shouldTimeOutQueueAndFailOnCloseAgainstANodeThatNeverAnswers() throws Exception
    {
        try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress()))
        {
            final String endpoint = "127.0.0.1:" + silent.getLocalPort();
            final NativeTransferEngine timing = engine(new TransferConfig().transferTimeoutMs(200));
            assertThat(await(timing.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10))))
                .isEqualTo(RPC_TIMEOUT_VALUE);

            final NativeTransferEngine queued = engine(new TransferConfig().maxQueuedTransfersPerPeer(1)
                .maxPendingAdmissionsPerPeer(1).admissionTimeoutMs(100));
            final CompletableFuture<Integer> first =
                queued.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10));
            final CompletableFuture<Integer> waiting =
                queued.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10));
            final CompletableFuture<Integer> refused =
                queued.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10));
            assertThat(await(refused)).isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
            assertThat(await(waiting)).isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
            assertThat(queued.outstandingFrames(endpoint)).isEqualTo(1);
            assertThat(queued.rejectedUnavailable()).isEqualTo(2);
            queued.close();
            assertThat(await(first)).isEqualTo(TRANSFER_FAIL_VALUE);
            assertThat(await(queued.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10))))
                .isEqualTo(TRANSFER_FAIL_VALUE);
        }
    }

    @Test
    void shouldServeTransfersInsideARegisteredBufferFromItsOneRegionAndCheckRegistrations() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig());
        final ByteBuffer pool = ByteBuffer.allocateDirect(1 << 20);
        assertThatThrownBy(() -> engine.registerMemory(ByteBuffer.allocate(64)))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("direct");
        assertThatThrownBy(() -> engine.registerMemory(ByteBuffer.allocateDirect(0)))
            .isInstanceOf(IllegalArgumentException.class);
        assertThat(engine.registerMemory(pool)).isTrue();
        assertThatThrownBy(() -> engine.registerMemory(pool.duplicate().position(4096).slice()))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
        assertThat(engine.registeredRegions()).as("the pool's region in the shared C engine").isEqualTo(1);

        // Writes from and reads into pages of the pool, by the engine's thread and by a driving caller (a lent C
        // engine, which pins the pool when it is made): every byte right, no region left per transfer.
        final Random random = new Random(3);
        final byte[] value = new byte[100_000];
        random.nextBytes(value);
        pool.put(0, value);
        assertThat(await(engine.submit(TransferRequest.write(endpoint, SEGMENT_ID, 8192,
            pool.duplicate().limit(value.length), value.length)))).isZero();
        final ByteBuffer back = pool.duplicate().position(500_000).slice();
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 8192, back, value.length))))
            .isZero();
        final byte[] got = new byte[value.length];
        back.get(0, got);
        assertThat(got).isEqualTo(value);
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            final ByteBuffer driven = pool.duplicate().position(700_000).slice();
            final CompletableFuture<Integer> read =
                engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 8192, driven, value.length));
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (driver.hasWork() && System.nanoTime() < deadline)
            {
                driver.drive(50_000_000L);
            }
            assertThat(read.getNow(-1)).isZero();
            driven.get(0, got);
            assertThat(got).isEqualTo(value);
            assertThat(engine.registeredRegions()).as("the pool pinned in the shared and the lent engine")
                .isEqualTo(2);
        }
        assertThat(engine.unregisterMemory(ByteBuffer.allocateDirect(64))).isFalse();
        assertThat(engine.unregisterMemory(pool.duplicate().position(64).slice())).as("a part of it").isFalse();
        assertThat(engine.unregisterMemory(pool.duplicate())).as("a duplicate names the same memory").isTrue();
        assertThat(engine.unregisterMemory(pool)).isFalse();
        assertThat(engine.registeredRegions()).isZero();
        assertThat(engine.registeredBuffers()).isZero();

        // At most MAX_REGISTERED_BUFFERS, refused clearly beyond.
        final List<ByteBuffer> many = new ArrayList<>();
        for (int i = 0; i < NativeTransferEngine.MAX_REGISTERED_BUFFERS; i++)
        {
            many.add(ByteBuffer.allocateDirect(4096));
            assertThat(engine.registerMemory(many.get(i))).isTrue();
        }
        assertThatThrownBy(() -> engine.registerMemory(ByteBuffer.allocateDirect(4096)))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("at most");
        for (final ByteBuffer buffer : many)
        {
            assertThat(engine.unregisterMemory(buffer)).isTrue();
        }
        assertThat(engine.registeredRegions()).isZero();
    }

    @Test
    void shouldStageManyHeapBufferTransfersAtOnceThroughReusedBuffersWithoutMixingThemUp() throws Exception
    {
        // 40 values of random sizes in flight together, from and into heap buffers (each staged through a pooled
        // direct buffer), three rounds of fresh content: a staging buffer handed to two transfers, or back to the
        // pool too early, would show as a value read back wrong.
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig());
        final Random random = new Random(31);
        for (int round = 0; round < 3; round++)
        {
            final byte[][] values = new byte[40][];
            final List<CompletableFuture<Integer>> writes = new ArrayList<>();
            for (int i = 0; i < values.length; i++)
            {
                values[i] = new byte[1 + random.nextInt(90_000)];
                random.nextBytes(values[i]);
                writes.add(engine.submit(TransferRequest.write(endpoint, SEGMENT_ID, i * 100_000L,
                    ByteBuffer.wrap(values[i]), values[i].length)));
            }
            for (final CompletableFuture<Integer> write : writes)
            {
                assertThat(await(write)).isZero();
            }
            final ByteBuffer[] backs = new ByteBuffer[values.length];
            final List<CompletableFuture<Integer>> reads = new ArrayList<>();
            for (int i = 0; i < values.length; i++)
            {
                backs[i] = ByteBuffer.allocate(values[i].length + 10).position(5);
                reads.add(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, i * 100_000L, backs[i],
                    values[i].length)));
            }
            for (int i = 0; i < values.length; i++)
            {
                assertThat(await(reads.get(i))).isZero();
                final byte[] got = new byte[values[i].length];
                backs[i].get(5, got);
                assertThat(got).as("round %d value %d", round, i).isEqualTo(values[i]);
                assertThat(backs[i].get(4)).as("nothing written before the position").isZero();
                assertThat(backs[i].get(5 + values[i].length)).as("nor after the value").isZero();
            }
        }
    }

    @Test
    void shouldReportTheCrc32cOfTheBytesAReadDeliveredWhenAsked() throws Exception
    {
        // A value sliced into 64 KiB frames over two lanes, into a direct and into a heap buffer (staged), a small one
        // and a changed byte: the CRC32C the engine reports is the JDK's over the bytes that arrived.
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig().sliceBytes(64 << 10));
        final byte[] value = new byte[1_000_003];
        new Random(17).nextBytes(value);
        assertThat(await(engine.submit(TransferRequest.write(endpoint, SEGMENT_ID, 8192,
            ByteBuffer.allocateDirect(value.length).put(value).flip(), value.length)))).isZero();
        final ByteBuffer direct = ByteBuffer.allocateDirect(value.length + 3).position(3);
        final TransferRequest intoDirect =
            TransferRequest.read(endpoint, SEGMENT_ID, 8192, direct, value.length).requestReceivedCrc32c();
        final ByteBuffer heap = ByteBuffer.allocate(value.length);
        final TransferRequest intoHeap =
            TransferRequest.read(endpoint, SEGMENT_ID, 8192, heap, value.length).requestReceivedCrc32c();
        final TransferRequest small =
            TransferRequest.read(endpoint, SEGMENT_ID, 8192 + 100, ByteBuffer.allocateDirect(500), 500)
                .requestReceivedCrc32c();
        final TransferRequest notAsked = TransferRequest.read(endpoint, SEGMENT_ID, 8192,
            ByteBuffer.allocateDirect(value.length), value.length);
        for (final TransferRequest request : List.of(intoDirect, intoHeap, small, notAsked))
        {
            assertThat(await(engine.submit(request))).isZero();
        }
        assertThat(intoDirect.hasReceivedCrc32c()).isTrue();
        assertThat(intoDirect.receivedCrc32c()).isEqualTo(crc32c(value, 0, value.length));
        assertThat(intoHeap.hasReceivedCrc32c()).isTrue();
        assertThat(intoHeap.receivedCrc32c()).isEqualTo(crc32c(value, 0, value.length));
        assertThat(heap.array()).isEqualTo(value);
        assertThat(small.hasReceivedCrc32c()).isTrue();
        assertThat(small.receivedCrc32c()).isEqualTo(crc32c(value, 100, 500));
        assertThat(notAsked.hasReceivedCrc32c()).isFalse();

        segment.put(8192 + 700_000, (byte)(value[700_000] ^ 1));
        final TransferRequest changed = TransferRequest.read(endpoint, SEGMENT_ID, 8192,
            ByteBuffer.allocateDirect(value.length), value.length).requestReceivedCrc32c();
        assertThat(await(engine.submit(changed))).isZero();
        assertThat(changed.hasReceivedCrc32c()).isTrue();
        value[700_000] ^= 1;
        assertThat(changed.receivedCrc32c()).isEqualTo(crc32c(value, 0, value.length));
        assertThatThrownBy(() -> TransferRequest.write(endpoint, SEGMENT_ID, 0, ByteBuffer.allocateDirect(1), 1)
            .requestReceivedCrc32c()).isInstanceOf(IllegalStateException.class);
    }

    private static int crc32c(final byte[] bytes, final int offset, final int length)
    {
        final java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(bytes, offset, length);
        return (int)crc.getValue();
    }

    @Test
    void shouldLetTheCallingThreadDriveItsOwnTransfers() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig().sliceBytes(64 << 10));
        final byte[] value = new byte[300_000];
        new Random(9).nextBytes(value);
        final Thread caller = Thread.currentThread();
        for (int call = 0; call < 3; call++)
        {
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                assertThat(driver).isNotNull();
                assertThat(driver.hasWork()).isFalse();
                final CompletableFuture<Thread> completedOn = new CompletableFuture<>();
                final CompletableFuture<Integer> write = engine.submit(TransferRequest.write(endpoint, SEGMENT_ID,
                    4096, ByteBuffer.allocateDirect(value.length).put(value).flip(), value.length));
                write.whenComplete((status, error) -> completedOn.complete(Thread.currentThread()));
                final ByteBuffer back = ByteBuffer.allocate(value.length);
                final CompletableFuture<Integer> read;
                try (TransferEngine.Driver nested = engine.openDriver())
                {
                    // A nested scope shares the outer one's engine: nothing moves until this thread drives.
                    final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                    while (!write.isDone() && System.nanoTime() < deadline)
                    {
                        nested.drive(50_000_000L);
                    }
                    read = engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 4096, back, value.length));
                }
                final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (driver.hasWork() && System.nanoTime() < deadline)
                {
                    driver.drive(50_000_000L);
                }
                assertThat(write.getNow(-1)).isZero();
                assertThat(completedOn.getNow(null)).isSameAs(caller);
                assertThat(read.getNow(-1)).isZero();
                assertThat(back.array()).isEqualTo(value);
            }
        }
        assertThat(engine.drivenTransfers()).isEqualTo(6);
        assertThat(engine.registeredRegions()).isZero();
        // Outside a scope, transfers go to the engine's own thread.
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 4096, ByteBuffer.allocateDirect(8),
            8)))).isZero();
        assertThat(engine.drivenTransfers()).isEqualTo(6);
    }

    /**
     * The small writes (with their records) of one driven call leave as WRITEVs of the configured size: every value in
     * the segment, every record committed once, with vectors off one WRITE_COMMIT each.
     */
    @Test
    void shouldSendTheSmallWritesOfADrivenCallAsVectorsOfTheConfiguredSize() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final int pages = 128;
        final byte[] content = new byte[pages * 4096];
        new Random(29).nextBytes(content);
        // entries per vector, and the WRITEVs one call of 128 small writes becomes (on one lane in a driver)
        final int[][] shapes = {{256, 1}, {32, 4}, {1, 0}};
        for (final int[] shape : shapes)
        {
            segment.clear();
            segment.put(new byte[SEGMENT_BYTES]).clear();
            commits.clear();
            final NativeTransferEngine engine = engine(new TransferConfig().maxVectorEntries(shape[0]));
            final long vectorsBefore = server.stats().writeVectors();
            final long requestsBefore = server.stats().requests();
            final ByteBuffer from = ByteBuffer.allocateDirect(content.length).put(content).flip();
            final List<CompletableFuture<Integer>> writes = new ArrayList<>();
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                for (int p = 0; p < pages; p++)
                {
                    writes.add(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT_ID,
                        p * 8192L, from.duplicate().position(p * 4096).limit((p + 1) * 4096).slice(), 4096, null,
                        new byte[] {7, (byte)p})));
                }
                drive(driver);
            }
            for (int p = 0; p < pages; p++)
            {
                assertThat(writes.get(p).getNow(-1)).as("write %d", p).isZero();
                final byte[] landed = new byte[4096];
                segment.get(p * 8192, landed);
                assertThat(landed).as("bytes of write %d", p)
                    .isEqualTo(java.util.Arrays.copyOfRange(content, p * 4096, (p + 1) * 4096));
            }
            assertThat(commits).hasSize(pages);
            for (int p = 0; p < pages; p++)
            {
                assertThat(commits.get(p)).as("record %d", p).containsExactly(7, (byte)p);
            }
            assertThat(server.stats().writeVectors() - vectorsBefore).as("WRITEVs with %d entries each", shape[0])
                .isEqualTo(shape[1]);
            assertThat(server.stats().requests() - requestsBefore).isEqualTo(pages);
        }
    }

    @Test
    void shouldSendTheSmallReadsOfADrivenCallAsVectorsOfTheConfiguredSize() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final byte[] content = fillSegment(21);
        final int pages = 128;
        // entries per vector, and the READVs one call of 128 small reads becomes (on one lane in a driver)
        final int[][] shapes = {{256, 1}, {32, 4}, {1, 0}};
        for (final int[] shape : shapes)
        {
            final NativeTransferEngine engine = engine(new TransferConfig().maxVectorEntries(shape[0]));
            final long vectorsBefore = server.stats().readVectors();
            final ByteBuffer into = ByteBuffer.allocateDirect(pages * 4096);
            final List<CompletableFuture<Integer>> reads = new ArrayList<>();
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                for (int p = 0; p < pages; p++)
                {
                    // page 17 asks for a range past the segment's end: refused alone
                    final long at = p == 17 ? SEGMENT_BYTES - 100 : (p * 31_337L) % (SEGMENT_BYTES - 4096);
                    reads.add(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, at,
                        into.duplicate().position(p * 4096).limit((p + 1) * 4096).slice(), 4096)));
                }
                drive(driver);
            }
            for (int p = 0; p < pages; p++)
            {
                final byte[] back = new byte[4096];
                into.get(p * 4096, back);
                if (p == 17)
                {
                    assertThat(reads.get(p).getNow(-1)).isEqualTo(INVALID_PARAMS_VALUE);
                    assertThat(back).isEqualTo(new byte[4096]);
                    continue;
                }
                assertThat(reads.get(p).getNow(-1)).as("read %d", p).isZero();
                final int at = (int)((p * 31_337L) % (SEGMENT_BYTES - 4096));
                assertThat(back).as("bytes of read %d", p).isEqualTo(java.util.Arrays.copyOfRange(content, at,
                    at + 4096));
            }
            assertThat(server.stats().readVectors() - vectorsBefore).as("READVs with %d entries each", shape[0])
                .isEqualTo(shape[1]);
            assertThat(engine.registeredRegions()).isZero();
        }
    }

    /**
     * In a driven call the slices of a big value go round-robin over the lanes (two connections, so two of the node's
     * threads serve one value), while small reads keep to the first lane: the second connection opens for the big
     * value only. Every byte checked.
     */
    @Test
    void shouldSpreadOnlyTheSlicesOfABigValueOverTheLanesOfADrivenCall() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final byte[] content = fillSegment(33);
        final NativeTransferEngine engine = engine(new TransferConfig().lanesPerPeer(2).sliceBytes(128 << 10));
        final long opened = server.stats().connectionsOpened();
        final int pages = 16;
        final ByteBuffer small = ByteBuffer.allocateDirect(pages * 4096);
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            for (int p = 0; p < pages; p++)
            {
                reads.add(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, p * 65_537L,
                    small.duplicate().position(p * 4096).limit((p + 1) * 4096).slice(), 4096)));
            }
            drive(driver);
        }
        for (int p = 0; p < pages; p++)
        {
            assertThat(reads.get(p).getNow(-1)).as("read %d", p).isZero();
            final byte[] back = new byte[4096];
            small.get(p * 4096, back);
            final int at = p * 65_537;
            assertThat(back).isEqualTo(java.util.Arrays.copyOfRange(content, at, at + 4096));
        }
        assertThat(server.stats().connectionsOpened() - opened).as("connections for small reads").isEqualTo(1);

        final int bigBytes = 512 << 10;
        final ByteBuffer big = ByteBuffer.allocateDirect(bigBytes);
        final long requests = server.stats().requests();
        final CompletableFuture<Integer> read;
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            read = engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 12_288, big, bigBytes));
            drive(driver);
        }
        assertThat(read.getNow(-1)).isZero();
        final byte[] back = new byte[bigBytes];
        big.get(0, back);
        assertThat(back).isEqualTo(java.util.Arrays.copyOfRange(content, 12_288, 12_288 + bigBytes));
        assertThat(server.stats().requests() - requests).as("slices of 128 KiB").isEqualTo(4);
        assertThat(server.stats().connectionsOpened() - opened).as("connections after the big read").isEqualTo(2);
    }

    /** Fills the test segment with random bytes of {@code seed}; returns them. */
    private byte[] fillSegment(final long seed)
    {
        final byte[] content = new byte[SEGMENT_BYTES];
        new Random(seed).nextBytes(content);
        segment.duplicate().put(content);
        return content;
    }

    private static void drive(final TransferEngine.Driver driver)
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (driver.hasWork() && System.nanoTime() < deadline)
        {
            driver.drive(50_000_000L);
        }
    }

    /**
     * Threads driving their own C engines use them without the lifecycle lock (only the owner frees a lent engine),
     * while another thread reads the counters of every engine and the engine is closed in the middle: every value read
     * back is the one written, a transfer fails only once the close began (TRANSFER_FAIL), and every caller ends. (A
     * use after free would need AddressSanitizer to show reliably; the C tests run under it.)
     */
    @Test
    void shouldKeepCallersDrivingTheirOwnEnginesSafeAcrossCounterReadsAndAClose() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig().sliceBytes(16 << 10));
        final int callers = 4;
        final int valueBytes = 40_000;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger verified = new AtomicInteger();
        final AtomicReference<Throwable> wrong = new AtomicReference<>();
        final CountDownLatch warmedUp = new CountDownLatch(callers);
        final List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < callers; c++)
        {
            final int offset = c * (SEGMENT_BYTES / callers);
            final Thread t = new Thread(() ->
            {
                final Random random = new Random(offset);
                final byte[] value = new byte[valueBytes];
                final ByteBuffer out = ByteBuffer.allocateDirect(valueBytes);
                final ByteBuffer back = ByteBuffer.allocateDirect(valueBytes);
                int rounds = 0;
                try
                {
                    while (!stop.get())
                    {
                        random.nextBytes(value);
                        out.clear().put(value).flip();
                        back.clear();
                        try (TransferEngine.Driver driver = engine.openDriver())
                        {
                            if (driver == null)
                            {
                                break; // closed
                            }
                            final CompletableFuture<Integer> write =
                                engine.submit(TransferRequest.write(endpoint, SEGMENT_ID, offset, out, valueBytes));
                            driveUntil(driver, write);
                            final CompletableFuture<Integer> read = write.getNow(-1) != 0 ? write :
                                engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, offset, back, valueBytes));
                            driveUntil(driver, read);
                            final int status = read.getNow(-1);
                            if (status == 0)
                            {
                                final byte[] got = new byte[valueBytes];
                                back.get(0, got);
                                if (!Arrays.equals(got, value))
                                {
                                    throw new AssertionError("a value read back differs from the one written");
                                }
                                verified.incrementAndGet();
                            }
                            else if (status != TRANSFER_FAIL_VALUE || !stop.get())
                            {
                                throw new AssertionError("transfer ended with " + status + " before the close");
                            }
                        }
                        if (++rounds == 20)
                        {
                            warmedUp.countDown();
                        }
                    }
                }
                catch (final Throwable ex)
                {
                    wrong.compareAndSet(null, ex);
                }
                finally
                {
                    if (rounds < 20)
                    {
                        warmedUp.countDown();
                    }
                }
            }, "driver-" + c);
            threads.add(t);
            t.start();
        }
        final Thread reader = new Thread(() ->
        {
            while (!stop.get())
            {
                engine.admittedTransfers(); // walks every lent engine under the read side
                engine.registeredRegions();
            }
        }, "counters");
        reader.start();
        assertThat(warmedUp.await(30, TimeUnit.SECONDS)).as("every caller ran 20 rounds").isTrue();
        stop.set(true);
        engine.close();
        for (final Thread t : threads)
        {
            t.join(TimeUnit.SECONDS.toMillis(30));
            assertThat(t.isAlive()).as(t.getName() + " still running").isFalse();
        }
        reader.join(TimeUnit.SECONDS.toMillis(30));
        assertThat(wrong.get()).as("what went wrong in a caller").isNull();
        assertThat(verified.get()).as("values verified").isGreaterThanOrEqualTo(callers * 20);
        assertThat(engine.openDriver()).isNull();
    }

    private static void driveUntil(final TransferEngine.Driver driver, final CompletableFuture<Integer> transfer)
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!transfer.isDone() && System.nanoTime() < deadline)
        {
            driver.drive(20_000_000L);
        }
        if (!transfer.isDone())
        {
            throw new AssertionError("a driven transfer did not complete in 20 s");
        }
    }

    @Test
    void shouldFailWhatADriverLeavesOpenOnceItsBuffersAreLetGo() throws Exception
    {
        try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress()))
        {
            final String endpoint = "127.0.0.1:" + silent.getLocalPort();
            final NativeTransferEngine engine = engine(new TransferConfig());
            final CompletableFuture<Integer> open;
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                open = engine.submit(TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocateDirect(10), 10));
                driver.drive(20_000_000L);
                assertThat(driver.hasWork()).isTrue();
            }
            assertThat(open.getNow(-1)).isEqualTo(TRANSFER_FAIL_VALUE);
            assertThat(engine.registeredRegions()).isZero();
            engine.close();
            assertThat(engine.openDriver()).isNull();
        }
    }

    @Test
    void shouldRefuseBadRequestsBeforeSendingAnything() throws Exception
    {
        final NativeTransferServer server = server();
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = engine(new TransferConfig());
        final ByteBuffer into = ByteBuffer.allocateDirect(100);
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, SEGMENT_ID, 0, into, 100,
            new byte[5])))).as("token of the wrong length").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, SEGMENT_ID, 0, into, 100,
            new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH])))).as("zero expiry").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 0, into.asReadOnlyBuffer(), 100))))
            .as("read-only destination").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(await(engine.submit(TransferRequest.read("no-port", SEGMENT_ID, 0, into, 100))))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(server.stats().requests()).isZero();
        final ServerSocket gone = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        final int port = gone.getLocalPort();
        gone.close(); // nobody listens there any more
        assertThat(await(engine.submit(TransferRequest.read("127.0.0.1:" + port, 1, 0, into, 100))))
            .isEqualTo(TRANSFER_FAIL_VALUE);
        // Out of the segment, and a healthy request afterwards on the same lanes.
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, SEGMENT_BYTES - 10, into, 100))))
            .isEqualTo(INVALID_PARAMS_VALUE);
        segment.put(0, (byte)42);
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 0, into, 100)))).isZero();
        assertThat(into.get(0)).isEqualTo((byte)42);
        assertThat(closeReasons).isEmpty();
    }
}
