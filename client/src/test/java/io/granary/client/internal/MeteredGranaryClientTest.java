package io.granary.client.internal;

import io.granary.client.AsyncGranaryClient;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Function;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What the metered client records around a client double (a proxy answering each method by name): latency counts,
 * bytes, misses and failed keys, for calls that return, throw, and (async view) complete either way; and that it
 * hands back the wrapped client's results and failures unchanged.
 */
class MeteredGranaryClientTest
{
    private static final String TENANT = "t";

    private final MeterRegistry registry = new SimpleMeterRegistry();
    private final Map<String, Function<Object[], Object>> syncAnswers = new HashMap<>();
    private final Map<String, Function<Object[], Object>> asyncAnswers = new HashMap<>();
    private final GranaryClient client = new MeteredGranaryClient(
        proxy(GranaryClient.class, syncAnswers), new ClientMetrics(registry, TENANT));

    @SuppressWarnings("unchecked")
    private <T> T proxy(final Class<T> type, final Map<String, Function<Object[], Object>> answers)
    {
        return (T)Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (self, method, args) ->
        {
            if (method.getName().equals("async"))
            {
                return proxy(AsyncGranaryClient.class, asyncAnswers);
            }
            final Function<Object[], Object> answer = answers.get(method.getName());
            if (answer == null)
            {
                throw new AssertionError("unexpected call " + method.getName());
            }
            return answer.apply(args);
        });
    }

    private long calls(final String op)
    {
        return registry.get("granary.client.op").tag("op", op).timer().count();
    }

    private double failedKeys(final String op)
    {
        return registry.get("granary.client.failed.keys").tag("op", op).counter().count();
    }

    private double misses(final String op)
    {
        return registry.get("granary.client.misses").tag("op", op).counter().count();
    }

    private double bytes(final String direction)
    {
        return registry.get("granary.client.bytes").tag("direction", direction).counter().count();
    }

    private static GranaryException notFound()
    {
        return new GranaryException(ErrorCode.OBJECT_NOT_FOUND, "no such key");
    }

    @Test
    void shouldRecordSingleKeyCallsThatReturnAndThatThrow()
    {
        syncAnswers.put("put", args -> null);
        syncAnswers.put("get", args -> new byte[7]);
        syncAnswers.put("getInto", args ->
        {
            throw notFound();
        });
        syncAnswers.put("exists", args ->
        {
            throw new GranaryException(ErrorCode.RPC_TIMEOUT, "slow master");
        });
        syncAnswers.put("removeByRegex", args -> 5L);

        client.put("a", new byte[11]);
        client.put("b", ByteBuffer.allocate(13), PutOptions.defaults());
        assertThat(client.get("a")).hasSize(7);
        assertThatThrownBy(() -> client.getInto("c", ByteBuffer.allocate(4))).isInstanceOf(GranaryException.class)
            .hasMessageContaining("no such key");
        assertThatThrownBy(() -> client.exists("d")).hasMessageContaining("slow master");
        assertThat(client.removeByRegex("x.*")).isEqualTo(5L);

        assertThat(calls("put")).isEqualTo(2);
        assertThat(bytes("written")).isEqualTo(24);
        assertThat(calls("get")).isEqualTo(1);
        assertThat(bytes("read")).isEqualTo(7);
        assertThat(calls("getInto")).isEqualTo(1);
        assertThat(misses("getInto")).as("a miss of a read is not a failure").isEqualTo(1);
        assertThat(failedKeys("getInto")).isZero();
        assertThat(calls("exists")).isEqualTo(1);
        assertThat(failedKeys("exists")).isEqualTo(1);
        assertThat(calls("removeByRegex")).isEqualTo(1);
    }

    @Test
    void shouldCountTheBytesOfTheKeysABatchMovedAndItsFailedKeysAndMisses()
    {
        final List<ByteBuffer> values = List.of(ByteBuffer.allocate(10), ByteBuffer.allocate(20));
        syncAnswers.put("putBatch", args -> List.of(OpResult.ok(null), OpResult.failed(ErrorCode.NO_AVAILABLE_HANDLE)));
        syncAnswers.put("getBatchInto", args -> List.of(OpResult.ok(6), OpResult.failed(ErrorCode.OBJECT_NOT_FOUND)));
        syncAnswers.put("getBatch", args -> List.of(OpResult.ok(new byte[3])));
        syncAnswers.put("probeBatch", args -> List.of(OpResult.ok(true), OpResult.failed(ErrorCode.INVALID_KEY)));

        assertThat(client.putBatch(List.of("a", "b"), values, PutOptions.defaults())).hasSize(2);
        assertThat(client.getBatchInto(List.of("a", "b"), values)).hasSize(2);
        assertThat(client.getBatch(List.of("a"))).hasSize(1);
        assertThat(client.probeBatch(List.of("a", "b"), LeasePolicy.longestPrefix(1))).hasSize(2);

        assertThat(bytes("written")).as("only the key that was stored").isEqualTo(10);
        assertThat(failedKeys("putBatch")).isEqualTo(1);
        assertThat(bytes("read")).isEqualTo(6 + 3);
        assertThat(misses("getBatch")).isEqualTo(1);
        assertThat(failedKeys("getBatch")).isZero();
        assertThat(calls("getBatch")).as("getBatch and getBatchInto").isEqualTo(2);
        assertThat(calls("probeBatch")).isEqualTo(1);
        assertThat(failedKeys("probeBatch")).isEqualTo(1);
    }

    @Test
    void shouldRecordAsyncCallsWhenTheirFuturesComplete()
    {
        final CompletableFuture<Integer> getInto = new CompletableFuture<>();
        final CompletableFuture<Boolean> exists = new CompletableFuture<>();
        final CompletableFuture<List<OpResult<Void>>> putBatch = new CompletableFuture<>();
        asyncAnswers.put("getInto", args -> getInto);
        asyncAnswers.put("exists", args -> exists);
        asyncAnswers.put("putBatch", args -> putBatch);
        asyncAnswers.put("put", args -> CompletableFuture.completedFuture(null));

        final AsyncGranaryClient async = client.async();
        assertThat(async.getInto("a", ByteBuffer.allocate(9))).isSameAs(getInto);
        final CompletableFuture<Boolean> existsSeen = async.exists("b");
        final CompletableFuture<List<OpResult<Void>>> putBatchSeen = async.putBatch(
            List.of("c", "d"), List.of(ByteBuffer.allocate(4), ByteBuffer.allocate(8)), PutOptions.defaults());
        async.put("e", new byte[5]).join();
        assertThat(calls("getInto")).as("not before completion").isZero();
        assertThat(calls("put")).isEqualTo(1);
        assertThat(bytes("written")).isEqualTo(5);

        getInto.complete(9);
        exists.completeExceptionally(new CompletionException(notFound()));
        putBatch.complete(List.of(OpResult.failed(ErrorCode.NO_AVAILABLE_HANDLE), OpResult.ok(null)));

        assertThat(calls("getInto")).isEqualTo(1);
        assertThat(bytes("read")).isEqualTo(9);
        assertThat(existsSeen).isCompletedExceptionally();
        assertThat(calls("exists")).isEqualTo(1);
        assertThat(failedKeys("exists")).as("exists is not a read: a missing key fails it").isEqualTo(1);
        assertThat(putBatchSeen.join()).hasSize(2);
        assertThat(bytes("written")).isEqualTo(5 + 8);
        assertThat(failedKeys("putBatch")).isEqualTo(1);
        assertThat(calls("putBatch")).isEqualTo(1);
    }
}
