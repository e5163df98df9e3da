package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The caller-driven engine against a scripted node: a thread that opens a driver moves its own bytes (futures
 * complete on it, inside drive), small reads of a call leave as one READV, connections are pooled across calls
 * and replaced when they broke, timed out or were dropped by the node, and nothing stays open once a driver or
 * the engine closes.
 */
class CallerDrivenEngineTest
{
    private static final long WAIT_NS = TimeUnit.SECONDS.toNanos(10);
    private static final byte[] RECORD = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    private final List<AutoCloseable> resources = new ArrayList<>();

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

    private CallerDrivenEngine engine(final TransferConfig config)
    {
        return track(new CallerDrivenEngine(config));
    }

    /** Drives until every future is done (or fails the test after 10 s); returns their codes. */
    private static List<Integer> driveUntilDone(
        final TransferEngine.Driver driver, final List<CompletableFuture<Integer>> futures)
    {
        final long deadline = System.nanoTime() + WAIT_NS;
        while (!futures.stream().allMatch(CompletableFuture::isDone))
        {
            assertThat(System.nanoTime() - deadline).as("transfers done within 10 s").isNegative();
            driver.drive(TimeUnit.MILLISECONDS.toNanos(50));
        }
        final List<Integer> codes = new ArrayList<>();
        futures.forEach(f -> codes.add(f.join()));
        return codes;
    }

    private static int driveUntilDone(final TransferEngine.Driver driver, final CompletableFuture<Integer> future)
    {
        return driveUntilDone(driver, List.of(future)).get(0);
    }

    /** The bytes FakeNode answers a READ of {@code [offset, offset + length)} with. */
    private static void assertNodeBytes(final ByteBuffer landed, final long offset, final int length)
    {
        for (int i = 0; i < length; i++)
        {
            assertThat(landed.get(i)).as("byte %d of the read at %d", i, offset).isEqualTo((byte)(offset + i));
        }
    }

    @Test
    void shouldMoveTheBytesOnTheCallingThreadAndPlaceEveryByte() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig().sliceBytes(32 << 10));
        final int[] lengths = {10, 4000, 70_000, 100_000, 1 << 20};
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final List<Thread> completedOn = new ArrayList<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            assertThat(driver).isNotNull();
            for (int i = 0; i < lengths.length * 2; i++)
            {
                final int length = lengths[i % lengths.length];
                final ByteBuffer dst = i % 2 == 0 ? ByteBuffer.allocateDirect(length) : ByteBuffer.allocate(length);
                into.add(dst);
                final CompletableFuture<Integer> read =
                    engine.submit(TransferRequest.read(node.endpoint(), 5, 7L * i, dst, length));
                read.whenComplete((code, ex) -> completedOn.add(Thread.currentThread()));
                reads.add(read);
            }
            assertThat(driveUntilDone(driver, reads)).containsOnly(0);
        }
        assertThat(completedOn).containsOnly(Thread.currentThread());
        for (int i = 0; i < into.size(); i++)
        {
            assertNodeBytes(into.get(i), 7L * i, lengths[i % lengths.length]);
        }
        assertThat(engine.drivenTransfers()).isEqualTo(reads.size());
        assertThat(engine.threadedEngineOrNull()).as("no event loops were needed").isNull();
        assertThat(node.connections()).isEqualTo(1);
    }

    @Test
    void shouldSendTheSmallReadsOfACallAsOneVector() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig());
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            for (int i = 0; i < 200; i++)
            {
                final ByteBuffer dst = ByteBuffer.allocate(1024);
                into.add(dst);
                reads.add(engine.submit(TransferRequest.read(node.endpoint(), 5, 4096L * i + i, dst, 1024)));
            }
            assertThat(driveUntilDone(driver, reads)).containsOnly(0);
        }
        assertThat(node.requests()).hasSize(200);
        assertThat(node.received()).as("no READ went alone").isEmpty();
        for (int i = 0; i < into.size(); i++)
        {
            assertNodeBytes(into.get(i), 4096L * i + i, 1024);
        }
    }

    /**
     * A one-frame WRITE whose record is ready goes as one WRITE_COMMIT (with writeCommits off: WRITE, then COMMIT on
     * its connection); a sliced WRITE whose record comes later gets its COMMIT behind its slices.
     */
    @ParameterizedTest(name = "writeCommits {0}")
    @ValueSource(booleans = {true, false})
    void shouldWriteAndCommitOnOneConnectionAlsoWhenTheRecordComesLater(final boolean writeCommits) throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig().sliceBytes(64 << 10).writeCommits(writeCommits));
        final CompletableFuture<byte[]> late = new CompletableFuture<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            final CompletableFuture<Integer> ready = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                node.endpoint(), 9, 4096, ByteBuffer.allocateDirect(4000), 4000, null, RECORD));
            final CompletableFuture<Integer> sliced = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                node.endpoint(), 9, 1 << 20, ByteBuffer.allocate(200_000), 200_000, null, 1 << 20, 200_000, late));
            final Thread maker = new Thread(() -> late.complete(RECORD), "record-maker");
            maker.start();
            assertThat(driveUntilDone(driver, List.of(ready, sliced))).containsOnly(0);
            maker.join();
        }
        final List<FakeNode.Received> received = new ArrayList<>(node.received());
        final List<Integer> small = writeCommits ? List.of(Opcode.WRITE_COMMIT) : List.of(Opcode.WRITE, Opcode.COMMIT);
        final List<Integer> expected = new ArrayList<>(small);
        expected.addAll(List.of(Opcode.WRITE, Opcode.WRITE, Opcode.WRITE, Opcode.WRITE, Opcode.COMMIT));
        assertThat(received).extracting(r -> r.header().opcode).containsExactlyElementsOf(expected);
        assertThat(received).extracting(FakeNode.Received::connection).containsOnly(1);
        final FakeNode.Received first = received.get(small.size() - 1);
        assertThat(first.header().offset).isEqualTo(4096);
        assertThat(first.header().flags).isEqualTo(writeCommits ? RECORD.length : 0);
        final FakeNode.Received last = received.get(received.size() - 1);
        assertThat(last.header().offset).isEqualTo(1 << 20);
        assertThat(last.header().length).isEqualTo(RECORD.length);
    }

    /**
     * Slices above 64 KiB go round-robin over the lanes (two connections), smaller frames keep to the first; a COMMIT
     * follows a one-frame WRITE on that frame's connection.
     */
    @Test
    void shouldSpreadOnlyTheSlicesOfBigValuesOverTheLanes() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig().lanesPerPeer(2).sliceBytes(128 << 10));
        final List<CompletableFuture<Integer>> small = new ArrayList<>();
        final List<ByteBuffer> into = new ArrayList<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            for (int i = 0; i < 40; i++)
            {
                final ByteBuffer dst = ByteBuffer.allocateDirect(2000);
                into.add(dst);
                small.add(engine.submit(TransferRequest.read(node.endpoint(), 5, 3000L * i, dst, 2000)));
            }
            small.add(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, node.endpoint(), 9, 4096,
                ByteBuffer.allocateDirect(60_000), 60_000, null, RECORD)));
            assertThat(driveUntilDone(driver, small)).containsOnly(0);
        }
        for (int i = 0; i < into.size(); i++)
        {
            assertNodeBytes(into.get(i), 3000L * i, 2000);
        }
        assertThat(node.connections()).as("small frames on one connection").isEqualTo(1);

        final ByteBuffer big = ByteBuffer.allocateDirect(512 << 10);
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            assertThat(driveUntilDone(driver, engine.submit(
                TransferRequest.read(node.endpoint(), 5, 77, big, 512 << 10)))).isZero();
        }
        assertNodeBytes(big, 77, 512 << 10);
        assertThat(node.connections()).as("a second connection for the big value's slices").isEqualTo(2);

        node.received().clear();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            final CompletableFuture<Integer> sliced = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                node.endpoint(), 9, 1 << 20, ByteBuffer.allocateDirect(300_000), 300_000, null, RECORD));
            assertThat(driveUntilDone(driver, sliced)).isZero();
        }
        final List<FakeNode.Received> slicedFrames = new ArrayList<>(node.received());
        assertThat(slicedFrames).extracting(r -> r.header().opcode)
            .containsExactlyInAnyOrder(Opcode.WRITE, Opcode.WRITE, Opcode.WRITE, Opcode.COMMIT);
        assertThat(slicedFrames).filteredOn(r -> r.header().opcode == Opcode.WRITE && r.header().length == 128 << 10)
            .extracting(FakeNode.Received::connection).as("the two full slices on both connections")
            .containsExactlyInAnyOrder(1, 2);
        assertThat(slicedFrames).filteredOn(r -> r.header().opcode == Opcode.WRITE && r.header().length < 128 << 10)
            .extracting(FakeNode.Received::connection).as("the short last slice on the first").containsExactly(1);

        for (int round = 0; round < 2; round++)
        {
            node.received().clear();
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                assertThat(driveUntilDone(driver, engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                    node.endpoint(), 9, 2 << 20, ByteBuffer.allocateDirect(100_000), 100_000, null, RECORD))))
                    .isZero();
            }
            final List<FakeNode.Received> frames = new ArrayList<>(node.received());
            assertThat(frames).extracting(r -> r.header().opcode).as("a one-frame WRITE with its COMMIT, round %d",
                round).containsExactly(Opcode.WRITE_COMMIT);
            assertThat(frames.get(0).header().flags).isEqualTo(RECORD.length);
        }
        assertThat(node.connections()).isEqualTo(2);
    }

    /**
     * A sliced WRITE's COMMIT leaves once every slice but one is acknowledged, behind the unanswered one on its
     * connection and before that slice's answer (the node reads it only after the slice's last byte).
     */
    @Test
    void shouldSendASlicedWritesCommitBehindItsLastUnansweredSlice() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final CallerDrivenEngine engine = engine(new TransferConfig().lanesPerPeer(2).sliceBytes(128 << 10));
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            final CompletableFuture<Integer> put = engine.submit(new TransferRequest(TransferRequest.Op.WRITE,
                node.endpoint(), 9, 1 << 20, ByteBuffer.allocateDirect(256 << 10), 256 << 10, null, RECORD));
            driveUntil(driver, () -> node.received().size() == 2);
            assertThat(node.received()).extracting(r -> r.header().opcode).containsOnly(Opcode.WRITE);
            assertThat(node.received()).extracting(FakeNode.Received::connection).as("one slice per connection")
                .containsExactlyInAnyOrder(1, 2);

            node.answer(1);
            driveUntil(driver, () -> node.received().size() == 3);
            final FakeNode.Received commit = new ArrayList<>(node.received()).get(2);
            assertThat(commit.header().opcode).isEqualTo(Opcode.COMMIT);
            assertThat(commit.header().offset).isEqualTo(1 << 20);
            assertThat(node.answered()).as("sent while one slice was still unanswered").hasSize(1);
            assertThat(commit.connection()).as("behind the unanswered slice, on its connection")
                .isNotEqualTo(node.answered().peek().connection());
            assertThat(put).isNotDone();

            node.openGate();
            assertThat(driveUntilDone(driver, put)).isZero();
        }
        assertThat(node.answered()).extracting(r -> r.header().opcode)
            .containsExactly(Opcode.WRITE, Opcode.WRITE, Opcode.COMMIT);
    }

    @Test
    void shouldReuseTheConnectionAcrossCallsAndReplaceOneTheNodeDropped() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig());
        for (int call = 0; call < 3; call++)
        {
            try (TransferEngine.Driver driver = engine.openDriver())
            {
                assertThat(driveUntilDone(driver, engine.submit(
                    TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(100), 100)))).isZero();
            }
        }
        assertThat(node.connections()).as("one pooled connection for three calls").isEqualTo(1);

        node.dropConnections(); // whether or not its FIN has arrived when the next call starts
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            assertThat(driveUntilDone(driver, engine.submit(
                TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(100), 100))))
                .as("a connection the node dropped while idle is replaced, not failed").isZero();
        }
        assertThat(node.connections()).isEqualTo(2);
    }

    @Test
    void shouldTimeOutAndNeverPoolTheConnectionAgain() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.SILENT));
        final CallerDrivenEngine engine = engine(new TransferConfig().transferTimeoutMs(300));
        final ByteBuffer dst = ByteBuffer.allocate(100);
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            final long start = System.nanoTime();
            assertThat(driveUntilDone(driver, engine.submit(TransferRequest.read(node.endpoint(), 1, 0, dst, 100))))
                .isEqualTo(RPC_TIMEOUT_VALUE);
            assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(300));
        }
        assertThat(node.awaitClosedByPeer(10_000)).as("the timed-out connection was closed").isTrue();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            engine.submit(TransferRequest.read(node.endpoint(), 1, 0, dst, 100));
            driver.drive(0);
            waitUntil(() -> node.connections() == 2);
        }
    }

    @Test
    void shouldFailWithTransferFailWhenTheNodeIsNotListeningOrDropsTheConnection() throws Exception
    {
        // The node first: a port freed before it listened could be the one it binds (CI saw the "not listening" read
        // reach it as its first connection, and the next read then answered).
        final FakeNode dropping = track(new FakeNode(FakeNode.Mode.DROP_FIRST_CONNECTION));
        final int port;
        try (ServerSocket unused = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            port = unused.getLocalPort();
        }
        final CallerDrivenEngine engine = engine(new TransferConfig());
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            assertThat(driveUntilDone(driver, engine.submit(
                TransferRequest.read("127.0.0.1:" + port, 1, 0, ByteBuffer.allocate(10), 10))))
                .isEqualTo(TRANSFER_FAIL_VALUE);
            assertThat(driveUntilDone(driver, engine.submit(
                TransferRequest.read(dropping.endpoint(), 1, 0, ByteBuffer.allocate(10), 10))))
                .isEqualTo(TRANSFER_FAIL_VALUE);
            assertThat(driveUntilDone(driver, engine.submit(
                TransferRequest.read(dropping.endpoint(), 1, 0, ByteBuffer.allocate(10), 10))))
                .as("a fresh connection after the broken one").isZero();
        }
    }

    @Test
    void shouldGoThroughTheEngineThreadsOutsideADriver() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig());
        final CompletableFuture<String> thread = engine.submit(
            TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(10), 10))
            .thenApply(code -> code + " on " + Thread.currentThread().getName());

        assertThat(thread.get(10, TimeUnit.SECONDS)).startsWith("0 on granary-transfer");
        assertThat(engine.drivenTransfers()).isZero();
        assertThat(engine.threadedEngineOrNull()).isNotNull();
    }

    @Test
    void shouldLetGoOfEverythingOpenWhenTheDriverClosesEarlyOrTheEngineCloses() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.SILENT));
        final CallerDrivenEngine engine = engine(new TransferConfig());
        final CompletableFuture<Integer> abandoned;
        final CompletableFuture<byte[]> neverReady = new CompletableFuture<>();
        final CompletableFuture<Integer> waitingForItsRecord;
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            abandoned = engine.submit(TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(10), 10));
            waitingForItsRecord = engine.submit(new TransferRequest(TransferRequest.Op.WRITE, node.endpoint(), 1,
                0, ByteBuffer.allocate(0), 0, null, 0, 1, neverReady));
            driver.drive(0);
        }
        assertThat(abandoned).isCompletedWithValue(TRANSFER_FAIL_VALUE);
        assertThat(waitingForItsRecord).isCompletedWithValue(TRANSFER_FAIL_VALUE);
        assertThat(node.awaitClosedByPeer(10_000)).isTrue();
        neverReady.complete(RECORD); // too late: nothing is sent, nothing breaks

        final TransferEngine.Driver driver = engine.openDriver();
        final CompletableFuture<Integer> cut = engine.submit(
            TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(10), 10));
        engine.close();
        assertThat(driveUntilDone(driver, cut)).isEqualTo(TRANSFER_FAIL_VALUE);
        driver.close();
        assertThat(engine.openDriver()).as("no driver after close").isNull();
        assertThat(engine.submit(TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(10), 10))
            .get(10, TimeUnit.SECONDS)).isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @Test
    void shouldRefuseBadRequestsWithInvalidParams() throws Exception
    {
        final CallerDrivenEngine engine = engine(new TransferConfig());
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            assertThat(driveUntilDone(driver, engine.submit(TransferRequest.read("no-port", 1, 0,
                ByteBuffer.allocate(10), 10)))).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(driveUntilDone(driver, engine.submit(TransferRequest.read("127.0.0.1:1", 1, 0,
                ByteBuffer.allocate(10).asReadOnlyBuffer(), 10)))).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(driveUntilDone(driver, engine.submit(new TransferRequest(TransferRequest.Op.READ,
                "127.0.0.1:1", 1, 0, ByteBuffer.allocate(10), 10, new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH - 1]))))
                .as("a token of the wrong length").isEqualTo(INVALID_PARAMS_VALUE);
        }
    }

    @Test
    void shouldShareTheOuterLoopWithANestedDriver() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        node.openGate();
        final CallerDrivenEngine engine = engine(new TransferConfig());
        try (TransferEngine.Driver outer = engine.openDriver())
        {
            final CompletableFuture<Integer> first = engine.submit(
                TransferRequest.read(node.endpoint(), 1, 0, ByteBuffer.allocate(10), 10));
            try (TransferEngine.Driver inner = engine.openDriver())
            {
                assertThat(driveUntilDone(inner, engine.submit(
                    TransferRequest.read(node.endpoint(), 1, 64, ByteBuffer.allocate(10), 10)))).isZero();
            }
            assertThat(driveUntilDone(outer, first)).as("the inner scope's end left the outer's transfer").isZero();
        }
        assertThat(node.connections()).isEqualTo(1);
    }

    @FunctionalInterface
    private interface Condition
    {
        boolean holds() throws Exception;
    }

    /** Drives until {@code condition} holds (or fails the test after 10 s). */
    private static void driveUntil(final TransferEngine.Driver driver, final Condition condition) throws Exception
    {
        final long deadline = System.nanoTime() + WAIT_NS;
        while (!condition.holds())
        {
            assertThat(System.nanoTime() - deadline).as("condition within 10 s").isNegative();
            driver.drive(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    private static void waitUntil(final Condition condition) throws Exception
    {
        final long deadline = System.nanoTime() + WAIT_NS;
        while (!condition.holds())
        {
            assertThat(System.nanoTime() - deadline).as("condition within 10 s").isNegative();
            Thread.sleep(5);
        }
    }
}
