package io.granary.client.internal;

import io.granary.client.AsyncGranaryClient;
import io.granary.client.ClusterStatus;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * The {@link AsyncGranaryClient} view of a {@link GranaryClientImpl}: checks the Java arguments and takes what it
 * needs from them on the calling thread, then runs the client's own call steps on the client's threads. Thread
 * safe and stateless.
 */
final class AsyncGranaryClientImpl implements AsyncGranaryClient
{
    private final GranaryClientImpl client;

    AsyncGranaryClientImpl(final GranaryClientImpl client)
    {
        this.client = client;
    }

    @Override
    public CompletableFuture<Void> put(final String key, final byte[] value)
    {
        return put(key, ByteBuffer.wrap(Objects.requireNonNull(value, "value")), PutOptions.defaults());
    }

    @Override
    public CompletableFuture<Void> put(final String key, final ByteBuffer value, final PutOptions options)
    {
        Objects.requireNonNull(value, "value");
        Objects.requireNonNull(options, "options");
        final ByteBuffer data = value.duplicate();
        return client.callOnClientThreads(threads -> client.startPut(key, data, options, threads));
    }

    @Override
    public CompletableFuture<byte[]> get(final String key)
    {
        return client.callOnClientThreads(threads -> client.startGet(key, threads));
    }

    @Override
    public CompletableFuture<Integer> getInto(final String key, final ByteBuffer dst)
    {
        final ByteBuffer window = GranaryClientImpl.captureDestination(dst);
        return client.callOnClientThreads(threads -> client.startGetInto(key, dst, window, threads));
    }

    @Override
    public CompletableFuture<Long> size(final String key)
    {
        return client.supplyOnClientThreads(() -> client.size(key));
    }

    @Override
    public CompletableFuture<Boolean> exists(final String key)
    {
        return client.supplyOnClientThreads(() -> client.exists(key));
    }

    @Override
    public CompletableFuture<Void> remove(final String key)
    {
        return remove(key, false);
    }

    @Override
    public CompletableFuture<Void> remove(final String key, final boolean force)
    {
        return client.supplyOnClientThreads(() ->
        {
            client.remove(key, force);
            return null;
        });
    }

    @Override
    public CompletableFuture<Long> removeByRegex(final String regex)
    {
        return client.supplyOnClientThreads(() -> client.removeByRegex(regex));
    }

    @Override
    public CompletableFuture<Long> removeAll()
    {
        return client.supplyOnClientThreads(client::removeAll);
    }

    @Override
    public CompletableFuture<List<OpResult<Void>>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        final ByteBuffer[] data = GranaryClientImpl.captureValues(keys, values, options);
        final List<String> keysNow = copy(keys);
        final io.granary.proto.PutOptions[] perKey = GranaryClientImpl.sameOptions(options, data.length);
        return client.callOnClientThreads(threads -> client.startPutBatch(keysNow, data, perKey, threads));
    }

    @Override
    public CompletableFuture<List<OpResult<Void>>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
    {
        final ByteBuffer[] data = GranaryClientImpl.captureValues(keys, values, PutOptions.defaults());
        final List<String> keysNow = copy(keys);
        final io.granary.proto.PutOptions[] perKey = GranaryClientImpl.perKeyOptions(options, data.length);
        return client.callOnClientThreads(threads -> client.startPutBatch(keysNow, data, perKey, threads));
    }

    @Override
    public CompletableFuture<List<OpResult<byte[]>>> getBatch(final List<String> keys)
    {
        final List<String> keysNow = copy(Objects.requireNonNull(keys, "keys"));
        return client.callOnClientThreads(threads -> client.startGetBatch(keysNow, threads));
    }

    @Override
    public CompletableFuture<List<OpResult<Integer>>> getBatchInto(final List<String> keys, final List<ByteBuffer> dsts)
    {
        final List<String> keysNow = copy(Objects.requireNonNull(keys, "keys"));
        final ByteBuffer[] windows = GranaryClientImpl.captureDestinations(keysNow, dsts);
        final List<ByteBuffer> dstsNow = List.copyOf(dsts);
        return client.callOnClientThreads(threads -> client.startGetBatchInto(keysNow, dstsNow, windows, threads));
    }

    @Override
    public CompletableFuture<List<OpResult<Integer>>> readBatchInto(
        final List<ReadLease> leases, final List<ByteBuffer> dsts)
    {
        final ProbedLease[] given = client.ownLeases(leases);
        final List<String> keysNow = GranaryClientImpl.leaseKeys(given);
        final ByteBuffer[] windows = GranaryClientImpl.captureDestinations(keysNow, dsts);
        final List<ByteBuffer> dstsNow = List.copyOf(dsts);
        return client.callOnClientThreads(
            threads -> client.startGetBatchInto(keysNow, dstsNow, windows, threads, given));
    }

    @Override
    public CompletableFuture<List<OpResult<Boolean>>> existsBatch(final List<String> keys)
    {
        final List<String> keysNow = copy(Objects.requireNonNull(keys, "keys"));
        return client.supplyOnClientThreads(() -> client.existsBatch(keysNow));
    }

    @Override
    public CompletableFuture<List<OpResult<Boolean>>> probeBatch(final List<String> keys, final LeasePolicy policy)
    {
        final List<String> keysNow = copy(Objects.requireNonNull(keys, "keys"));
        Objects.requireNonNull(policy, "policy");
        return client.supplyOnClientThreads(() -> client.probeBatch(keysNow, policy));
    }

    @Override
    public CompletableFuture<List<OpResult<ReadLease>>> probeBatchForRead(
        final List<String> keys, final LeasePolicy policy, final int from, final int count)
    {
        final List<String> keysNow = copy(Objects.requireNonNull(keys, "keys"));
        GranaryClientImpl.checkReadSelection(Objects.requireNonNull(policy, "policy"), from, count);
        return client.supplyOnClientThreads(() -> client.probeBatchForRead(keysNow, policy, from, count));
    }

    @Override
    public CompletableFuture<List<KeyInfo>> listKeys(final String regexOrNull, final int limit)
    {
        return client.supplyOnClientThreads(() -> client.listKeys(regexOrNull, limit));
    }

    @Override
    public CompletableFuture<ClusterStatus> clusterStatus()
    {
        return client.supplyOnClientThreads(client::clusterStatus);
    }

    /** The keys as they are now: the caller may reuse its list once the call returns. Null keys stay (INVALID_KEY). */
    private static List<String> copy(final List<String> keys)
    {
        return new ArrayList<>(keys);
    }
}
