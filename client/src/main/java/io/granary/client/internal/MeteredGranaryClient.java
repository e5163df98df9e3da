package io.granary.client.internal;

import io.granary.client.AsyncGranaryClient;
import io.granary.client.ClusterStatus;
import io.granary.client.GranaryClient;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;
import io.granary.client.internal.ClientMetrics.Op;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

/**
 * A {@link GranaryClient} that records {@link ClientMetrics} around another: used when the embedding application
 * passed a MeterRegistry in its ClientConfig, so that clients without one pay nothing. Its async view measures from
 * the call to the future's completion and returns the client's own futures unchanged. Thread safe.
 */
final class MeteredGranaryClient implements GranaryClient
{
    private final GranaryClient client;
    private final ClientMetrics metrics;
    private final AsyncGranaryClient async;

    MeteredGranaryClient(final GranaryClient client, final ClientMetrics metrics)
    {
        this.client = client;
        this.metrics = metrics;
        this.async = new MeteredAsync(client.async());
    }

    @Override
    public AsyncGranaryClient async()
    {
        return async;
    }

    /**
     * Runs {@code call} as one call of {@code op}: on return, {@code onResult} records what the result moved (bytes,
     * a batch's failed keys), then the latency; on a throw, the failure (a miss or a failed key) and the latency.
     */
    private <T> T timed(final Op op, final Supplier<T> call, final Consumer<T> onResult)
    {
        final long startNs = System.nanoTime();
        final T result;
        try
        {
            result = call.get();
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(op, startNs, ex);
            throw ex;
        }
        onResult.accept(result);
        metrics.succeeded(op, startNs);
        return result;
    }

    private <T> T timed(final Op op, final Supplier<T> call)
    {
        return timed(op, call, result -> { });
    }

    private void timed(final Op op, final Runnable call, final long bytesWritten)
    {
        timed(op, () ->
        {
            call.run();
            return null;
        }, done -> metrics.written(bytesWritten));
    }

    @Override
    public void put(final String key, final byte[] value)
    {
        timed(Op.PUT, () -> client.put(key, value), value == null ? 0 : value.length);
    }

    @Override
    public void put(final String key, final ByteBuffer value, final PutOptions options)
    {
        timed(Op.PUT, () -> client.put(key, value, options), value == null ? 0 : value.remaining());
    }

    @Override
    public byte[] get(final String key)
    {
        return timed(Op.GET, () -> client.get(key), value -> metrics.read(value.length));
    }

    @Override
    public int getInto(final String key, final ByteBuffer dst)
    {
        return timed(Op.GET_INTO, () -> client.getInto(key, dst), bytes -> metrics.read(bytes));
    }

    @Override
    public long size(final String key)
    {
        return timed(Op.SIZE, () -> client.size(key));
    }

    @Override
    public boolean exists(final String key)
    {
        return timed(Op.EXISTS, () -> client.exists(key));
    }

    @Override
    public void remove(final String key)
    {
        remove(key, false);
    }

    @Override
    public void remove(final String key, final boolean force)
    {
        timed(Op.REMOVE, () -> client.remove(key, force), 0);
    }

    @Override
    public long removeByRegex(final String regex)
    {
        return timed(Op.REMOVE_BY_REGEX, () -> client.removeByRegex(regex));
    }

    @Override
    public long removeAll()
    {
        return timed(Op.REMOVE_ALL, client::removeAll);
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        final long[] sizes = sizes(values);
        return timed(Op.PUT_BATCH, () -> client.putBatch(keys, values, options),
            results -> putBatchDone(results, sizes));
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
    {
        final long[] sizes = sizes(values);
        return timed(Op.PUT_BATCH, () -> client.putBatch(keys, values, options),
            results -> putBatchDone(results, sizes));
    }

    @Override
    public List<OpResult<byte[]>> getBatch(final List<String> keys)
    {
        return timed(Op.GET_BATCH, () -> client.getBatch(keys), results -> batchRead(results, value -> value.length));
    }

    @Override
    public List<OpResult<Integer>> getBatchInto(final List<String> keys, final List<ByteBuffer> dsts)
    {
        return timed(Op.GET_BATCH, () -> client.getBatchInto(keys, dsts),
            results -> batchRead(results, Integer::longValue));
    }

    @Override
    public List<OpResult<Integer>> readBatchInto(final List<ReadLease> leases, final List<ByteBuffer> dsts)
    {
        return timed(Op.GET_BATCH, () -> client.readBatchInto(leases, dsts),
            results -> batchRead(results, Integer::longValue));
    }

    @Override
    public List<OpResult<Boolean>> existsBatch(final List<String> keys)
    {
        return timed(Op.EXISTS_BATCH, () -> client.existsBatch(keys),
            results -> metrics.batchResults(Op.EXISTS_BATCH, results));
    }

    @Override
    public List<OpResult<Boolean>> probeBatch(final List<String> keys, final LeasePolicy policy)
    {
        return timed(Op.PROBE_BATCH, () -> client.probeBatch(keys, policy),
            results -> metrics.batchResults(Op.PROBE_BATCH, results));
    }

    @Override
    public List<OpResult<ReadLease>> probeBatchForRead(
        final List<String> keys, final LeasePolicy policy, final int from, final int count)
    {
        return timed(Op.PROBE_BATCH, () -> client.probeBatchForRead(keys, policy, from, count),
            results -> metrics.batchResults(Op.PROBE_BATCH, results));
    }

    @Override
    public List<KeyInfo> listKeys(final String regexOrNull, final int limit)
    {
        return timed(Op.LIST_KEYS, () -> client.listKeys(regexOrNull, limit));
    }

    @Override
    public ClusterStatus clusterStatus()
    {
        return timed(Op.CLUSTER_STATUS, client::clusterStatus);
    }

    @Override
    public boolean registerBuffer(final ByteBuffer buffer)
    {
        return client.registerBuffer(buffer);
    }

    @Override
    public boolean unregisterBuffer(final ByteBuffer buffer)
    {
        return client.unregisterBuffer(buffer);
    }

    @Override
    public void close()
    {
        client.close();
    }

    /** The sizes of a batch's values, taken at the call (a value's position may move by the time its put ends). */
    private static long[] sizes(final List<ByteBuffer> values)
    {
        final long[] sizes = new long[values == null ? 0 : values.size()];
        for (int i = 0; i < sizes.length; i++)
        {
            sizes[i] = values.get(i) == null ? 0 : values.get(i).remaining();
        }
        return sizes;
    }

    /** A put batch's results: the bytes of the values stored, the failed keys. */
    private void putBatchDone(final List<OpResult<Void>> results, final long[] sizes)
    {
        long bytes = 0;
        for (int i = 0, n = Math.min(results.size(), sizes.length); i < n; i++)
        {
            bytes += results.get(i).ok() ? sizes[i] : 0;
        }
        metrics.written(bytes);
        metrics.batchResults(Op.PUT_BATCH, results);
    }

    /** getBatch, getBatchInto and readBatchInto (all GET_BATCH): the bytes of the values read, failures and misses. */
    private <T> void batchRead(final List<OpResult<T>> results, final ToLongFunction<T> lengthOf)
    {
        long bytes = 0;
        for (int i = 0, n = results.size(); i < n; i++)
        {
            final OpResult<T> r = results.get(i);
            bytes += r.ok() ? lengthOf.applyAsLong(r.value()) : 0;
        }
        metrics.read(bytes);
        metrics.batchResults(Op.GET_BATCH, results);
    }

    /** The async view: measures each call from its start to its future's completion. */
    private final class MeteredAsync implements AsyncGranaryClient
    {
        private final AsyncGranaryClient async;

        MeteredAsync(final AsyncGranaryClient async)
        {
            this.async = async;
        }

        /**
         * Records {@code op} when {@code future} completes: normally, what {@code onResult} records and the latency;
         * exceptionally, the failure and the latency. Returns the same future.
         */
        private <T> CompletableFuture<T> measure(
            final Op op, final long startNs, final CompletableFuture<T> future, final Consumer<T> onResult)
        {
            future.whenComplete((result, ex) ->
            {
                if (ex != null)
                {
                    metrics.failed(op, startNs, ex);
                    return;
                }
                onResult.accept(result);
                metrics.succeeded(op, startNs);
            });
            return future;
        }

        private <T> CompletableFuture<T> measure(final Op op, final long startNs, final CompletableFuture<T> future)
        {
            return measure(op, startNs, future, result -> { });
        }

        @Override
        public CompletableFuture<Void> put(final String key, final byte[] value)
        {
            final long startNs = System.nanoTime();
            final int bytes = value == null ? 0 : value.length;
            return measure(Op.PUT, startNs, async.put(key, value), done -> metrics.written(bytes));
        }

        @Override
        public CompletableFuture<Void> put(final String key, final ByteBuffer value, final PutOptions options)
        {
            final long startNs = System.nanoTime();
            final int bytes = value == null ? 0 : value.remaining();
            return measure(Op.PUT, startNs, async.put(key, value, options), done -> metrics.written(bytes));
        }

        @Override
        public CompletableFuture<byte[]> get(final String key)
        {
            return measure(Op.GET, System.nanoTime(), async.get(key), value -> metrics.read(value.length));
        }

        @Override
        public CompletableFuture<Integer> getInto(final String key, final ByteBuffer dst)
        {
            return measure(Op.GET_INTO, System.nanoTime(), async.getInto(key, dst), bytes -> metrics.read(bytes));
        }

        @Override
        public CompletableFuture<Long> size(final String key)
        {
            return measure(Op.SIZE, System.nanoTime(), async.size(key));
        }

        @Override
        public CompletableFuture<Boolean> exists(final String key)
        {
            return measure(Op.EXISTS, System.nanoTime(), async.exists(key));
        }

        @Override
        public CompletableFuture<Void> remove(final String key)
        {
            return measure(Op.REMOVE, System.nanoTime(), async.remove(key));
        }

        @Override
        public CompletableFuture<Void> remove(final String key, final boolean force)
        {
            return measure(Op.REMOVE, System.nanoTime(), async.remove(key, force));
        }

        @Override
        public CompletableFuture<Long> removeByRegex(final String regex)
        {
            return measure(Op.REMOVE_BY_REGEX, System.nanoTime(), async.removeByRegex(regex));
        }

        @Override
        public CompletableFuture<Long> removeAll()
        {
            return measure(Op.REMOVE_ALL, System.nanoTime(), async.removeAll());
        }

        @Override
        public CompletableFuture<List<OpResult<Void>>> putBatch(
            final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
        {
            final long startNs = System.nanoTime();
            final long[] sizes = sizes(values);
            return measure(Op.PUT_BATCH, startNs, async.putBatch(keys, values, options),
                results -> putBatchDone(results, sizes));
        }

        @Override
        public CompletableFuture<List<OpResult<Void>>> putBatch(
            final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
        {
            final long startNs = System.nanoTime();
            final long[] sizes = sizes(values);
            return measure(Op.PUT_BATCH, startNs, async.putBatch(keys, values, options),
                results -> putBatchDone(results, sizes));
        }

        @Override
        public CompletableFuture<List<OpResult<byte[]>>> getBatch(final List<String> keys)
        {
            return measure(Op.GET_BATCH, System.nanoTime(), async.getBatch(keys),
                results -> batchRead(results, value -> value.length));
        }

        @Override
        public CompletableFuture<List<OpResult<Integer>>> getBatchInto(
            final List<String> keys, final List<ByteBuffer> dsts)
        {
            return measure(Op.GET_BATCH, System.nanoTime(), async.getBatchInto(keys, dsts),
                results -> batchRead(results, Integer::longValue));
        }

        @Override
        public CompletableFuture<List<OpResult<Integer>>> readBatchInto(
            final List<ReadLease> leases, final List<ByteBuffer> dsts)
        {
            return measure(Op.GET_BATCH, System.nanoTime(), async.readBatchInto(leases, dsts),
                results -> batchRead(results, Integer::longValue));
        }

        @Override
        public CompletableFuture<List<OpResult<Boolean>>> existsBatch(final List<String> keys)
        {
            return measure(Op.EXISTS_BATCH, System.nanoTime(), async.existsBatch(keys),
                results -> metrics.batchResults(Op.EXISTS_BATCH, results));
        }

        @Override
        public CompletableFuture<List<OpResult<Boolean>>> probeBatch(final List<String> keys, final LeasePolicy policy)
        {
            return measure(Op.PROBE_BATCH, System.nanoTime(), async.probeBatch(keys, policy),
                results -> metrics.batchResults(Op.PROBE_BATCH, results));
        }

        @Override
        public CompletableFuture<List<OpResult<ReadLease>>> probeBatchForRead(
            final List<String> keys, final LeasePolicy policy, final int from, final int count)
        {
            return measure(Op.PROBE_BATCH, System.nanoTime(), async.probeBatchForRead(keys, policy, from, count),
                results -> metrics.batchResults(Op.PROBE_BATCH, results));
        }

        @Override
        public CompletableFuture<List<KeyInfo>> listKeys(final String regexOrNull, final int limit)
        {
            return measure(Op.LIST_KEYS, System.nanoTime(), async.listKeys(regexOrNull, limit));
        }

        @Override
        public CompletableFuture<ClusterStatus> clusterStatus()
        {
            return measure(Op.CLUSTER_STATUS, System.nanoTime(), async.clusterStatus());
        }
    }
}
