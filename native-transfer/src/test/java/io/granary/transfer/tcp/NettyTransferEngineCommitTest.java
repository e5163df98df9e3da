package io.granary.transfer.tcp;

import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** WRITEs that carry a commit record: where and when the engine sends the COMMIT frame. */
class NettyTransferEngineCommitTest
{
    private static final long WAIT_SECONDS = 10;
    private static final byte[] RECORD = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
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

    private static TransferRequest writeAndCommit(final String endpoint, final long offset, final int length)
    {
        return new TransferRequest(TransferRequest.Op.WRITE, endpoint, 42, offset, ByteBuffer.allocateDirect(length),
            length, null, RECORD);
    }

    /** Writes eight 4000-byte values with their records, all in flight together; the frames the node received. */
    private static List<FakeNode.Received> writeEightSmallValues(final NettyTransferEngine engine, final FakeNode node)
        throws Exception
    {
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 8; i++)
        {
            futures.add(engine.submit(writeAndCommit(node.endpoint(), i * 4096L, 4000)));
        }
        for (final CompletableFuture<Integer> future : futures)
        {
            assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
        }
        return new ArrayList<>(node.received());
    }

    /** With writeCommits off: each one-frame WRITE, then its COMMIT right behind it on the same connection. */
    @Test
    void shouldSendTheCommitOnTheSameConnectionRightBehindASingleSliceWrite() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine =
            track(new NettyTransferEngine(new TransferConfig().lanesPerPeer(4).writeCommits(false)));
        node.openGate();

        final List<FakeNode.Received> received = writeEightSmallValues(engine, node);
        assertThat(received).hasSize(16);
        for (int i = 0; i < received.size(); i++)
        {
            final FakeNode.Received r = received.get(i);
            if (r.header().opcode == Opcode.WRITE)
            {
                // The next frame on the same connection is this WRITE's COMMIT.
                final FakeNode.Received next = received.stream().skip(i + 1)
                    .filter(x -> x.connection() == r.connection()).findFirst().orElseThrow();
                assertThat(next.header().opcode).isEqualTo(Opcode.COMMIT);
                assertThat(next.header().segmentId).isEqualTo(42);
                assertThat(next.header().offset).isEqualTo(r.header().offset);
                assertThat(next.header().length).isEqualTo(RECORD.length);
            }
        }
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    /** By default a one-frame WRITE whose record is ready goes as one WRITE_COMMIT frame, the record's length in flags. */
    @Test
    void shouldSendASingleSliceWriteAndItsRecordAsOneWriteCommit() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig().lanesPerPeer(4)));
        node.openGate();

        final List<FakeNode.Received> received = writeEightSmallValues(engine, node);
        assertThat(received).extracting(r -> r.header().opcode).hasSize(8).containsOnly(Opcode.WRITE_COMMIT);
        assertThat(received).extracting(r -> r.header().flags).containsOnly(RECORD.length);
        assertThat(received).extracting(r -> r.header().length).containsOnly(4000L);
        assertThat(engine.outstandingFrames(node.endpoint())).as("both frames of each released").isZero();
    }

    /**
     * A sliced WRITE's COMMIT leaves once every slice but one succeeded, behind the unanswered one on its connection
     * (the node reads it only after that slice's last byte), before that slice is answered.
     */
    @Test
    void shouldSendTheCommitOfASlicedWriteBehindItsLastUnansweredSlice() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(
            new TransferConfig().lanesPerPeer(2).sliceBytes(4096)));

        final CompletableFuture<Integer> future = engine.submit(writeAndCommit(node.endpoint(), 1 << 20, 10_000));
        waitFor(() -> node.requests().size() == 3);
        assertThat(node.requests()).extracting(h -> h.opcode).containsOnly(Opcode.WRITE);
        assertThat(node.received()).extracting(FakeNode.Received::connection).containsOnly(1, 2);

        node.answer(2);
        waitFor(() -> node.requests().size() == 4);
        final List<FakeNode.Received> received = new ArrayList<>(node.received());
        final FakeNode.Received commit = received.get(3);
        assertThat(commit.header().opcode).isEqualTo(Opcode.COMMIT);
        assertThat(commit.header().offset).isEqualTo(1 << 20);
        assertThat(node.answered()).as("sent while one slice was unanswered").hasSize(2);
        final List<Long> answeredOffsets = node.answered().stream().map(r -> r.header().offset).toList();
        final FakeNode.Received unanswered = received.subList(0, 3).stream()
            .filter(r -> !answeredOffsets.contains(r.header().offset)).toList().get(0);
        assertThat(commit.connection()).as("on the unanswered slice's connection").isEqualTo(unanswered.connection());
        assertThat(future).isNotDone();

        node.answer(2);
        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
        assertThat(node.answered()).extracting(r -> r.header().opcode)
            .containsExactly(Opcode.WRITE, Opcode.WRITE, Opcode.WRITE, Opcode.COMMIT);
    }

    @Test
    void shouldNeverSendTheCommitOfASlicedWriteThatFailed() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.SILENT));
        final NettyTransferEngine engine = track(new NettyTransferEngine(
            new TransferConfig().lanesPerPeer(2).sliceBytes(4096).transferTimeoutMs(200)));

        final CompletableFuture<Integer> future = engine.submit(writeAndCommit(node.endpoint(), 0, 10_000));

        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo(RPC_TIMEOUT_VALUE);
        assertThat(node.requests()).extracting(h -> h.opcode).containsOnly(Opcode.WRITE);
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    private static TransferRequest writeWithLateCommit(
        final String endpoint, final long offset, final int length, final CompletableFuture<byte[]> commit)
    {
        return new TransferRequest(TransferRequest.Op.WRITE, endpoint, 42, offset, ByteBuffer.allocateDirect(length),
            length, null, offset, length, commit);
    }

    @Test
    void shouldSendALateCommitRecordOnTheConnectionItsSingleSliceWriteTook() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig().lanesPerPeer(4)));
        node.openGate();
        final CompletableFuture<byte[]> record = new CompletableFuture<>();

        final CompletableFuture<Integer> future = engine.submit(writeWithLateCommit(node.endpoint(), 8192, 4000, record));
        waitFor(() -> node.requests().size() == 1);
        // Other work on the same lanes meanwhile: the COMMIT still follows its own WRITE's connection.
        for (int i = 0; i < 6; i++)
        {
            assertThat(engine.submit(writeAndCommit(node.endpoint(), (i + 3) * 65536L, 100))
                .get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
        }
        assertThat(future).as("no COMMIT before its record is ready").isNotDone();

        record.complete(RECORD);

        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
        final List<FakeNode.Received> received = new ArrayList<>(node.received());
        final FakeNode.Received write = received.get(0);
        assertThat(write.header().opcode).isEqualTo(Opcode.WRITE);
        assertThat(received).filteredOn(r -> r.header().opcode == Opcode.COMMIT && r.header().offset == 8192)
            .singleElement().satisfies(commit ->
            {
                assertThat(commit.connection()).isEqualTo(write.connection());
                assertThat(commit.header().length).isEqualTo(RECORD.length);
            });
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldSendTheCommitOfASlicedWriteOnceEverySliceSucceededAndTheRecordIsReady() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(
            new TransferConfig().lanesPerPeer(2).sliceBytes(4096)));
        node.openGate();
        final CompletableFuture<byte[]> record = new CompletableFuture<>();

        final CompletableFuture<Integer> future = engine.submit(writeWithLateCommit(node.endpoint(), 0, 10_000, record));
        // Every slice answered; only the COMMIT, waiting for its record, is left.
        waitFor(() -> node.requests().size() == 3 && engine.outstandingFrames(node.endpoint()) == 1);
        assertThat(future).isNotDone();
        assertThat(node.requests()).extracting(h -> h.opcode).containsOnly(Opcode.WRITE);

        record.complete(RECORD);

        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
        assertThat(node.requests()).extracting(h -> h.opcode)
            .containsExactly(Opcode.WRITE, Opcode.WRITE, Opcode.WRITE, Opcode.COMMIT);
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldFailWithInternalErrorAndSendNoCommitWhenTheRecordCannotBeMade() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig()));
        node.openGate();
        final CompletableFuture<byte[]> record = new CompletableFuture<>();

        final CompletableFuture<Integer> future = engine.submit(writeWithLateCommit(node.endpoint(), 0, 4000, record));
        waitFor(() -> node.requests().size() == 1);
        record.completeExceptionally(new IllegalStateException("no checksum"));

        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo(INTERNAL_ERROR_VALUE);
        assertThat(node.requests()).extracting(h -> h.opcode).containsExactly(Opcode.WRITE);
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldDropALateCommitWhenItsWriteHasFailed() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.SILENT));
        final NettyTransferEngine engine = track(new NettyTransferEngine(
            new TransferConfig().transferTimeoutMs(200)));
        final CompletableFuture<byte[]> record = new CompletableFuture<>();

        final CompletableFuture<Integer> future = engine.submit(writeWithLateCommit(node.endpoint(), 0, 4000, record));
        waitFor(() -> node.requests().size() == 1);
        waitFor(() -> engine.outstandingFrames(node.endpoint()) == 1);
        record.complete(RECORD);

        assertThat(future.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo(RPC_TIMEOUT_VALUE);
        assertThat(node.requests()).extracting(h -> h.opcode).containsExactly(Opcode.WRITE);
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldSendTheCommitAloneForAnEmptyValue() throws Exception
    {
        final FakeNode node = track(new FakeNode(FakeNode.Mode.ANSWER));
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig()));
        node.openGate();

        assertThat(engine.submit(writeAndCommit(node.endpoint(), 640, 0)).get(WAIT_SECONDS, TimeUnit.SECONDS))
            .isZero();

        assertThat(node.requests()).singleElement().satisfies(h ->
        {
            assertThat(h.opcode).isEqualTo(Opcode.COMMIT);
            assertThat(h.offset).isEqualTo(640);
        });
    }

    private static void waitFor(final BooleanSupplier condition) throws InterruptedException
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!condition.getAsBoolean())
        {
            assertThat(System.nanoTime()).as("condition not met in time").isLessThan(deadlineNs);
            Thread.sleep(5);
        }
    }
}
