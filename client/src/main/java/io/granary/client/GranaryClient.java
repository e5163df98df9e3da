package io.granary.client;

import io.granary.client.internal.GranaryClientImpl;

import java.nio.ByteBuffer;
import java.util.List;

/**
 * A connection to a Granary cluster: asks the master where values live and moves the bytes
 * directly to and from the storage nodes. Thread safe and meant to be shared by every thread of an
 * engine; calls block the calling thread until they finish and do all their work on it, the steps after
 * their transfers included, so they cost no thread hand-off. {@link #async()} offers the same operations
 * returning futures.
 *
 * <h2>Errors</h2>
 * Every store outcome and infrastructure failure is a {@link GranaryException} carrying an
 * {@link ErrorCode}: a malformed key is INVALID_KEY before any RPC, an unreachable master RPC_FAIL, a
 * master that does not answer within {@link ClientConfig#rpcTimeout()} RPC_TIMEOUT, a failed data
 * transfer TRANSFER_FAIL (or the code the storage node returned), any call after {@link #close()}
 * UNAVAILABLE_IN_CURRENT_STATUS. Batch calls answer per key, in request order, and throw only for a
 * failure of the whole request (a refused request, an RPC failure of its first phase, more than
 * {@link io.granary.protocol.Limits#MAX_BATCH_KEYS} keys). Misuse of the Java API itself (null
 * buffers, keys and values lists of different sizes, a read-only destination) is an
 * IllegalArgumentException or NullPointerException.
 */
public interface GranaryClient extends AutoCloseable
{
    /**
     * Creates a client. The master is not contacted until the first call, so this does not fail when
     * the master is down; the transfer engine is created here.
     *
     * @throws GranaryException INVALID_PARAMS when the configured transport is not available here.
     */
    static GranaryClient connect(final ClientConfig config)
    {
        return GranaryClientImpl.connect(config);
    }

    /**
     * The asynchronous view of this client: the same operations returning
     * {@link java.util.concurrent.CompletableFuture}s, over the same connections and engine. Closing this client
     * closes it.
     */
    AsyncGranaryClient async();

    /** Stores {@code value} under {@code key} with {@link PutOptions#defaults()}. */
    void put(String key, byte[] value);

    /**
     * Stores the bytes between {@code value}'s position and limit under {@code key}; the buffer's
     * position and limit are not changed and its bytes are sent without copying (a direct buffer avoids
     * the engine's copy). Objects are immutable: putting a key that already exists succeeds and
     * leaves the stored value as it was.
     */
    void put(String key, ByteBuffer value, PutOptions options);

    /** The value of {@code key} (a read lease is granted); OBJECT_NOT_FOUND on a miss. */
    byte[] get(String key);

    /**
     * Reads the value of {@code key} into {@code dst} at its position and advances the position by the
     * value's length, which is returned. BUFFER_OVERFLOW, before any transfer, when
     * {@code dst.remaining()} is smaller than the value; on a failure the position is unchanged but the
     * bytes after it may have been overwritten.
     */
    int getInto(String key, ByteBuffer dst);

    /**
     * Registers a direct buffer that many gets and puts will use (for example an engine's pool of KV pages) with the
     * transfer engine, as Mooncake's {@code registerLocalMemory}: transfers whose bytes lie inside it skip their own
     * registration, and over RDMA (transport rdma) the buffer's memory registration is made once instead of per
     * transfer. A speed-up only: every call works on unregistered buffers too. The client holds the buffer until
     * {@link #unregisterBuffer}. At most 64 buffers, none overlapping another.
     *
     * @return true when the transport keeps the registration (native, rdma), false when it has nothing to gain
     *         (java).
     * @throws IllegalArgumentException for a heap or empty buffer, or one overlapping a registered buffer.
     * @throws IllegalStateException when 64 buffers are registered, or the client is closed.
     */
    boolean registerBuffer(ByteBuffer buffer);

    /**
     * Forgets a buffer of {@link #registerBuffer}, named by it or a duplicate of it; no get or put on it may be in
     * progress.
     *
     * @return false when it was not registered.
     */
    boolean unregisterBuffer(ByteBuffer buffer);

    /** The value length of {@code key}; asks for the replica list, so it grants a read lease like a get. */
    long size(String key);

    /** Whether {@code key} is readable; a hit is leased (ExistKey). */
    boolean exists(String key);

    /** Removes {@code key}; OBJECT_HAS_LEASE while it is leased, OBJECT_NOT_FOUND when absent. */
    void remove(String key);

    /** Removes {@code key}; with {@code force} even while it is leased. */
    void remove(String key, boolean force);

    /**
     * Removes the unleased objects whose keys match {@code regex} (Java syntax, full match decided by
     * the master) and returns how many went. An empty regex is INVALID_PARAMS: use {@link #removeAll()}.
     */
    long removeByRegex(String regex);

    /** Removes every unleased object of the tenant and returns how many went. */
    long removeAll();

    /**
     * Stores many values in one master round trip per phase; results in request order.
     *
     * @throws IllegalArgumentException when {@code keys} and {@code values} differ in size.
     */
    List<OpResult<Void>> putBatch(List<String> keys, List<ByteBuffer> values, PutOptions options);

    /**
     * {@link #putBatch(List, List, PutOptions)} with options of its own for every key (e.g. each KV block its own
     * eviction group and parent), still one master round trip per phase.
     *
     * @throws IllegalArgumentException when {@code keys}, {@code values} and {@code options} differ in size.
     */
    List<OpResult<Void>> putBatch(List<String> keys, List<ByteBuffer> values, List<PutOptions> options);

    /** Reads many values, one master round trip; a miss is a per-key OBJECT_NOT_FOUND. */
    List<OpResult<byte[]>> getBatch(List<String> keys);

    /**
     * Reads many values into the caller's buffers, one master round trip, every transfer in flight at once:
     * value i lands at the position {@code dsts.get(i)} has now, whose position then advances past it; the
     * result holds its length. A value longer than its buffer's remaining space is a per-key BUFFER_OVERFLOW
     * (nothing is written); on any other per-key error the buffer's content between position and limit is
     * undefined and its position unchanged. Direct buffers receive the bytes straight from the socket.
     *
     * @throws IllegalArgumentException when {@code keys} and {@code dsts} differ in size or a buffer is read-only.
     */
    List<OpResult<Integer>> getBatchInto(List<String> keys, List<ByteBuffer> dsts);

    /** BatchExistKey: per-key readability; hits are leased. */
    List<OpResult<Boolean>> existsBatch(List<String> keys);

    /**
     * BatchProbeKey: existence with an explicit lease selection (see {@link LeasePolicy}). For the
     * candidate modes the mask marks the selected keys only. Keys are positional, so one malformed key
     * fails the whole probe with INVALID_KEY; a policy the master refuses is INVALID_PARAMS.
     */
    List<OpResult<Boolean>> probeBatch(List<String> keys, LeasePolicy policy);

    /**
     * {@link #probeBatch} that also brings back, in the same master round trip, the replica list of every key the
     * probe selects, so that reading them costs no second round trip ({@link #readBatchInto}). Entry i is a
     * {@link ReadLease} for a selected key, {@code OpResult.ok(null)} for a key the probe did not select (absent, or
     * a hit the policy does not lease), and a failure for a key the master refused.
     *
     * @throws IllegalArgumentException for {@link LeasePolicy#none()}, which leases nothing.
     */
    default List<OpResult<ReadLease>> probeBatchForRead(List<String> keys, LeasePolicy policy)
    {
        return probeBatchForRead(keys, policy, 0, policy.candidateSize());
    }

    /**
     * {@link #probeBatchForRead(List, LeasePolicy)} that brings back the replica lists of some members of each
     * selected candidate only: those at positions {@code [from, from + count)} within it (a tensor-parallel rank's
     * own pages, say), which keeps the master's answer and work in proportion to what this caller will read. The
     * other selected keys are leased all the same and come back as leases without a list
     * ({@link ReadLease#usable()} false: a read looks them up).
     *
     * @throws IllegalArgumentException for {@link LeasePolicy#none()}, or a range not within the candidate.
     */
    List<OpResult<ReadLease>> probeBatchForRead(List<String> keys, LeasePolicy policy, int from, int count);

    /**
     * {@link #getBatchInto} of leased keys: each lease that is {@link ReadLease#usable() usable} is read with the
     * replica list it came with, no master round trip; the others are looked up again, one BatchGetReplicaList for
     * all of them. Results, buffers and per-key errors as in {@link #getBatchInto}.
     *
     * @throws IllegalArgumentException when the sizes differ, a buffer is read-only, or a lease is null or came
     *                                  from another client.
     */
    List<OpResult<Integer>> readBatchInto(List<ReadLease> leases, List<ByteBuffer> dsts);

    /**
     * The tenant's objects whose keys match {@code regexOrNull} (all when null or empty), at most
     * {@code limit} of them (0 = the master's default). No lease is taken. Ask for one more than you
     * show to learn whether the listing was cut short.
     */
    List<KeyInfo> listKeys(String regexOrNull, int limit);

    /** Nodes, segments and totals as the master sees them. */
    ClusterStatus clusterStatus();

    /** Releases connections and threads; idempotent. Later calls fail with UNAVAILABLE_IN_CURRENT_STATUS. */
    @Override
    void close();
}
