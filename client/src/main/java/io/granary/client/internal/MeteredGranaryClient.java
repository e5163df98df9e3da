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
        this.async = new MeteredAsync(client.async(), metrics);
    }

    @Override
    public AsyncGranaryClient async()
    {
        return async;
    }

    @Override
    public void put(final String key, final byte[] value)
    {
        final long startNs = System.nanoTime();
        try
        {
            client.put(key, value);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.PUT, startNs, ex);
            throw ex;
        }
        metrics.written(value.length);
        metrics.succeeded(Op.PUT, startNs);
    }

    @Override
    public void put(final String key, final ByteBuffer value, final PutOptions options)
    {
        final long startNs = System.nanoTime();
        final int bytes = value == null ? 0 : value.remaining();
        try
        {
            client.put(key, value, options);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.PUT, startNs, ex);
            throw ex;
        }
        metrics.written(bytes);
        metrics.succeeded(Op.PUT, startNs);
    }

    @Override
    public byte[] get(final String key)
    {
        final long startNs = System.nanoTime();
        final byte[] value;
        try
        {
            value = client.get(key);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.GET, startNs, ex);
            throw ex;
        }
        metrics.read(value.length);
        metrics.succeeded(Op.GET, startNs);
        return value;
    }

    @Override
    public int getInto(final String key, final ByteBuffer dst)
    {
        final long startNs = System.nanoTime();
        final int bytes;
        try
        {
            bytes = client.getInto(key, dst);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.GET_INTO, startNs, ex);
            throw ex;
        }
        metrics.read(bytes);
        metrics.succeeded(Op.GET_INTO, startNs);
        return bytes;
    }

    @Override
    public long size(final String key)
    {
        final long startNs = System.nanoTime();
        final long size;
        try
        {
            size = client.size(key);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.SIZE, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.SIZE, startNs);
        return size;
    }

    @Override
    public boolean exists(final String key)
    {
        final long startNs = System.nanoTime();
        final boolean exists;
        try
        {
            exists = client.exists(key);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.EXISTS, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.EXISTS, startNs);
        return exists;
    }

    @Override
    public void remove(final String key)
    {
        remove(key, false);
    }

    @Override
    public void remove(final String key, final boolean force)
    {
        final long startNs = System.nanoTime();
        try
        {
            client.remove(key, force);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.REMOVE, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.REMOVE, startNs);
    }

    @Override
    public long removeByRegex(final String regex)
    {
        final long startNs = System.nanoTime();
        final long removed;
        try
        {
            removed = client.removeByRegex(regex);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.REMOVE_BY_REGEX, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.REMOVE_BY_REGEX, startNs);
        return removed;
    }

    @Override
    public long removeAll()
    {
        final long startNs = System.nanoTime();
        final long removed;
        try
        {
            removed = client.removeAll();
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.REMOVE_ALL, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.REMOVE_ALL, startNs);
        return removed;
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<Void>> results;
        try
        {
            results = client.putBatch(keys, values, options);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.PUT_BATCH, startNs, ex);
            throw ex;
        }
        onPutBatch(metrics, results, values, startNs);
        return results;
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<Void>> results;
        try
        {
            results = client.putBatch(keys, values, options);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.PUT_BATCH, startNs, ex);
            throw ex;
        }
        onPutBatch(metrics, results, values, startNs);
        return results;
    }

    @Override
    public List<OpResult<byte[]>> getBatch(final List<String> keys)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<byte[]>> results;
        try
        {
            results = client.getBatch(keys);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.GET_BATCH, startNs, ex);
            throw ex;
        }
        onGetBatch(metrics, results, startNs);
        return results;
    }

    @Override
    public List<OpResult<Integer>> getBatchInto(final List<String> keys, final List<ByteBuffer> dsts)
    {
        return batchReadInto(() -> client.getBatchInto(keys, dsts));
    }

    @Override
    public List<OpResult<Integer>> readBatchInto(final List<ReadLease> leases, final List<ByteBuffer> dsts)
    {
        return batchReadInto(() -> client.readBatchInto(leases, dsts));
    }

    /** getBatchInto and readBatchInto: counted as GET_BATCH. */
    private List<OpResult<Integer>> batchReadInto(final Supplier<List<OpResult<Integer>>> call)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<Integer>> results;
        try
        {
            results = call.get();
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.GET_BATCH, startNs, ex);
            throw ex;
        }
        onBatchRead(metrics, results, Integer::longValue, startNs);
        return results;
    }

    @Override
    public List<OpResult<Boolean>> existsBatch(final List<String> keys)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<Boolean>> results;
        try
        {
            results = client.existsBatch(keys);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.EXISTS_BATCH, startNs, ex);
            throw ex;
        }
        metrics.batchResults(Op.EXISTS_BATCH, results);
        metrics.succeeded(Op.EXISTS_BATCH, startNs);
        return results;
    }

    @Override
    public List<OpResult<Boolean>> probeBatch(final List<String> keys, final LeasePolicy policy)
    {
        return probe(() -> client.probeBatch(keys, policy));
    }

    @Override
    public List<OpResult<ReadLease>> probeBatchForRead(
        final List<String> keys, final LeasePolicy policy, final int from, final int count)
    {
        return probe(() -> client.probeBatchForRead(keys, policy, from, count));
    }

    /** probeBatch and probeBatchForRead: counted as PROBE_BATCH. */
    private <T> List<OpResult<T>> probe(final Supplier<List<OpResult<T>>> call)
    {
        final long startNs = System.nanoTime();
        final List<OpResult<T>> results;
        try
        {
            results = call.get();
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.PROBE_BATCH, startNs, ex);
            throw ex;
        }
        metrics.batchResults(Op.PROBE_BATCH, results);
        metrics.succeeded(Op.PROBE_BATCH, startNs);
        return results;
    }

    @Override
    public List<KeyInfo> listKeys(final String regexOrNull, final int limit)
    {
        final long startNs = System.nanoTime();
        final List<KeyInfo> keys;
        try
        {
            keys = client.listKeys(regexOrNull, limit);
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.LIST_KEYS, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.LIST_KEYS, startNs);
        return keys;
    }

    @Override
    public ClusterStatus clusterStatus()
    {
        final long startNs = System.nanoTime();
        final ClusterStatus status;
        try
        {
            status = client.clusterStatus();
        }
        catch (final RuntimeException ex)
        {
            metrics.failed(Op.CLUSTER_STATUS, startNs, ex);
            throw ex;
        }
        metrics.succeeded(Op.CLUSTER_STATUS, startNs);
        return status;
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

    private static void onPutBatch(
        final ClientMetrics metrics,
        final List<OpResult<Void>> results,
        final List<ByteBuffer> values,
        final long startNs)
    {
        long bytes = 0;
        for (int i = 0, n = Math.min(results.size(), values.size()); i < n; i++)
        {
            bytes += results.get(i).ok() ? values.get(i).remaining() : 0;
        }
        metrics.written(bytes);
        metrics.batchResults(Op.PUT_BATCH, results);
        metrics.succeeded(Op.PUT_BATCH, startNs);
    }

    private static void onGetBatch(
        final ClientMetrics metrics, final List<OpResult<byte[]>> results, final long startNs)
    {
        onBatchRead(metrics, results, value -> value.length, startNs);
    }

    /** getBatch and getBatchInto: the bytes of the values read, per-key failures, latency. */
    private static <T> void onBatchRead(
        final ClientMetrics metrics, final List<OpResult<T>> results, final ToLongFunction<T> lengthOf,
        final long startNs)
    {
        long bytes = 0;
        for (int i = 0, n = results.size(); i < n; i++)
        {
            final OpResult<T> r = results.get(i);
            bytes += r.ok() ? lengthOf.applyAsLong(r.value()) : 0;
        }
        metrics.read(bytes);
        metrics.batchResults(Op.GET_BATCH, results);
        metrics.succeeded(Op.GET_BATCH, startNs);
    }

    /** The async view: measures each call from its start to its future's completion. */
    private static final class MeteredAsync implements AsyncGranaryClient
    {
        private final AsyncGranaryClient async;
        private final ClientMetrics metrics;

        MeteredAsync(final AsyncGranaryClient async, final ClientMetrics metrics)
        {
            this.async = async;
            this.metrics = metrics;
        }

        /** Records {@code op} when {@code future} completes; returns the same future. */
        private <T> CompletableFuture<T> measure(final Op op, final long startNs, final CompletableFuture<T> future)
        {
            future.whenComplete((value, ex) ->
            {
                if (ex == null)
                {
                    metrics.succeeded(op, startNs);
                }
                else
                {
                    metrics.failed(op, startNs, ex);
                }
            });
            return future;
        }

        @Override
        public CompletableFuture<Void> put(final String key, final byte[] value)
        {
            final long startNs = System.nanoTime();
            final CompletableFuture<Void> future = async.put(key, value);
            future.thenRun(() -> metrics.written(value.length));
            return measure(Op.PUT, startNs, future);
        }

        @Override
        public CompletableFuture<Void> put(final String key, final ByteBuffer value, final PutOptions options)
        {
            final long startNs = System.nanoTime();
            final int bytes = value == null ? 0 : value.remaining();
            final CompletableFuture<Void> future = async.put(key, value, options);
            future.thenRun(() -> metrics.written(bytes));
            return measure(Op.PUT, startNs, future);
        }

        @Override
        public CompletableFuture<byte[]> get(final String key)
        {
            final long startNs = System.nanoTime();
            final CompletableFuture<byte[]> future = async.get(key);
            future.thenAccept(value -> metrics.read(value.length));
            return measure(Op.GET, startNs, future);
        }

        @Override
        public CompletableFuture<Integer> getInto(final String key, final ByteBuffer dst)
        {
            final long startNs = System.nanoTime();
            final CompletableFuture<Integer> future = async.getInto(key, dst);
            future.thenAccept(metrics::read);
            return measure(Op.GET_INTO, startNs, future);
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
            return measurePutBatch(startNs, sizes, async.putBatch(keys, values, options));
        }

        @Override
        public CompletableFuture<List<OpResult<Void>>> putBatch(
            final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
        {
            final long startNs = System.nanoTime();
            final long[] sizes = sizes(values);
            return measurePutBatch(startNs, sizes, async.putBatch(keys, values, options));
        }

        private static long[] sizes(final List<ByteBuffer> values)
        {
            final long[] sizes = new long[values == null ? 0 : values.size()];
            for (int i = 0; i < sizes.length; i++)
            {
                sizes[i] = values.get(i) == null ? 0 : values.get(i).remaining();
            }
            return sizes;
        }

        private CompletableFuture<List<OpResult<Void>>> measurePutBatch(
            final long startNs, final long[] sizes, final CompletableFuture<List<OpResult<Void>>> future)
        {
            future.whenComplete((results, ex) ->
            {
                if (ex != null)
                {
                    metrics.failed(Op.PUT_BATCH, startNs, ex);
                    return;
                }
                long bytes = 0;
                for (int i = 0, n = Math.min(results.size(), sizes.length); i < n; i++)
                {
                    bytes += results.get(i).ok() ? sizes[i] : 0;
                }
                metrics.written(bytes);
                metrics.batchResults(Op.PUT_BATCH, results);
                metrics.succeeded(Op.PUT_BATCH, startNs);
            });
            return future;
        }

        @Override
        public CompletableFuture<List<OpResult<byte[]>>> getBatch(final List<String> keys)
        {
            final long startNs = System.nanoTime();
            final CompletableFuture<List<OpResult<byte[]>>> future = async.getBatch(keys);
            future.whenComplete((results, ex) ->
            {
                if (ex != null)
                {
                    metrics.failed(Op.GET_BATCH, startNs, ex);
                }
                else
                {
                    onGetBatch(metrics, results, startNs);
                }
            });
            return future;
        }

        @Override
        public CompletableFuture<List<OpResult<Integer>>> getBatchInto(
            final List<String> keys, final List<ByteBuffer> dsts)
        {
            return batchReadInto(System.nanoTime(), async.getBatchInto(keys, dsts));
        }

        @Override
        public CompletableFuture<List<OpResult<Integer>>> readBatchInto(
            final List<ReadLease> leases, final List<ByteBuffer> dsts)
        {
            return batchReadInto(System.nanoTime(), async.readBatchInto(leases, dsts));
        }

        /** getBatchInto and readBatchInto: counted as GET_BATCH when the future completes. */
        private CompletableFuture<List<OpResult<Integer>>> batchReadInto(
            final long startNs, final CompletableFuture<List<OpResult<Integer>>> future)
        {
            future.whenComplete((results, ex) ->
            {
                if (ex != null)
                {
                    metrics.failed(Op.GET_BATCH, startNs, ex);
                }
                else
                {
                    onBatchRead(metrics, results, Integer::longValue, startNs);
                }
            });
            return future;
        }

        @Override
        public CompletableFuture<List<OpResult<Boolean>>> existsBatch(final List<String> keys)
        {
            return batch(Op.EXISTS_BATCH, System.nanoTime(), async.existsBatch(keys));
        }

        @Override
        public CompletableFuture<List<OpResult<Boolean>>> probeBatch(final List<String> keys, final LeasePolicy policy)
        {
            return batch(Op.PROBE_BATCH, System.nanoTime(), async.probeBatch(keys, policy));
        }

        @Override
        public CompletableFuture<List<OpResult<ReadLease>>> probeBatchForRead(
            final List<String> keys, final LeasePolicy policy, final int from, final int count)
        {
            return batch(Op.PROBE_BATCH, System.nanoTime(), async.probeBatchForRead(keys, policy, from, count));
        }

        private <T> CompletableFuture<List<OpResult<T>>> batch(
            final Op op, final long startNs, final CompletableFuture<List<OpResult<T>>> future)
        {
            future.whenComplete((results, ex) ->
            {
                if (ex != null)
                {
                    metrics.failed(op, startNs, ex);
                }
                else
                {
                    metrics.batchResults(op, results);
                    metrics.succeeded(op, startNs);
                }
            });
            return future;
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
