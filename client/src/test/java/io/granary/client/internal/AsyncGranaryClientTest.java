package io.granary.client.internal;

import io.granary.client.AsyncGranaryClient;
import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.ManualClock;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.protocol.Limits;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

/**
 * The asynchronous view against a scripted master and an in-memory engine whose transfers complete on their own
 * "engine-io" thread, as a real engine's do.
 */
class AsyncGranaryClientTest
{
    private static final String NODE_A = "10.0.0.1:7001";
    private static final String NODE_B = "10.0.0.2:7002";
    private static final PutOptions TWO_REPLICAS = PutOptions.builder().replicas(2).build();
    private static final long WAIT_SECONDS = 10;

    private final ScriptedMaster master = new ScriptedMaster();
    private final InMemoryTransferEngine engine = new InMemoryTransferEngine();
    private final ManualClock clock = new ManualClock();
    private final ExecutorService engineIo = Executors.newSingleThreadExecutor(r -> new Thread(r, "engine-io"));
    private GranaryClient client;
    private AsyncGranaryClient async;

    @BeforeEach
    void setUp() throws IOException
    {
        master.start();
        engine.completeOn(engineIo);
        client = connect(config().build());
        async = client.async();
    }

    @AfterEach
    void tearDown() throws InterruptedException
    {
        client.close();
        master.close();
        engineIo.shutdownNow();
    }

    private ClientConfig.Builder config()
    {
        return ClientConfig.builder()
            .masterAddress(master.address())
            .tenant("t1")
            .clientId("client-1")
            .localHost("10.0.0.9");
    }

    private GranaryClient connect(final ClientConfig config)
    {
        return GranaryClientImpl.connect(config, (kind, transferConfig) -> engine, clock);
    }

    private static byte[] bytes(final int length, final int seed)
    {
        final byte[] b = new byte[length];
        for (int i = 0; i < length; i++)
        {
            b[i] = (byte)(seed + i * 31);
        }
        return b;
    }

    private static List<String> keys(final int n)
    {
        final List<String> keys = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            keys.add("key-" + i);
        }
        return keys;
    }

    /** Values of distinct lengths (64 + index), so the engine can pick a key's transfers by length. */
    private static List<ByteBuffer> values(final int n)
    {
        final List<ByteBuffer> values = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            values.add(ByteBuffer.wrap(bytes(64 + i, i)));
        }
        return values;
    }

    private static <T> T await(final CompletableFuture<T> future) throws Exception
    {
        return future.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    /** The GranaryException the future completed with (directly, not wrapped, as whenComplete sees it). */
    private static GranaryException failureOf(final CompletableFuture<?> future) throws Exception
    {
        final Throwable direct = future.handle((value, ex) -> ex).get(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(direct).as("the call should have failed").isInstanceOf(GranaryException.class);
        final Throwable viaGet = catchThrowable(() -> future.get(WAIT_SECONDS, TimeUnit.SECONDS));
        assertThat(viaGet).isInstanceOf(ExecutionException.class).hasCause(direct);
        return (GranaryException)direct;
    }

    private static void awaitCondition(final BooleanSupplier condition, final String what)
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() - deadline > 0)
            {
                throw new AssertionError("timed out waiting until " + what);
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    // ------------------------------------------------------------------------------------------- single keys

    @Test
    void shouldPutAndReadBackThroughFutures() throws Exception
    {
        final byte[] value = bytes(4096, 3);

        assertThat(await(async.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS))).isNull();
        assertThat(await(async.get("k1"))).isEqualTo(value);
        final ByteBuffer dst = ByteBuffer.allocateDirect(8192);
        dst.position(100);
        assertThat(await(async.getInto("k1", dst))).isEqualTo(4096);
        assertThat(await(async.size("k1"))).isEqualTo(4096L);
        assertThat(await(async.exists("k1"))).isTrue();
        assertThat(await(async.exists("nope"))).isFalse();

        assertThat(dst.position()).isEqualTo(4196);
        final byte[] got = new byte[4096];
        dst.get(100, got);
        assertThat(got).isEqualTo(value);
        assertThat(engine.stored(NODE_A, 1, 0)).isEqualTo(value);
        assertThat(engine.stored(NODE_B, 2, 0)).isEqualTo(value);
        assertThat(master.count(PutStartRequest.class)).isEqualTo(1);
        assertThat(master.requests(PutEndRequest.class)).extracting(PutEndRequest::getKey).containsExactly("k1");
    }

    @Test
    void shouldTakeTheValuesPositionWhenTheCallIsMade() throws Exception
    {
        final byte[] backing = bytes(64, 9);
        final ByteBuffer value = ByteBuffer.wrap(backing);
        value.position(8).limit(40);

        final CompletableFuture<Void> put = async.put("k1", value, PutOptions.defaults());
        value.clear(); // the caller moves its buffer at once; the put must still send bytes 8..40
        await(put);

        final byte[] expected = new byte[32];
        System.arraycopy(backing, 8, expected, 0, 32);
        assertThat(engine.stored(NODE_A, 1, 0)).isEqualTo(expected);
    }

    @Test
    void shouldCompleteOnClientThreadsNeverOnEngineThreads() throws Exception
    {
        client.put("k1", bytes(100, 1));
        engine.holdCompletions();

        final CompletableFuture<byte[]> get = async.get("k1");
        final CompletableFuture<Void> put = async.put("k2", bytes(10, 2));
        awaitCondition(() -> engine.inFlight() == 2, "the read and the write are in flight");
        final CompletableFuture<String> getThread = get.thenApply(v -> Thread.currentThread().getName());
        final CompletableFuture<String> putThread = put.thenApply(v -> Thread.currentThread().getName());
        assertThat(get).isNotDone();
        engine.releaseHeld();

        assertThat(await(getThread)).startsWith("granary-client-");
        assertThat(await(putThread)).startsWith("granary-client-");
        assertThat(engine.submitThreads()).doesNotContain("engine-io");
    }

    @Test
    void shouldReturnBeforeTheMasterAnswers() throws Exception
    {
        master.hang("GetReplicaList");
        try (GranaryClient impatient = connect(config().rpcTimeout(Duration.ofMillis(1000)).build()))
        {
            final CompletableFuture<byte[]> get = impatient.async().get("k1");

            assertThat(get).isNotDone();
            final GranaryException ex = failureOf(get);
            assertThat(ex.code()).isEqualTo(ErrorCode.RPC_TIMEOUT);
            assertThat(ex.getMessage()).contains("GetReplicaList");
        }
    }

    @Test
    void shouldFailOverToTheNextReplicaFromAClientThread() throws Exception
    {
        final byte[] value = bytes(300, 5);
        client.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS);
        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);
        final int before = engine.submitThreads().size();

        assertThat(await(async.get("k1"))).isEqualTo(value);

        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(TransferRequest::endpoint)
            .containsExactly(NODE_A, NODE_B);
        final List<String> readThreads = engine.submitThreads().subList(before, before + 2);
        assertThat(readThreads).allSatisfy(t -> assertThat(t).startsWith("granary-client-"));
    }

    @Test
    void shouldRunTheStepsOfASyncCallOnTheCallingThread()
    {
        final byte[] value = bytes(300, 5);
        client.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS);
        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);

        assertThat(client.get("k1")).isEqualTo(value);

        // both writes of the put and both reads, failover included, were submitted here: no client thread needed
        assertThat(engine.submitThreads()).hasSize(4).containsOnly(Thread.currentThread().getName());
    }

    @Test
    void shouldCompleteExceptionallyWithTheCodesOfTheSyncApi() throws Exception
    {
        client.put("k1", ByteBuffer.wrap(bytes(300, 5)), TWO_REPLICAS);

        assertThat(failureOf(async.get("nope")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(failureOf(async.getInto("nope", ByteBuffer.allocate(8))).code())
            .isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(failureOf(async.size("nope")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(failureOf(async.remove("nope")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(failureOf(async.getInto("k1", ByteBuffer.allocate(299))).code())
            .isEqualTo(ErrorCode.BUFFER_OVERFLOW);

        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);
        engine.fail(NODE_B, ErrorCode.RPC_TIMEOUT);
        final GranaryException allFailed = failureOf(async.get("k1"));
        assertThat(allFailed.code()).isEqualTo(ErrorCode.TRANSFER_FAIL);
        assertThat(allFailed.getMessage()).contains("node-a").contains("node-b").contains("RPC_TIMEOUT");

        final GranaryException writeTimedOut = failureOf(async.put("k2", ByteBuffer.wrap(bytes(10, 1)), TWO_REPLICAS));
        assertThat(writeTimedOut.code()).isEqualTo(ErrorCode.TRANSFER_FAIL);
        assertThat(master.requests(PutRevokeRequest.class)).as("revoked, then retried twice").extracting(
            PutRevokeRequest::getKey).containsExactly("k2", "k2", "k2");
        engine.heal(NODE_A);
        assertThat(failureOf(async.put("k3", ByteBuffer.wrap(bytes(10, 1)), TWO_REPLICAS)).code())
            .isEqualTo(ErrorCode.RPC_TIMEOUT);

        master.script("PutStart", (PutStartRequest r) ->
            PutStartResponse.newBuilder().setCode(ErrorCode.NO_AVAILABLE_HANDLE.code()).build());
        assertThat(failureOf(async.put("k4", bytes(10, 1))).code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE);
        assertThat(master.count(PutEndRequest.class)).isEqualTo(1); // only k1's
    }

    @Test
    void shouldReportArgumentCheckFailuresThroughTheFutureAndMisuseAtOnce() throws Exception
    {
        assertThat(failureOf(async.get("")).code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(failureOf(async.put(null, bytes(1, 1))).code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(failureOf(async.removeByRegex("")).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(failureOf(async.probeBatch(List.of("a", ""), LeasePolicy.none())).code())
            .isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(failureOf(async.getBatch(Collections.nCopies(Limits.MAX_BATCH_KEYS + 1, "k"))).code())
            .isEqualTo(ErrorCode.INVALID_PARAMS);

        assertThatThrownBy(() -> async.put("k", (byte[])null)).isInstanceOf(NullPointerException.class);
        assertThatThrownBy(() -> async.put("k", ByteBuffer.allocate(1), null)).isInstanceOf(NullPointerException.class);
        assertThatThrownBy(() -> async.getInto("k", ByteBuffer.allocate(8).asReadOnlyBuffer()))
            .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> async.putBatch(List.of("a", "b"), List.of(ByteBuffer.allocate(1)),
            PutOptions.defaults())).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> async.getBatch(null)).isInstanceOf(NullPointerException.class);
        assertThatThrownBy(() -> async.probeBatch(List.of("a"), null)).isInstanceOf(NullPointerException.class);
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldServeManyConcurrentGetsWithTheRightBytes() throws Exception
    {
        final int n = 128;
        final List<String> keys = keys(n);
        final List<ByteBuffer> values = values(n);
        assertThat(client.putBatch(keys, values, TWO_REPLICAS)).allSatisfy(r -> assertThat(r.ok()).isTrue());

        final List<CompletableFuture<byte[]>> gets = new ArrayList<>(n);
        for (final String key : keys)
        {
            gets.add(async.get(key));
        }
        await(CompletableFuture.allOf(gets.toArray(new CompletableFuture<?>[0])));

        for (int i = 0; i < n; i++)
        {
            assertThat(gets.get(i).join()).as(keys.get(i)).isEqualTo(values.get(i).array());
        }
        assertThat(master.count(KeyRequest.class)).isEqualTo(n);
    }

    @Test
    void shouldLetCallbacksCallTheClientAgain() throws Exception
    {
        client.put("a", bytes(10, 1));
        client.put("b", bytes(20, 2));

        final CompletableFuture<byte[]> chained = async.get("a").thenCompose(v -> async.get("b"));
        // More callbacks than client threads, each making a synchronous call: those run on their own thread.
        final List<CompletableFuture<byte[]>> nested = new ArrayList<>();
        for (int i = 0; i < 2 * ClientExecutor.DEFAULT_THREADS + 2; i++)
        {
            nested.add(async.get("a").thenApply(v -> client.get("b")));
        }

        assertThat(await(chained)).isEqualTo(bytes(20, 2));
        for (final CompletableFuture<byte[]> f : nested)
        {
            assertThat(await(f)).isEqualTo(bytes(20, 2));
        }
    }

    @Test
    void shouldRunBatchesRemovalsAndInspectionAsynchronously() throws Exception
    {
        client.put("a1", bytes(1, 1));
        client.put("a2", bytes(1, 1));
        client.put("b1", bytes(1, 1));
        client.put("c1", bytes(1, 1));

        assertThat(await(async.existsBatch(List.of("a1", "zz")))).extracting(OpResult::value)
            .containsExactly(true, false);
        assertThat(await(async.probeBatch(List.of("a1", "a2"), LeasePolicy.lastHitOnly(2))))
            .extracting(OpResult::value).containsExactly(true, true);
        final List<ByteBuffer> slots = List.of(ByteBuffer.allocateDirect(4), ByteBuffer.allocate(4));
        assertThat(await(async.getBatchInto(List.of("a1", "zz"), slots))).extracting(r -> r.ok())
            .containsExactly(true, false);
        assertThat(slots.get(0).position()).isEqualTo(1);
        assertThat(slots.get(0).get(0)).isEqualTo(bytes(1, 1)[0]);
        assertThat(slots.get(1).position()).isZero();
        assertThat(await(async.listKeys(null, 0))).hasSize(4);
        assertThat(await(async.clusterStatus()).objects()).isEqualTo(4);
        assertThat(await(async.remove("c1", true))).isNull();
        assertThat(await(async.removeByRegex("a.*"))).isEqualTo(2);
        assertThat(await(async.removeAll())).isEqualTo(1);
    }

    // ------------------------------------------------------------------------------------------- batches

    @Test
    void shouldHaveEveryWriteAndReadOfABatchInFlightAtOnce() throws Exception
    {
        final int n = 128;
        final List<String> keys = keys(n);
        final List<ByteBuffer> values = values(n);
        engine.holdCompletions();

        final CompletableFuture<List<OpResult<Void>>> put = async.putBatch(keys, values, TWO_REPLICAS);

        awaitCondition(() -> engine.inFlight() == 2 * n, "every replica write of every key is in flight");
        assertThat(put).isNotDone();
        assertThat(master.count(BatchKeysRequest.class)).isZero(); // no BatchPutEnd before the writes finish
        engine.releaseHeld();
        assertThat(await(put)).hasSize(n).allSatisfy(r -> assertThat(r.ok()).isTrue());
        assertThat(engine.maxInFlight()).isEqualTo(2 * n);
        assertThat(master.count(BatchPutStartRequest.class)).isEqualTo(1);
        assertThat(master.count(BatchKeysRequest.class)).isEqualTo(1);

        engine.holdCompletions();
        final CompletableFuture<List<OpResult<byte[]>>> get = async.getBatch(keys);

        awaitCondition(() -> engine.inFlight() == n, "one read of every key is in flight");
        engine.releaseHeld();
        final List<OpResult<byte[]>> read = await(get);
        for (int i = 0; i < n; i++)
        {
            assertThat(read.get(i).value()).isEqualTo(values.get(i).array());
        }
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(n);
        assertThat(master.count(BatchKeysRequest.class)).isEqualTo(2); // + the one BatchGetReplicaList
    }

    @Test
    void shouldHaveEveryWriteOfASynchronousBatchInFlightAtOnce() throws Exception
    {
        final int n = 128;
        engine.holdCompletions();
        final ExecutorService caller = Executors.newSingleThreadExecutor();
        try
        {
            final Future<List<OpResult<Void>>> put =
                caller.submit(() -> client.putBatch(keys(n), values(n), TWO_REPLICAS));

            awaitCondition(() -> engine.inFlight() == 2 * n, "every replica write of every key is in flight");
            engine.releaseHeld();
            assertThat(put.get(WAIT_SECONDS, TimeUnit.SECONDS)).allSatisfy(r -> assertThat(r.ok()).isTrue());
            assertThat(engine.maxInFlight()).isEqualTo(2 * n);
        }
        finally
        {
            caller.shutdownNow();
        }
    }

    @Test
    void shouldFailOnlyTheKeyWhoseTransfersTheEngineRefused() throws Exception
    {
        final int n = 20;
        final List<String> keys = keys(n);
        final List<ByteBuffer> values = values(n);
        // admission control refuses the writes of key 5 and, later, every read of key 7
        engine.failWhen(r -> r.op() == TransferRequest.Op.WRITE && r.length() == 64 + 5,
            ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);

        final List<OpResult<Void>> put = await(async.putBatch(keys, values, TWO_REPLICAS));

        for (int i = 0; i < n; i++)
        {
            assertThat(put.get(i).error()).as(keys.get(i))
                .isEqualTo(i == 5 ? ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS : ErrorCode.OK);
        }
        assertThat(master.requests(BatchKeysRequest.class)).extracting(r -> List.copyOf(r.getKeysList()))
            .contains(List.of("key-5"));

        engine.failWhen(r -> r.op() == TransferRequest.Op.READ && r.length() == 64 + 7,
            ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        final List<OpResult<byte[]>> got = await(async.getBatch(keys));

        for (int i = 0; i < n; i++)
        {
            if (i == 5)
            {
                assertThat(got.get(i).error()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
            }
            else if (i == 7)
            {
                assertThat(got.get(i).error()).isEqualTo(ErrorCode.TRANSFER_FAIL);
                assertThat(got.get(i).message()).contains("UNAVAILABLE_IN_CURRENT_STATUS");
            }
            else
            {
                assertThat(got.get(i).value()).as(keys.get(i)).isEqualTo(values.get(i).array());
            }
        }
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(n - 1 + 1); // key 7 tried both replicas
    }

    // ------------------------------------------------------------------------------------------- close

    @Test
    void shouldFailCallsInFlightWhenClosedAndRefuseLaterOnes() throws Exception
    {
        client.put("k1", ByteBuffer.wrap(bytes(100, 1)), TWO_REPLICAS);
        engine.holdCompletions();
        final CompletableFuture<byte[]> get = async.get("k1");
        final CompletableFuture<Void> put = async.put("k2", ByteBuffer.wrap(bytes(100, 2)), TWO_REPLICAS);
        final CompletableFuture<List<OpResult<byte[]>>> batch = async.getBatch(List.of("k1"));
        awaitCondition(() -> engine.inFlight() == 4, "the read, the two writes and the batch read are in flight");

        client.close();

        assertThat(failureOf(get).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(failureOf(put).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(failureOf(batch).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(master.count(PutEndRequest.class)).isEqualTo(1); // k1's; k2 was never ended
        final CompletableFuture<byte[]> later = async.get("k1");
        assertThat(later).isCompletedExceptionally();
        assertThat(failureOf(later).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(failureOf(async.putBatch(List.of("x"), List.of(ByteBuffer.allocate(1)), TWO_REPLICAS)).code())
            .isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(catchThrowable(() -> client.get("k1"))).isInstanceOf(GranaryException.class)
            .extracting(ex -> ((GranaryException)ex).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    }

    @Test
    void shouldCloseFromACallback() throws Exception
    {
        client.put("k1", bytes(10, 1));

        await(async.get("k1").thenRun(client::close));

        assertThat(engine.isClosed()).isTrue();
        assertThat(failureOf(async.exists("k1")).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    }

    @Test
    void shouldPassTheMastersAnswerThroughForAnAsyncGetOfAnEmptyValue() throws Exception
    {
        master.script("GetReplicaList", (KeyRequest r) -> GetReplicaListResponse.newBuilder()
            .setValueLength(0).setLeaseTtlMs(ScriptedMaster.LEASE_TTL_MS).build());

        assertThat(await(async.get("empty"))).isEmpty();
        assertThat(await(async.getInto("empty", ByteBuffer.allocate(0)))).isZero();
        assertThat(engine.requests()).isEmpty();
    }
}
