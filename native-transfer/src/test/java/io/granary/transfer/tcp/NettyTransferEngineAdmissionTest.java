package io.granary.transfer.tcp;

import io.granary.protocol.FrameHeader;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Per-peer admission control of the Java engine against scripted peers that hold their responses until
 * the test lets them go: bounded queue, pending admissions in FIFO order, admission timeout, refusals
 * that never stall accepted work, and slices of a big transfer sharing the lanes with small ones. READV
 * batching is off here (maxVectorEntries 1): these tests count frames and release answers one by one.
 */
class NettyTransferEngineAdmissionTest
{
    private static final long WAIT_SECONDS = 10;
    /** Long enough never to expire in a test that does not wait for it. */
    private static final long NO_ADMISSION_TIMEOUT_MS = 60_000;
    private static final byte CANARY = (byte)0x5A;

    private final List<AutoCloseable> resources = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
    }

    @Test
    void shouldHoldTransfersBeyondTheQueueAsPendingAdmissionsAndAdmitThemInFifoOrder() throws Exception
    {
        final FakeNode node = node();
        final NettyTransferEngine engine = engine(new TransferConfig().maxVectorEntries(1)
            .lanesPerPeer(1).maxQueuedTransfersPerPeer(4).maxPendingAdmissionsPerPeer(8)
            .admissionTimeoutMs(NO_ADMISSION_TIMEOUT_MS));
        final Queue<Integer> completionOrder = new ConcurrentLinkedQueue<>();
        final List<ByteBuffer> buffers = new ArrayList<>();
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 12; i++)
        {
            final int index = i;
            final ByteBuffer into = ByteBuffer.allocate(16);
            buffers.add(into);
            futures.add(engine.submit(TransferRequest.read(node.endpoint(), 42, 100L * i, into, 16))
                .whenComplete((status, error) -> completionOrder.add(index)));
        }

        assertThat(engine.outstandingFrames(node.endpoint())).isEqualTo(4);
        assertThat(engine.pendingAdmissions(node.endpoint())).isEqualTo(8);
        assertThat(futures).noneMatch(CompletableFuture::isDone);
        assertThat(engine.submit(read(node.endpoint(), 5_000, 16)))
            .isCompletedWithValue(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        assertThat(engine.rejectedQueueFull()).isEqualTo(1);
        assertThat(engine.admittedTransfers()).isEqualTo(4);

        node.openGate();

        for (final CompletableFuture<Integer> future : futures)
        {
            assertThat(await(future)).isZero();
        }
        final List<Integer> inOrder = IntStream.range(0, 12).boxed().collect(Collectors.toList());
        waitFor(() -> completionOrder.size() == 12);
        assertThat(completionOrder).containsExactlyElementsOf(inOrder);
        assertThat(node.requests()).extracting(h -> (int)(h.offset / 100)).containsExactlyElementsOf(inOrder);
        for (int i = 0; i < 12; i++)
        {
            assertThat(buffers.get(i).get(0)).isEqualTo((byte)(100 * i));
        }
        assertThat(engine.admittedTransfers()).isEqualTo(12);
        assertThat(engine.rejectedAdmissionTimeout()).isZero();
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
        assertThat(engine.pendingAdmissions(node.endpoint())).isZero();
    }

    @Test
    void shouldFailPendingAdmissionsWithUnavailableAfterTheAdmissionTimeoutAndNeverTouchTheirBuffers()
        throws Exception
    {
        final FakeNode node = node();
        final NettyTransferEngine engine = engine(new TransferConfig().maxVectorEntries(1)
            .lanesPerPeer(1).maxQueuedTransfersPerPeer(2).maxPendingAdmissionsPerPeer(4).admissionTimeoutMs(100));
        final List<CompletableFuture<Integer>> admitted = List.of(
            engine.submit(read(node.endpoint(), 0, 16)), engine.submit(read(node.endpoint(), 100, 16)));
        final ByteBuffer readInto = canaryBuffer(64);
        final ByteBuffer readIntoDirect = ByteBuffer.allocateDirect(64).put(canaryBuffer(64)).clear();
        final ByteBuffer writeFrom = canaryBuffer(64);
        final List<CompletableFuture<Integer>> pending = List.of(
            engine.submit(TransferRequest.read(node.endpoint(), 42, 200, readInto, 64)),
            engine.submit(TransferRequest.read(node.endpoint(), 42, 300, readIntoDirect, 64)),
            engine.submit(TransferRequest.write(node.endpoint(), 42, 400, writeFrom, 64)));
        assertThat(engine.pendingAdmissions(node.endpoint())).isEqualTo(3);

        for (final CompletableFuture<Integer> future : pending)
        {
            assertThat(await(future)).isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        }
        assertThat(engine.rejectedAdmissionTimeout()).isEqualTo(3);
        assertThat(engine.pendingAdmissions(node.endpoint())).isZero();
        assertThat(admitted).noneMatch(CompletableFuture::isDone);
        assertThat(engine.outstandingFrames(node.endpoint())).isEqualTo(2);

        node.openGate();
        for (final CompletableFuture<Integer> future : admitted)
        {
            assertThat(await(future)).isZero();
        }
        // One lane, answered in order: had a timed-out transfer been sent, it would be answered before this one.
        assertThat(await(engine.submit(read(node.endpoint(), 500, 16)))).isZero();

        assertThat(node.requests()).extracting(h -> h.offset).containsExactly(0L, 100L, 500L);
        assertThat(isCanary(readInto)).isTrue();
        assertThat(isCanary(readIntoDirect)).isTrue();
        assertThat(isCanary(writeFrom)).isTrue();
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
    }

    @Test
    void shouldKeepAdmittingAcceptedWorkAfterRefusals() throws Exception
    {
        final FakeNode node = node();
        final int sliceBytes = 4096;
        final NettyTransferEngine engine = engine(new TransferConfig().maxVectorEntries(1)
            .lanesPerPeer(1).sliceBytes(sliceBytes).maxQueuedTransfersPerPeer(2).maxPendingAdmissionsPerPeer(2)
            .admissionTimeoutMs(NO_ADMISSION_TIMEOUT_MS));
        final String endpoint = node.endpoint();
        final CompletableFuture<Integer> first = engine.submit(read(endpoint, 0, 16));
        final CompletableFuture<Integer> second = engine.submit(read(endpoint, 100, 16));
        // Three slices never fit in a queue of two: admitted alone once the peer is idle, holding back what follows.
        final ByteBuffer bigInto = ByteBuffer.allocate(3 * sliceBytes);
        final CompletableFuture<Integer> big = engine.submit(
            TransferRequest.read(endpoint, 42, 1_000, bigInto, bigInto.capacity()));
        final CompletableFuture<Integer> behindBig = engine.submit(read(endpoint, 200, 16));
        assertThat(engine.pendingAdmissions(endpoint)).isEqualTo(2);

        final List<CompletableFuture<Integer>> refused = new ArrayList<>();
        for (int i = 0; i < 5; i++)
        {
            refused.add(engine.submit(read(endpoint, 300 + i, 16)));
        }
        refused.add(engine.submit(TransferRequest.read(endpoint, 42, 0, ByteBuffer.allocate(8 * sliceBytes),
            8 * sliceBytes)));
        assertThat(refused).allSatisfy(f -> assertThat(f).isCompletedWithValue(UNAVAILABLE_IN_CURRENT_STATUS_VALUE));

        node.answer(1);
        assertThat(await(first)).isZero();
        assertThat(engine.pendingAdmissions(endpoint)).isEqualTo(2); // the big one waits for an idle peer
        assertThat(engine.submit(read(endpoint, 400, 16))).isCompletedWithValue(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);

        node.answer(1);
        assertThat(await(second)).isZero();
        assertThat(engine.pendingAdmissions(endpoint)).isEqualTo(1);
        assertThat(engine.outstandingFrames(endpoint)).isEqualTo(3);
        assertThat(big).isNotDone();

        node.openGate();
        assertThat(await(big)).isZero();
        assertThat(await(behindBig)).isZero();
        for (int i = 0; i < bigInto.capacity(); i++)
        {
            assertThat(bigInto.get(i)).as("byte %d", i).isEqualTo((byte)(1_000 + i));
        }
        final List<CompletableFuture<Integer>> later = new ArrayList<>();
        for (int i = 0; i < 4; i++) // two admitted, two pending: fits
        {
            later.add(engine.submit(read(endpoint, 600 + i, 16)));
        }
        for (final CompletableFuture<Integer> future : later)
        {
            assertThat(await(future)).isZero();
        }
        assertThat(engine.rejectedQueueFull()).isEqualTo(7);
        assertThat(engine.outstandingFrames(endpoint)).isZero();
        assertThat(engine.pendingAdmissions(endpoint)).isZero();
    }

    @Test
    void shouldNeverStrandAcceptedWorkWhenManyThreadsSubmitToAFullQueue() throws Exception
    {
        final FakeNode node = node();
        node.openGate();
        final NettyTransferEngine engine = engine(new TransferConfig().maxVectorEntries(1)
            .lanesPerPeer(2).maxQueuedTransfersPerPeer(8).maxPendingAdmissionsPerPeer(16)
            .admissionTimeoutMs(NO_ADMISSION_TIMEOUT_MS));
        final int threads = 4;
        final int perThread = 200;
        final ExecutorService submitters = Executors.newFixedThreadPool(threads);
        final List<Future<List<CompletableFuture<Integer>>>> batches = new ArrayList<>();
        final CountDownLatch start = new CountDownLatch(1);
        try
        {
            for (int t = 0; t < threads; t++)
            {
                final int thread = t;
                batches.add(submitters.submit(() ->
                {
                    start.await();
                    final List<CompletableFuture<Integer>> futures = new ArrayList<>();
                    for (int i = 0; i < perThread; i++)
                    {
                        futures.add(engine.submit(read(node.endpoint(), thread * 10_000L + i, 32)));
                    }
                    return futures;
                }));
            }
            start.countDown();

            int ok = 0;
            int refused = 0;
            for (final Future<List<CompletableFuture<Integer>>> batch : batches)
            {
                for (final CompletableFuture<Integer> future : batch.get(WAIT_SECONDS, TimeUnit.SECONDS))
                {
                    final int status = await(future);
                    assertThat(status).isIn(0, UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
                    if (status == 0)
                    {
                        ok++;
                    }
                    else
                    {
                        refused++;
                    }
                }
            }
            assertThat(ok + refused).isEqualTo(threads * perThread);
            assertThat(ok).isPositive();
            assertThat(engine.rejectedQueueFull()).isEqualTo(refused);
            assertThat(engine.admittedTransfers()).isEqualTo(ok);
            assertThat(engine.outstandingFrames(node.endpoint())).isZero();
            assertThat(engine.pendingAdmissions(node.endpoint())).isZero();
            assertThat(await(engine.submit(read(node.endpoint(), 1, 32)))).isZero();
        }
        finally
        {
            submitters.shutdownNow();
        }
    }

    @Test
    void shouldLetSmallTransfersThroughWhileABigOneIsStillSending() throws Exception
    {
        final FakeNode node = node();
        final int sliceBytes = 4096;
        final int lanes = 2;
        final int window = PeerConnection.sliceWindow(lanes, sliceBytes);
        final int bigSlices = 4 * window;
        final NettyTransferEngine engine = engine(new TransferConfig().maxVectorEntries(1).lanesPerPeer(lanes).sliceBytes(sliceBytes));
        final String endpoint = node.endpoint();
        final ByteBuffer bigInto = ByteBuffer.allocateDirect(bigSlices * sliceBytes);
        final CompletableFuture<Integer> big = engine.submit(
            TransferRequest.read(endpoint, 42, 0, bigInto, bigInto.capacity()));
        final long smallBase = 1L << 30;
        final List<CompletableFuture<Integer>> smalls = IntStream.range(0, 4)
            .mapToObj(i -> engine.submit(read(endpoint, smallBase + 100L * i, 100)))
            .collect(Collectors.toUnmodifiableList());
        final AtomicBoolean smallsDoneFirst = new AtomicBoolean();
        final CompletableFuture<Integer> bigDone = big.whenComplete(
            (status, error) -> smallsDoneFirst.set(smalls.stream().allMatch(CompletableFuture::isDone)));

        // Each lane carries the big transfer's first slices, then the small ones: the rest waits for the window.
        waitFor(() -> node.requests().stream().filter(h -> h.offset >= smallBase).count() == smalls.size());
        final List<FrameHeader> seen = new ArrayList<>(node.requests());
        assertThat(seen).filteredOn(h -> h.offset < smallBase).hasSize(window)
            .allSatisfy(h -> assertThat(h.length).isEqualTo(sliceBytes));
        assertThat(engine.outstandingFrames(endpoint)).isEqualTo(bigSlices + smalls.size());

        node.openGate();

        for (final CompletableFuture<Integer> small : smalls)
        {
            assertThat(await(small)).isZero();
        }
        assertThat(await(big)).isZero();
        bigDone.get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(smallsDoneFirst).as("every small transfer completed before the big one").isTrue();
        for (int i = 0; i < bigInto.capacity(); i++)
        {
            assertThat(bigInto.get(i)).as("byte %d", i).isEqualTo((byte)i);
        }
        assertThat(node.requests()).hasSize(bigSlices + smalls.size());
        assertThat(engine.outstandingFrames(endpoint)).isZero();
    }

    @Test
    void shouldFailOutstandingAndPendingTransfersWithTransferFailOnClose() throws Exception
    {
        final FakeNode node = node();
        final NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig().maxVectorEntries(1)
            .maxQueuedTransfersPerPeer(2).maxPendingAdmissionsPerPeer(4).admissionTimeoutMs(NO_ADMISSION_TIMEOUT_MS));
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 5; i++)
        {
            futures.add(engine.submit(read(node.endpoint(), i, 8)));
        }
        waitFor(() -> node.requests().size() == 2);
        assertThat(engine.pendingAdmissions(node.endpoint())).isEqualTo(3);

        engine.close();

        assertThat(futures).allSatisfy(f -> assertThat(f).isCompletedWithValue(TRANSFER_FAIL_VALUE));
        assertThat(engine.pendingAdmissions(node.endpoint())).isZero();
        assertThat(engine.outstandingFrames(node.endpoint())).isZero();
        assertThat(engine.rejectedAdmissionTimeout()).isZero();
        assertThat(engine.submit(read(node.endpoint(), 0, 8))).isCompletedWithValue(TRANSFER_FAIL_VALUE);
    }

    @Test
    void shouldKeepAFewSlicesOfOneTransferInFlightPerLane()
    {
        assertThat(PeerConnection.sliceWindow(2, 1 << 20)).isEqualTo(8);
        assertThat(PeerConnection.sliceWindow(2, 4096)).isEqualTo(2 * PeerConnection.MAX_WINDOW_SLICES_PER_LANE);
        assertThat(PeerConnection.sliceWindow(1, 64 << 20)).isEqualTo(PeerConnection.MIN_WINDOW_SLICES_PER_LANE);
        assertThat(PeerConnection.sliceWindow(3, 3 << 20)).isEqualTo(3 * 2);
    }

    private NettyTransferEngine engine(final TransferConfig config)
    {
        final NettyTransferEngine engine = new NettyTransferEngine(config);
        resources.add(engine);
        return engine;
    }

    private FakeNode node() throws Exception
    {
        final FakeNode node = new FakeNode(FakeNode.Mode.ANSWER);
        resources.add(node);
        return node;
    }

    private static TransferRequest read(final String endpoint, final long offset, final int length)
    {
        return TransferRequest.read(endpoint, 42, offset, ByteBuffer.allocate(length), length);
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    private static ByteBuffer canaryBuffer(final int length)
    {
        final byte[] bytes = new byte[length];
        Arrays.fill(bytes, CANARY);
        return ByteBuffer.wrap(bytes);
    }

    private static boolean isCanary(final ByteBuffer buffer)
    {
        if (buffer.position() != 0 || buffer.limit() != buffer.capacity())
        {
            return false;
        }
        for (int i = 0; i < buffer.capacity(); i++)
        {
            if (buffer.get(i) != CANARY)
            {
                return false;
            }
        }
        return true;
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
