package io.granary.client;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The asynchronous view of a {@link GranaryClient} ({@link GranaryClient#async()}): the same operations with the
 * same meaning, each returning at once with a {@link CompletableFuture}. It shares the client's connections and
 * engine and has no lifecycle of its own: closing the client closes it. Thread safe.
 *
 * <h2>Results and errors</h2>
 * A future completes with the value the synchronous call returns, or exceptionally with a
 * {@link GranaryException} carrying the same {@link ErrorCode} the synchronous call would throw ({@code join()}
 * wraps it in a {@link java.util.concurrent.CompletionException}, {@code get()} in an
 * {@link java.util.concurrent.ExecutionException}). That includes every store outcome, INVALID_KEY, the
 * INVALID_PARAMS checks of batches and regexes, and UNAVAILABLE_IN_CURRENT_STATUS once the client is closed.
 * Only misuse of the Java API itself throws at once, as in the synchronous API: a null value, options, policy,
 * key list or destination ({@link NullPointerException}), a read-only destination or key and value lists of
 * different sizes ({@link IllegalArgumentException}).
 *
 * <h2>Threads</h2>
 * Master calls block, so each call's control-plane steps run on a small pool of daemon threads owned by the client
 * ({@code granary-client-N}); transfers are pipelined by the transfer engine and never wait on a thread. A returned
 * future completes on a client thread, never on an engine I/O thread and never on the calling thread before its
 * work is done (only a call refused up front, e.g. after close, returns a future that is already complete).
 * Callbacks therefore run on a client thread: keep them short, since they hold up the client's other asynchronous
 * calls. A callback may call the client again: the asynchronous API, or the synchronous one, which does all its
 * work on its calling thread and needs no client thread. A callback must not wait for another asynchronous call
 * ({@code join()}, {@code get()}); compose it with {@code thenCompose} instead.
 *
 * <h2>Buffers and memory</h2>
 * Buffers passed in are used until the future completes: do not change a value's bytes, or read or reuse a
 * {@code getInto} destination, before then. Positions and limits are taken when the call is made. Cancelling or
 * completing a returned future yourself does not stop the call: its transfers still run and still use the buffers.
 * Nothing bounds how many calls a caller may start: each waits in the client's queue for its master call and then
 * holds its buffers until its transfers end. What is in flight to each storage node is bounded by the transfer
 * engine (ClientConfig#maxQueuedTransfersPerPeer and its admission limits); a transfer it refuses fails only its own
 * key, with UNAVAILABLE_IN_CURRENT_STATUS (a read first tries the key's other replicas). Producers faster than the
 * cluster should keep their own window of calls in flight, for instance with a semaphore released on completion.
 *
 * <h2>Close</h2>
 * {@link GranaryClient#close()} does not wait for calls in flight: it fails their transfers and every such call
 * completes exceptionally with UNAVAILABLE_IN_CURRENT_STATUS (the original failure as its cause), unless it had
 * already finished; a batch whose keys all finished still returns its results. A put cut short this way may leave
 * its key unfinished until the master's put discard timeout.
 */
public interface AsyncGranaryClient
{
    /** {@link GranaryClient#put(String, byte[])}. */
    CompletableFuture<Void> put(String key, byte[] value);

    /** {@link GranaryClient#put(String, ByteBuffer, PutOptions)}; leave the value's bytes alone until completion. */
    CompletableFuture<Void> put(String key, ByteBuffer value, PutOptions options);

    /** {@link GranaryClient#get(String)}. */
    CompletableFuture<byte[]> get(String key);

    /**
     * {@link GranaryClient#getInto(String, ByteBuffer)}: reads at the position {@code dst} has now; the position is
     * advanced when the future completes successfully. Leave {@code dst} alone until then.
     */
    CompletableFuture<Integer> getInto(String key, ByteBuffer dst);

    /** {@link GranaryClient#size(String)}. */
    CompletableFuture<Long> size(String key);

    /** {@link GranaryClient#exists(String)}. */
    CompletableFuture<Boolean> exists(String key);

    /** {@link GranaryClient#remove(String)}. */
    CompletableFuture<Void> remove(String key);

    /** {@link GranaryClient#remove(String, boolean)}. */
    CompletableFuture<Void> remove(String key, boolean force);

    /** {@link GranaryClient#removeByRegex(String)}. */
    CompletableFuture<Long> removeByRegex(String regex);

    /** {@link GranaryClient#removeAll()}. */
    CompletableFuture<Long> removeAll();

    /**
     * {@link GranaryClient#putBatch(List, List, PutOptions)}: every replica write of every key is in flight at once.
     *
     * @throws IllegalArgumentException when {@code keys} and {@code values} differ in size.
     */
    CompletableFuture<List<OpResult<Void>>> putBatch(List<String> keys, List<ByteBuffer> values, PutOptions options);

    /**
     * {@link GranaryClient#putBatch(List, List, List)}: options per key, every write in flight at once.
     *
     * @throws IllegalArgumentException when {@code keys}, {@code values} and {@code options} differ in size.
     */
    CompletableFuture<List<OpResult<Void>>> putBatch(
        List<String> keys, List<ByteBuffer> values, List<PutOptions> options);

    /** {@link GranaryClient#getBatch(List)}: every read is in flight at once. */
    CompletableFuture<List<OpResult<byte[]>>> getBatch(List<String> keys);

    /**
     * {@link GranaryClient#getBatchInto(List, List)}: every read is in flight at once; the buffers belong to the
     * call until the future completes.
     */
    CompletableFuture<List<OpResult<Integer>>> getBatchInto(List<String> keys, List<ByteBuffer> dsts);

    /** {@link GranaryClient#existsBatch(List)}. */
    CompletableFuture<List<OpResult<Boolean>>> existsBatch(List<String> keys);

    /** {@link GranaryClient#probeBatch(List, LeasePolicy)}. */
    CompletableFuture<List<OpResult<Boolean>>> probeBatch(List<String> keys, LeasePolicy policy);

    /** {@link GranaryClient#probeBatchForRead(List, LeasePolicy)}. */
    default CompletableFuture<List<OpResult<ReadLease>>> probeBatchForRead(List<String> keys, LeasePolicy policy)
    {
        return probeBatchForRead(keys, policy, 0, policy.candidateSize());
    }

    /** {@link GranaryClient#probeBatchForRead(List, LeasePolicy, int, int)}. */
    CompletableFuture<List<OpResult<ReadLease>>> probeBatchForRead(
        List<String> keys, LeasePolicy policy, int from, int count);

    /**
     * {@link GranaryClient#readBatchInto(List, List)}: every read is in flight at once; the buffers belong to the
     * call until the future completes.
     */
    CompletableFuture<List<OpResult<Integer>>> readBatchInto(List<ReadLease> leases, List<ByteBuffer> dsts);

    /** {@link GranaryClient#listKeys(String, int)}. */
    CompletableFuture<List<KeyInfo>> listKeys(String regexOrNull, int limit);

    /** {@link GranaryClient#clusterStatus()}. */
    CompletableFuture<ClusterStatus> clusterStatus();
}
