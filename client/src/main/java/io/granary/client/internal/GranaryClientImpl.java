package io.granary.client.internal;

import io.granary.client.AsyncGranaryClient;
import io.granary.client.ClientConfig;
import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;
import io.granary.common.Clock;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.CountResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.SettledReplica;
import io.granary.proto.SettledReplicas;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.Limits;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferEngines;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * The {@link GranaryClient}: control-plane calls through {@link MasterClient}, bytes through a
 * {@link TransferDispatcher}, following DESIGN "Data flow" (PutStart, parallel replica writes,
 * PutEnd/PutRevoke; GetReplicaList, read with failover; one master round trip per phase of a batch).
 *
 * <p>Each data call is written once, as {@code startXxx(..., steps)}: its first master call runs on the thread
 * that calls it, its transfers complete on engine I/O threads, and every later step (a failover submit, PutEnd,
 * assembling results) runs on {@code steps}, never on an I/O thread. The synchronous API passes a
 * {@link CallingThreadExecutor}, so all of it runs on the caller's thread with no hand-off; the
 * {@link AsyncGranaryClient} view starts the call on the {@link ClientExecutor} and passes that. Thread safe: no
 * per-call state is kept here.
 */
public final class GranaryClientImpl implements GranaryClient
{
    private static final Logger LOG = LoggerFactory.getLogger(GranaryClientImpl.class);

    /** Largest value a byte[] can hold on common JVMs. */
    static final int MAX_ARRAY_BYTES = Integer.MAX_VALUE - 8;

    /** How long close() waits for the client's threads to finish what they started. */
    private static final long CLOSE_WAIT_MS = 5_000;

    private static final int OK = 0;
    private static final int OBJECT_NOT_FOUND = ErrorCode.OBJECT_NOT_FOUND.code();
    private static final int OBJECT_ALREADY_EXISTS = ErrorCode.OBJECT_ALREADY_EXISTS.code();

    private final ClientConfig config;
    private final String tenant;
    private final String clientId;
    private final MasterClient master;
    private final TransferDispatcher transfers;
    private final ReplicaSelector selector;
    private final Clock clock;
    private final boolean checksums;
    private final ClientExecutor clientThreads;
    private final AsyncGranaryClient async;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** readBatchInto's leases read with the probe's replica list, and those looked up again. */
    private final LongAdder leaseReadsWithList = new LongAdder();
    private final LongAdder leaseReadsLookedUp = new LongAdder();

    private GranaryClientImpl(
        final ClientConfig config, final MasterClient master, final TransferEngine engine, final Clock clock)
    {
        this.config = config;
        this.tenant = config.tenant();
        this.clientId = config.clientId();
        this.master = master;
        this.transfers = new TransferDispatcher(engine);
        this.clock = clock;
        this.checksums = config.checksums();
        final LocalHosts localHosts =
            config.localHost() == null ? LocalHosts.ofThisMachine() : LocalHosts.of(config.localHost());
        this.selector = new ReplicaSelector(localHosts::isLocal, transfers::inFlight);
        this.clientThreads = new ClientExecutor(ClientExecutor.DEFAULT_THREADS);
        this.async = new AsyncGranaryClientImpl(this);
    }

    /**
     * The production client: the engine from {@link TransferEngines#create}, the system clock, and metrics in the
     * config's MeterRegistry when it has one.
     */
    public static GranaryClient connect(final ClientConfig config)
    {
        Objects.requireNonNull(config, "config");
        if (config.meterRegistry() == null)
        {
            return connect(config, TransferEngines::create, Clock.SYSTEM);
        }
        final ClientMetrics metrics = new ClientMetrics(config.meterRegistry(), config.tenant());
        final GranaryClient client = connect(config, (kind, transferConfig) ->
        {
            final TransferEngine engine = TransferEngines.create(kind, transferConfig);
            metrics.bindEngine(engine, config.tenant());
            return engine;
        }, Clock.SYSTEM);
        metrics.bindLeaseReads((GranaryClientImpl)client, config.tenant());
        return new MeteredGranaryClient(client, metrics);
    }

    /**
     * A client whose engine comes from {@code engines} and whose lease checks use {@code clock}. Not API:
     * tests and benchmarks use it to plug in an engine double.
     */
    public static GranaryClient connect(
        final ClientConfig config, final TransferEngineFactory engines, final Clock clock)
    {
        Objects.requireNonNull(config, "config");
        final TransferEngine engine;
        try
        {
            engine = engines.create(config.transport(), config.transferConfig());
        }
        catch (final IllegalStateException | IllegalArgumentException ex)
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, "transport " + config.transport() + ": " +
                ex.getMessage(), ex);
        }
        catch (final RuntimeException ex)
        {
            throw new GranaryException(ErrorCode.INTERNAL_ERROR, "cannot create the " + config.transport() +
                " transfer engine: " + ex, ex);
        }
        try
        {
            return new GranaryClientImpl(config, new MasterClient(config.masterAddress(), config.rpcTimeout(),
                config.fastLookups(), config.tls(), config.reconnectBackoff(), config.reconnectBackoffMax()), engine,
                Objects.requireNonNull(clock, "clock"));
        }
        catch (final RuntimeException ex)
        {
            engine.close();
            throw ex;
        }
    }

    /** The settings this client was built with. */
    public ClientConfig config()
    {
        return config;
    }

    @Override
    public AsyncGranaryClient async()
    {
        return async;
    }

    // ------------------------------------------------------------------------------------------- running calls

    /**
     * Runs a data call entirely on this thread: the call's first steps directly, the later ones as this thread
     * drains a {@link CallingThreadExecutor} while it waits.
     */
    private <T> T callHere(final Function<Executor, CompletableFuture<T>> call)
    {
        final CallingThreadExecutor here = new CallingThreadExecutor(clientThreads);
        final TransferEngine.Driver driver = transfers.openDriver(); // this thread moves the call's bytes itself
        try
        {
            final CompletableFuture<T> steps;
            try
            {
                steps = call.apply(here);
            }
            catch (final GranaryException ex)
            {
                here.abandon();
                throw closedIfClosing(ex);
            }
            catch (final RuntimeException | Error ex)
            {
                here.abandon();
                throw ex;
            }
            try
            {
                return here.await(steps, driver);
            }
            catch (final GranaryException ex)
            {
                throw closedIfClosing(ex);
            }
        }
        finally
        {
            if (driver != null)
            {
                driver.close();
            }
        }
    }

    /**
     * Runs a data call on the client's threads: its first steps (blocking master calls) as one task, the later
     * ones as tasks after the transfers. The returned future completes on a client thread with the value or a
     * {@link GranaryException}; closed clients get an exceptionally completed future at once.
     */
    <T> CompletableFuture<T> callOnClientThreads(final Function<Executor, CompletableFuture<T>> call)
    {
        final CompletableFuture<T> result = new CompletableFuture<>();
        if (closed.get())
        {
            result.completeExceptionally(closedException());
            return result;
        }
        clientThreads.startCall(() ->
        {
            final CompletableFuture<T> steps;
            try
            {
                steps = call.apply(clientThreads);
            }
            catch (final Throwable ex)
            {
                deliver(result, null, ex);
                return;
            }
            steps.whenComplete((value, ex) -> deliver(result, value, ex));
        });
        return result;
    }

    /** A blocking control-plane call, made on the client's threads. */
    <T> CompletableFuture<T> supplyOnClientThreads(final Supplier<T> call)
    {
        return callOnClientThreads(threads -> CompletableFuture.completedFuture(call.get()));
    }

    private <T> void deliver(final CompletableFuture<T> result, final T value, final Throwable ex)
    {
        if (!clientThreads.isPoolThread() && !clientThreads.isShutdown())
        {
            // Callers' callbacks run where the future completes: never on an engine I/O thread.
            clientThreads.execute(() -> deliver(result, value, ex));
            return;
        }
        if (ex == null)
        {
            result.complete(value);
            return;
        }
        final Throwable cause = CallingThreadExecutor.unwrap(ex);
        if (cause instanceof GranaryException)
        {
            result.completeExceptionally(closedIfClosing((GranaryException)cause));
        }
        else if (cause instanceof Error)
        {
            result.completeExceptionally(cause);
        }
        else
        {
            result.completeExceptionally(new GranaryException(ErrorCode.INTERNAL_ERROR,
                "unexpected failure in the client: " + cause, cause));
        }
    }

    /** A failure of a call that close() cut short is UNAVAILABLE_IN_CURRENT_STATUS, whatever it looked like. */
    private GranaryException closedIfClosing(final GranaryException ex)
    {
        if (!closed.get() || ex.code() == ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)
        {
            return ex;
        }
        return new GranaryException(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS,
            "the client was closed while the call was in flight (" + ex.getMessage() + ")", ex);
    }

    // ------------------------------------------------------------------------------------------- puts

    @Override
    public void put(final String key, final byte[] value)
    {
        put(key, ByteBuffer.wrap(Objects.requireNonNull(value, "value")), PutOptions.defaults());
    }

    @Override
    public void put(final String key, final ByteBuffer value, final PutOptions options)
    {
        Objects.requireNonNull(value, "value");
        Objects.requireNonNull(options, "options");
        final ByteBuffer data = value.duplicate();
        callHere(here -> startPut(key, data, options, here));
    }

    /**
     * PutStart on this thread, then the replica writes (each followed by its COMMIT), with the value's checksum
     * computed here while they are under way; PutEnd (or PutRevoke) runs on {@code steps} once every write finished,
     * and the future completes there. A node that refuses the write token (it expired, or the master's key changed)
     * makes the put start over once. A put whose writes failed on a node (unreachable, timed out, restarted) is
     * revoked and started again, up to {@link ClientConfig#putRetries()} times, asking the master to place it away
     * from the nodes that failed.
     *
     * @param data the value between position and limit, in a buffer of the client's own (a duplicate).
     * @throws GranaryException when the put fails before any transfer starts.
     */
    CompletableFuture<Void> startPut(
        final String key, final ByteBuffer data, final PutOptions options, final Executor steps)
    {
        return startPut(key, data, options, steps, true);
    }

    private CompletableFuture<Void> startPut(
        final String key, final ByteBuffer data, final PutOptions options, final Executor steps,
        final boolean mayStartOver)
    {
        ensureOpen();
        Keys.check(key);
        return putAttempt(key, data, ProtoMapping.toProto(options), steps, Set.of(), config.putRetries(), mayStartOver,
            checksums ? new Checksums.Pending(data) : null);
    }

    private CompletableFuture<Void> putAttempt(
        final String key,
        final ByteBuffer data,
        final io.granary.proto.PutOptions options,
        final Executor steps,
        final Set<String> avoidNodes,
        final int retriesLeft,
        final boolean mayStartOver,
        final Checksums.Pending crc)
    {
        final PutStartResponse started = master.putStart(PutStartRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setKey(key)
            .setValueLength(data.remaining())
            .setOptions(options)
            .addAllAvoidNodeIds(avoidNodes)
            .build(), crc); // the checksum is computed while the master places the value
        if (started.getCode() == OBJECT_ALREADY_EXISTS)
        {
            return CompletableFuture.completedFuture(null); // objects are immutable: the stored value stands
        }
        if (started.getCode() != OK)
        {
            throw refused("put", key, "PutStart", started.getCode());
        }
        final CommitRecord record =
            commitRecord(tenant, key, data.remaining(), started.getVersion(), options, config.commitParents());
        final CompletableFuture<byte[]> commit = record == null ? null : new CompletableFuture<>();
        final WriteOperation write;
        try
        {
            write = WriteOperation.plan(key, data, started.getReplicasList(), commit);
        }
        catch (final GranaryException ex)
        {
            revokeQuietly(key, ex, WriteOperation.unwritten(started.getReplicasList()));
            throw ex;
        }
        seal(record, commit, crc); // the checksum was computed during PutStart: the record goes with the WRITE
        final CompletableFuture<OpFailure> written = write.start(transfers);
        final int crcValue = crc == null ? 0 : crc.get();
        return written.thenComposeAsync(failure ->
        {
            if (failure == null)
            {
                return CompletableFuture.completedFuture(endPut(key, crcValue));
            }
            final GranaryException ex = failure.toException();
            revokeQuietly(key, ex, write.settled());
            if (mayStartOver && ReadOperation.isTokenRefusal(failure.code().code()))
            {
                return putAttempt(key, data, options, steps, avoidNodes, retriesLeft, false, crc);
            }
            if (retriesLeft > 0 && retryable(failure.code()) && !closed.get())
            {
                final Set<String> avoid = new HashSet<>(avoidNodes);
                avoid.addAll(write.failedNodes());
                LOG.debug("put {} failed ({}); retrying away from {}", Keys.quote(key), failure.message(), avoid);
                return putAttempt(key, data, options, steps, avoid, retriesLeft - 1, mayStartOver, crc);
            }
            throw ex;
        }, steps);
    }

    /**
     * Write failures another placement may not have: the node is gone, stalled, restarted or full (its queue, or its
     * ledgers' heap budget: a COMMIT answered NO_AVAILABLE_HANDLE).
     */
    static boolean retryable(final ErrorCode code)
    {
        return code == ErrorCode.TRANSFER_FAIL || code == ErrorCode.RPC_TIMEOUT ||
            code == ErrorCode.SEGMENT_NOT_FOUND || code == ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS ||
            code == ErrorCode.NO_AVAILABLE_HANDLE;
    }

    /**
     * Completes the COMMIT payload (when there is one) with the value's CRC32C ({@code crc} null: checksums are off),
     * so that an object rebuilt from a node's ledger keeps its checksum.
     */
    private static void seal(
        final CommitRecord record, final CompletableFuture<byte[]> commit, final Checksums.Pending crc)
    {
        if (commit != null)
        {
            commit.complete(crc != null ? record.encodeWithCrc32c(crc.get()) : record.encode());
        }
    }

    /**
     * The COMMIT record every replica's node gets after the value's bytes (its CRC32C is added once computed): what a
     * restarted master needs to rebuild the object from the node's ledger, with the parent key the put names when
     * {@code withParent}. Null when the master issued no version (an older master).
     */
    static CommitRecord commitRecord(
        final String tenant, final String key, final long length, final long version,
        final io.granary.proto.PutOptions options, final boolean withParent)
    {
        if (version == 0)
        {
            return null;
        }
        int flags = options.getHardPin() ? CommitRecord.FLAG_HARD_PIN : 0;
        long softPinTtlMs = 0;
        if (options.getSoftPin() == io.granary.proto.SoftPinAction.SOFT_PIN_ENABLE)
        {
            if (!options.hasSoftPinTtlMs())
            {
                flags |= CommitRecord.FLAG_SOFT_PIN | CommitRecord.FLAG_SOFT_PIN_DEFAULT_TTL;
            }
            else if (options.getSoftPinTtlMs() > 0)
            {
                flags |= CommitRecord.FLAG_SOFT_PIN;
                softPinTtlMs = options.getSoftPinTtlMs();
            }
        }
        return new CommitRecord(flags, tenant, key, options.getGroupId(), withParent ? options.getParentKey() : "",
            length, version, softPinTtlMs, 0);
    }

    private Void endPut(final String key, final int crc)
    {
        ensureOpen();
        final PutEndRequest.Builder end = PutEndRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setKey(key);
        if (checksums)
        {
            end.setCrc32C(crc);
        }
        final CodeResponse ended = master.putEnd(end.build());
        if (ended.getCode() != OK)
        {
            throw refused("put", key, "PutEnd", ended.getCode());
        }
        return null;
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        final ByteBuffer[] data = captureValues(keys, values, options);
        return callHere(here -> startPutBatch(keys, data, sameOptions(options, data.length), here));
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final List<PutOptions> options)
    {
        final ByteBuffer[] data = captureValues(keys, values, PutOptions.defaults());
        final io.granary.proto.PutOptions[] perKey = perKeyOptions(options, data.length);
        return callHere(here -> startPutBatch(keys, data, perKey, here));
    }

    /** {@code options} for each of {@code n} keys, mapped once. */
    static io.granary.proto.PutOptions[] sameOptions(final PutOptions options, final int n)
    {
        final io.granary.proto.PutOptions[] perKey = new io.granary.proto.PutOptions[n];
        Arrays.fill(perKey, ProtoMapping.toProto(options));
        return perKey;
    }

    /**
     * One options per key, mapped (equal options share one message).
     *
     * @throws IllegalArgumentException when there are not exactly {@code n} options.
     */
    static io.granary.proto.PutOptions[] perKeyOptions(final List<PutOptions> options, final int n)
    {
        Objects.requireNonNull(options, "options");
        if (options.size() != n)
        {
            throw new IllegalArgumentException(
                "putBatch needs one PutOptions per key: " + n + " keys, " + options.size() + " options");
        }
        final io.granary.proto.PutOptions[] perKey = new io.granary.proto.PutOptions[n];
        final Map<PutOptions, io.granary.proto.PutOptions> mapped = new HashMap<>();
        for (int i = 0; i < n; i++)
        {
            perKey[i] = mapped.computeIfAbsent(
                Objects.requireNonNull(options.get(i), "options[" + i + "]"), ProtoMapping::toProto);
        }
        return perKey;
    }

    /**
     * Checks a putBatch's arguments and takes a duplicate of every value, so that the call no longer depends on
     * the caller's buffer positions.
     *
     * @throws IllegalArgumentException when {@code keys} and {@code values} differ in size.
     */
    static ByteBuffer[] captureValues(final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        Objects.requireNonNull(keys, "keys");
        Objects.requireNonNull(values, "values");
        Objects.requireNonNull(options, "options");
        if (keys.size() != values.size())
        {
            throw new IllegalArgumentException(
                "putBatch needs one value per key: " + keys.size() + " keys, " + values.size() + " values");
        }
        final ByteBuffer[] data = new ByteBuffer[values.size()];
        for (int i = 0; i < data.length; i++)
        {
            data[i] = Objects.requireNonNull(values.get(i), "values[" + i + "]").duplicate();
        }
        return data;
    }

    /**
     * BatchPutStart on this thread, then every replica write of every key, all submitted before any is waited for
     * so that the engine pipelines them over its lanes, and the values' checksums computed here meanwhile;
     * BatchPutEnd and BatchPutRevoke run on {@code steps} once every write finished. Keys whose write token a node
     * refused (it expired, or the master's key changed) start over once, as a batch of their own.
     *
     * @param data the values from {@link #captureValues}.
     * @throws GranaryException when the whole request fails before any transfer starts.
     */
    CompletableFuture<List<OpResult<Void>>> startPutBatch(
        final List<String> keys, final ByteBuffer[] data, final io.granary.proto.PutOptions[] options,
        final Executor steps)
    {
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return CompletableFuture.completedFuture(List.of());
        }
        checkBatchSize("putBatch", n);
        return putBatchRound(keys, data, options, steps, Set.of(), config.putRetries(), true);
    }

    /**
     * One round of a putBatch: BatchPutStart, every write, then BatchPutEnd/BatchPutRevoke; keys whose writes failed
     * on a node go into another round (revoked first, placed away from the failed nodes) while retries are left.
     */
    private CompletableFuture<List<OpResult<Void>>> putBatchRound(
        final List<String> keys,
        final ByteBuffer[] data,
        final io.granary.proto.PutOptions[] options,
        final Executor steps,
        final Set<String> avoidNodes,
        final int retriesLeft,
        final boolean mayStartOver)
    {
        final int n = keys.size();
        final OpResult<Void>[] results = newResults(n);
        final List<Integer> sent = new ArrayList<>(n);
        final BatchPutStartRequest.Builder request = BatchPutStartRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setSharedGrants(true)
            .addAllAvoidNodeIds(avoidNodes);
        boolean uniform = true;
        for (int i = 0; i < n; i++)
        {
            final OpFailure problem = Keys.problem(keys.get(i));
            if (problem != null)
            {
                results[i] = problem.toResult();
                continue;
            }
            uniform &= sent.isEmpty() || options[i].equals(options[sent.get(0)]);
            sent.add(i);
            request.addKeys(keys.get(i)).addValueLengths(data[i].remaining());
        }
        if (sent.isEmpty())
        {
            return CompletableFuture.completedFuture(Arrays.asList(results));
        }
        if (uniform)
        {
            request.setOptions(options[sent.get(0)]); // one message for the batch, as every master understands
        }
        else
        {
            for (final int i : sent)
            {
                request.addPerKeyOptions(options[i]);
            }
        }

        // The values' checksums are computed while the master places them (this core is idle then).
        final Checksums.Pending[] crcs = checksums ? new Checksums.Pending[n] : null;
        if (crcs != null)
        {
            for (final int i : sent)
            {
                crcs[i] = new Checksums.Pending(data[i]);
            }
        }
        final StartedPuts started = master.batchPutStart(request.build(), crcs == null ? null : () ->
        {
            for (final int i : sent)
            {
                crcs[i].run();
            }
        });
        if (started.code != OK)
        {
            throw batchRefused("putBatch", sent.size(), "BatchPutStart", started.code);
        }
        if (started.count != sent.size())
        {
            final GranaryException ex = new GranaryException(ErrorCode.INTERNAL_ERROR, "BatchPutStart answered " +
                started.count + " results for " + sent.size() + " keys");
            batchRevokeQuietly(request.getKeysList(), ex, null);
            throw ex;
        }

        // Phase 2: every replica write of every key, all in flight together.
        final Countdown written = new Countdown();
        final List<WriteOperation> operations = new ArrayList<>(sent.size());
        final List<Integer> writeIndex = new ArrayList<>(sent.size());
        final List<String> toRevoke = new ArrayList<>();
        final List<List<SettledReplica>> settled = new ArrayList<>();
        for (int j = 0; j < sent.size(); j++)
        {
            final int i = sent.get(j);
            final String key = keys.get(i);
            final int code = started.code(j);
            if (code == OBJECT_ALREADY_EXISTS)
            {
                results[i] = OpResult.ok(null);
                continue;
            }
            if (code != OK)
            {
                results[i] = OpFailure.of(refused("put", key, "BatchPutStart", code)).toResult();
                continue;
            }
            try
            {
                final CommitRecord record =
                    commitRecord(tenant, key, data[i].remaining(), started.version(j), options[i],
                        config.commitParents());
                final CompletableFuture<byte[]> commit = record == null ? null : new CompletableFuture<>();
                final WriteOperation operation = WriteOperation.of(key, data[i], started.extents(j, key), commit);
                // The checksums were computed during BatchPutStart: each record goes with its WRITE.
                seal(record, commit, crcs == null ? null : crcs[i]);
                written.add();
                operation.start(transfers, written);
                operations.add(operation);
                writeIndex.add(i);
            }
            catch (final GranaryException ex)
            {
                results[i] = OpFailure.of(ex).toResult();
                toRevoke.add(key);
                settled.add(started.unwritten(j));
            }
        }
        final int[] crcValues = crcs == null ? null : new int[n];
        if (crcValues != null)
        {
            for (final int i : writeIndex)
            {
                crcValues[i] = crcs[i].get();
            }
        }
        written.run(); // every write has started
        return written.done().thenComposeAsync(ignored ->
            endPutBatch(keys, data, options, steps, avoidNodes, retriesLeft, mayStartOver, results, operations,
                writeIndex, toRevoke, settled, crcValues), steps);
    }

    /**
     * Phase 3: one PutEnd for the written keys (with their checksums when {@code crcs} is not null), one PutRevoke
     * for the rest, then one more round for the keys worth another try: those refused for their write token (once,
     * while {@code mayStartOver}) and those whose write failed on a node (placed away from it, while retries last).
     */
    private CompletableFuture<List<OpResult<Void>>> endPutBatch(
        final List<String> keys,
        final ByteBuffer[] data,
        final io.granary.proto.PutOptions[] options,
        final Executor steps,
        final Set<String> avoidNodes,
        final int retriesLeft,
        final boolean mayStartOver,
        final OpResult<Void>[] results,
        final List<WriteOperation> operations,
        final List<Integer> writeIndex,
        final List<String> toRevoke,
        final List<List<SettledReplica>> settled,
        final int[] crcs)
    {
        ensureOpen();
        final List<String> toEnd = new ArrayList<>(operations.size());
        final List<Integer> endIndex = new ArrayList<>(operations.size());
        final List<Integer> again = new ArrayList<>();
        final Set<String> avoid = new HashSet<>(avoidNodes);
        boolean startedOver = false;
        boolean retried = false;
        for (int w = 0; w < operations.size(); w++)
        {
            final OpFailure failure = operations.get(w).failure(); // every write has finished
            final int i = writeIndex.get(w);
            if (failure == null)
            {
                toEnd.add(keys.get(i));
                endIndex.add(i);
            }
            else
            {
                results[i] = failure.toResult();
                toRevoke.add(keys.get(i));
                settled.add(operations.get(w).settled());
                if (mayStartOver && ReadOperation.isTokenRefusal(failure.code().code()))
                {
                    again.add(i);
                    startedOver = true;
                }
                else if (retriesLeft > 0 && retryable(failure.code()))
                {
                    again.add(i);
                    retried = true;
                    avoid.addAll(operations.get(w).failedNodes());
                }
            }
        }
        if (!toEnd.isEmpty())
        {
            endBatch(keys, toEnd, endIndex, results, crcs);
        }
        if (!toRevoke.isEmpty())
        {
            batchRevokeQuietly(toRevoke, null, settled);
        }
        if (again.isEmpty() || closed.get())
        {
            return CompletableFuture.completedFuture(Arrays.asList(results));
        }
        final List<String> againKeys = new ArrayList<>(again.size());
        final ByteBuffer[] againData = new ByteBuffer[again.size()];
        final io.granary.proto.PutOptions[] againOptions = new io.granary.proto.PutOptions[again.size()];
        for (int r = 0; r < again.size(); r++)
        {
            againKeys.add(keys.get(again.get(r)));
            againData[r] = data[again.get(r)];
            againOptions[r] = options[again.get(r)];
        }
        LOG.debug("putBatch: trying {} keys again, away from {}", again.size(), avoid);
        final CompletableFuture<List<OpResult<Void>>> next;
        try
        {
            next = putBatchRound(againKeys, againData, againOptions, steps, avoid, retried ? retriesLeft - 1 : retriesLeft,
                mayStartOver && !startedOver);
        }
        catch (final GranaryException ex)
        {
            return CompletableFuture.completedFuture(Arrays.asList(results)); // the first round's failures stand
        }
        return next.thenApply(retriedResults ->
        {
            for (int r = 0; r < again.size(); r++)
            {
                results[again.get(r)] = retriedResults.get(r);
            }
            return Arrays.asList(results);
        });
    }

    private void endBatch(
        final List<String> keys,
        final List<String> toEnd,
        final List<Integer> endIndex,
        final OpResult<Void>[] results,
        final int[] crcs)
    {
        final BatchKeysRequest.Builder request =
            BatchKeysRequest.newBuilder().setTenant(tenant).setClientId(clientId).addAllKeys(toEnd);
        if (crcs != null)
        {
            for (final int i : endIndex)
            {
                request.addCrc32C(crcs[i]);
            }
        }
        final BatchCodeResponse ended;
        try
        {
            ended = master.batchPutEnd(request.build());
        }
        catch (final GranaryException ex)
        {
            // The bytes are in place but the master's answer is unknown: report, do not revoke.
            for (final int i : endIndex)
            {
                results[i] = OpResult.failed(ex.code(), "put " + Keys.quote(keys.get(i)) + ": " + ex.getMessage());
            }
            return;
        }
        final boolean countMismatch = ended.getCode() == OK && ended.getCodesCount() != toEnd.size();
        for (int e = 0; e < toEnd.size(); e++)
        {
            final int i = endIndex.get(e);
            final int code;
            if (ended.getCode() != OK)
            {
                code = ended.getCode();
            }
            else if (countMismatch)
            {
                code = ErrorCode.INTERNAL_ERROR.code();
            }
            else
            {
                code = ended.getCodes(e);
            }
            results[i] = code == OK ? OpResult.ok(null) :
                OpFailure.of(refused("put", keys.get(i), "BatchPutEnd", code)).toResult();
        }
    }

    /**
     * PutRevoke, telling the master which replicas it may free at once ({@code settled}: every write to them answered
     * OK, or none sent); the others stay out of use for its discard timeout.
     */
    private void revokeQuietly(final String key, final GranaryException cause, final List<SettledReplica> settled)
    {
        if (closed.get())
        {
            return; // the master discards the unfinished put after its discard timeout
        }
        try
        {
            final CodeResponse revoked = master.putRevoke(PutRevokeRequest.newBuilder()
                .setTenant(tenant)
                .setClientId(clientId)
                .setKey(key)
                .addAllSettled(settled)
                .build());
            if (revoked.getCode() != OK)
            {
                LOG.debug("PutRevoke of {} answered {}", Keys.quote(key), ProtoMapping.describeCode(revoked.getCode()));
            }
        }
        catch (final GranaryException ex)
        {
            // The master discards the unfinished put after its discard timeout anyway.
            cause.addSuppressed(ex);
        }
    }

    /** BatchPutRevoke; {@code settled} is null or holds each key's settled replicas (see revokeQuietly). */
    private void batchRevokeQuietly(
        final List<String> keys, final GranaryException cause, final List<List<SettledReplica>> settled)
    {
        if (closed.get())
        {
            return;
        }
        try
        {
            final BatchKeysRequest.Builder request =
                BatchKeysRequest.newBuilder().setTenant(tenant).setClientId(clientId).addAllKeys(keys);
            if (settled != null && settled.stream().anyMatch(s -> !s.isEmpty()))
            {
                for (final List<SettledReplica> replicas : settled)
                {
                    request.addSettled(SettledReplicas.newBuilder().addAllReplicas(replicas));
                }
            }
            final BatchCodeResponse revoked = master.batchPutRevoke(request.build());
            if (revoked.getCode() != OK)
            {
                LOG.debug("BatchPutRevoke of {} keys answered {}", keys.size(),
                    ProtoMapping.describeCode(revoked.getCode()));
            }
        }
        catch (final GranaryException ex)
        {
            if (cause != null)
            {
                cause.addSuppressed(ex);
            }
            else
            {
                LOG.warn("BatchPutRevoke of {} keys failed; the master discards them after its timeout: {}",
                    keys.size(), ex.getMessage());
            }
        }
    }

    // ------------------------------------------------------------------------------------------- reads

    @Override
    public byte[] get(final String key)
    {
        return callHere(here -> startGet(key, here));
    }

    /**
     * GetReplicaList on this thread, then the read with failover (each failover submitted from {@code steps});
     * the future completes on {@code steps}.
     *
     * @throws GranaryException when the get fails before any transfer starts.
     */
    CompletableFuture<byte[]> startGet(final String key, final Executor steps)
    {
        ensureOpen();
        Keys.check(key);
        final ReadOperation read = planRead(key);
        if (read.length() > MAX_ARRAY_BYTES)
        {
            throw new GranaryException(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": a value of " +
                read.length() + " bytes does not fit a byte[]; use getInto with a larger buffer");
        }
        final byte[] value = new byte[(int)read.length()];
        read.target(ByteBuffer.wrap(value));
        return read.run(transfers, selector, clock, steps, this::refreshReplicas).thenApplyAsync(failure ->
        {
            throwIfFailed(failure);
            return value;
        }, steps);
    }

    @Override
    public int getInto(final String key, final ByteBuffer dst)
    {
        final ByteBuffer window = captureDestination(dst);
        return callHere(here -> startGetInto(key, dst, window, here));
    }

    /**
     * Checks a getInto destination and returns a duplicate that keeps its position and limit as they are now.
     *
     * @throws IllegalArgumentException for a read-only buffer.
     */
    static ByteBuffer captureDestination(final ByteBuffer dst)
    {
        Objects.requireNonNull(dst, "dst");
        if (dst.isReadOnly())
        {
            throw new IllegalArgumentException("getInto needs a writable buffer");
        }
        return dst.duplicate();
    }

    /**
     * Like {@link #startGet}, reading into {@code window} (from {@link #captureDestination}); on success the
     * position of {@code dst} is advanced on {@code steps}.
     */
    CompletableFuture<Integer> startGetInto(
        final String key, final ByteBuffer dst, final ByteBuffer window, final Executor steps)
    {
        ensureOpen();
        Keys.check(key);
        final ReadOperation read = planRead(key);
        final int position = window.position();
        if (read.length() > window.remaining())
        {
            throw new GranaryException(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": the value has " +
                read.length() + " bytes, the buffer " + window.remaining() + " remaining");
        }
        final int length = (int)read.length();
        window.limit(position + length);
        read.target(window);
        return read.run(transfers, selector, clock, steps, this::refreshReplicas).thenApplyAsync(failure ->
        {
            throwIfFailed(failure);
            dst.position(position + length);
            return length;
        }, steps);
    }

    @Override
    public List<OpResult<byte[]>> getBatch(final List<String> keys)
    {
        Objects.requireNonNull(keys, "keys");
        return callHere(here -> startGetBatch(keys, here));
    }

    @Override
    public List<OpResult<Integer>> getBatchInto(final List<String> keys, final List<ByteBuffer> dsts)
    {
        final ByteBuffer[] windows = captureDestinations(Objects.requireNonNull(keys, "keys"), dsts);
        return callHere(here -> startGetBatchInto(keys, dsts, windows, here));
    }

    @Override
    public List<OpResult<Integer>> readBatchInto(final List<ReadLease> leases, final List<ByteBuffer> dsts)
    {
        final ProbedLease[] given = ownLeases(leases);
        final List<String> keys = leaseKeys(given);
        final ByteBuffer[] windows = captureDestinations(keys, dsts);
        return callHere(here -> startGetBatchInto(keys, dsts, windows, here, given));
    }

    /**
     * The leases of a {@link #readBatchInto} as this client made them.
     *
     * @throws IllegalArgumentException for a null lease or one from another client.
     */
    ProbedLease[] ownLeases(final List<ReadLease> leases)
    {
        Objects.requireNonNull(leases, "leases");
        final ProbedLease[] own = new ProbedLease[leases.size()];
        for (int i = 0; i < own.length; i++)
        {
            final ReadLease lease = leases.get(i);
            if (!(lease instanceof ProbedLease) || ((ProbedLease)lease).owner != this)
            {
                throw new IllegalArgumentException("readBatchInto leases[" + i + "]: " +
                    (lease == null ? "null" : lease + " was not made by this client's probeBatchForRead"));
            }
            own[i] = (ProbedLease)lease;
        }
        return own;
    }

    /** Leases readBatchInto read with the replica list their probe brought back. */
    long leaseReadsWithList()
    {
        return leaseReadsWithList.sum();
    }

    /** Leases readBatchInto looked up again (run low, or sent without a list). */
    long leaseReadsLookedUp()
    {
        return leaseReadsLookedUp.sum();
    }

    static List<String> leaseKeys(final ProbedLease[] leases)
    {
        final String[] keys = new String[leases.length];
        for (int i = 0; i < keys.length; i++)
        {
            keys[i] = leases[i].key();
        }
        return Arrays.asList(keys);
    }

    /**
     * Checks getBatchInto's buffers and returns a duplicate of each that keeps its position and limit as they are now.
     *
     * @throws IllegalArgumentException when the sizes differ or a buffer is read-only.
     */
    static ByteBuffer[] captureDestinations(final List<String> keys, final List<ByteBuffer> dsts)
    {
        Objects.requireNonNull(dsts, "dsts");
        if (keys.size() != dsts.size())
        {
            throw new IllegalArgumentException(
                "getBatchInto needs one buffer per key: " + keys.size() + " keys, " + dsts.size() + " buffers");
        }
        final ByteBuffer[] windows = new ByteBuffer[dsts.size()];
        for (int i = 0; i < windows.length; i++)
        {
            windows[i] = captureDestination(dsts.get(i));
        }
        return windows;
    }

    /**
     * BatchGetReplicaList on this thread, then the first read of every key, all submitted before any is waited
     * for; a failed read moves to its next replica at once (submitted from {@code steps}), and the results are
     * assembled on {@code steps} when every read is done.
     *
     * @throws GranaryException when the whole request fails before any transfer starts.
     */
    CompletableFuture<List<OpResult<byte[]>>> startGetBatch(final List<String> keys, final Executor steps)
    {
        final byte[][] values = new byte[keys.size()][];
        return startBatchRead("getBatch", keys, null, steps, new BatchTarget<>()
        {
            @Override
            public OpResult<byte[]> aim(final int i, final String key, final ReadOperation read)
            {
                if (read.length() > MAX_ARRAY_BYTES)
                {
                    return OpResult.failed(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": a value of " +
                        read.length() + " bytes does not fit a byte[]");
                }
                values[i] = new byte[(int)read.length()];
                read.target(ByteBuffer.wrap(values[i]));
                return null;
            }

            @Override
            public OpResult<byte[]> succeeded(final int i)
            {
                return OpResult.ok(values[i]);
            }
        });
    }

    /** Like {@link #startGetBatch}, reading value i into {@code windows[i]} and advancing {@code dsts.get(i)}. */
    CompletableFuture<List<OpResult<Integer>>> startGetBatchInto(
        final List<String> keys, final List<ByteBuffer> dsts, final ByteBuffer[] windows, final Executor steps)
    {
        return startGetBatchInto(keys, dsts, windows, steps, null);
    }

    /**
     * {@link #startGetBatchInto(List, List, ByteBuffer[], Executor)} that reads key i with {@code given[i]}'s replica
     * list while that lease is usable ({@code given} null: every key is looked up).
     */
    CompletableFuture<List<OpResult<Integer>>> startGetBatchInto(
        final List<String> keys, final List<ByteBuffer> dsts, final ByteBuffer[] windows, final Executor steps,
        final ProbedLease[] given)
    {
        final int[] positions = new int[keys.size()];
        return startBatchRead(given == null ? "getBatchInto" : "readBatchInto", keys, given, steps, new BatchTarget<>()
        {
            @Override
            public OpResult<Integer> aim(final int i, final String key, final ReadOperation read)
            {
                final ByteBuffer window = windows[i];
                if (read.length() > window.remaining())
                {
                    return OpResult.failed(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": the value has " +
                        read.length() + " bytes, the buffer " + window.remaining() + " remaining");
                }
                positions[i] = window.position();
                window.limit(positions[i] + (int)read.length());
                read.target(window);
                return null;
            }

            @Override
            public OpResult<Integer> succeeded(final int i)
            {
                final int length = windows[i].limit() - positions[i];
                dsts.get(i).position(positions[i] + length);
                return OpResult.ok(length);
            }
        });
    }

    /** Where the values of a batch read land, and what a key's success yields. */
    private interface BatchTarget<T>
    {
        /** Aims the read of key {@code index} at its destination and returns null, or returns why it cannot be read. */
        OpResult<T> aim(int index, String key, ReadOperation read);

        /** The result of key {@code index} once its read succeeded (runs on the step executor). */
        OpResult<T> succeeded(int index);
    }

    /**
     * The reads of a batch: key i with {@code given[i]}'s replica list when that lease is usable (given may be null),
     * every other key with the answer of one BatchGetReplicaList.
     */
    private <T> CompletableFuture<List<OpResult<T>>> startBatchRead(
        final String op, final List<String> keys, final ProbedLease[] given, final Executor steps,
        final BatchTarget<T> targets)
    {
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return CompletableFuture.completedFuture(List.of());
        }
        checkBatchSize(op, n);
        final OpResult<T>[] results = newResults(n);
        final List<Integer> sent = checkKeys(keys, results);
        if (sent.isEmpty())
        {
            return CompletableFuture.completedFuture(Arrays.asList(results));
        }

        final GetReplicaListResponse[] answers = new GetReplicaListResponse[sent.size()];
        final long[] askedAt = new long[sent.size()];
        final List<Integer> ask = new ArrayList<>(given == null ? sent.size() : 0);
        for (int j = 0; j < sent.size(); j++)
        {
            final ProbedLease lease = given == null ? null : given[sent.get(j)];
            if (lease != null && lease.usable())
            {
                answers[j] = lease.replicas;
                askedAt[j] = lease.askedAtNs;
                leaseReadsWithList.increment();
            }
            else
            {
                ask.add(j);
                if (lease != null)
                {
                    leaseReadsLookedUp.increment();
                }
            }
        }
        if (!ask.isEmpty())
        {
            final List<String> askKeys = new ArrayList<>(ask.size());
            for (final int j : ask)
            {
                askKeys.add(keys.get(sent.get(j)));
            }
            final long askedAtNs = clock.nanoTime();
            final BatchGetReplicaListResponse lists = master.batchGetReplicaList(batchLookup(askKeys));
            if (lists.getCode() != OK)
            {
                throw batchRefused(op, ask.size(), "BatchGetReplicaList", lists.getCode());
            }
            if (lists.getResultsCount() != ask.size())
            {
                throw new GranaryException(ErrorCode.INTERNAL_ERROR, "BatchGetReplicaList answered " +
                    lists.getResultsCount() + " results for " + ask.size() + " keys");
            }
            for (int a = 0; a < ask.size(); a++)
            {
                answers[ask.get(a)] = lists.getResults(a);
                askedAt[ask.get(a)] = askedAtNs;
            }
        }

        final List<CompletableFuture<OpFailure>> reads = new ArrayList<>(sent.size());
        final List<Integer> readIndex = new ArrayList<>(sent.size());
        for (int j = 0; j < sent.size(); j++)
        {
            final int i = sent.get(j);
            final String key = keys.get(i);
            final ReadOperation read;
            try
            {
                read = ReadOperation.plan(key, answers[j], askedAt[j], checksums);
            }
            catch (final GranaryException ex)
            {
                results[i] = OpFailure.of(ex).toResult();
                continue;
            }
            final OpResult<T> refused = targets.aim(i, key, read);
            if (refused != null)
            {
                results[i] = refused;
                continue;
            }
            reads.add(read.run(transfers, selector, clock, steps, this::refreshReplicas));
            readIndex.add(i);
        }
        return CompletableFuture.allOf(reads.toArray(new CompletableFuture<?>[0])).thenApplyAsync(ignored ->
        {
            boolean failed = false;
            for (int r = 0; r < reads.size(); r++)
            {
                final OpFailure failure = reads.get(r).join(); // all complete: this does not wait
                final int i = readIndex.get(r);
                results[i] = failure == null ? targets.succeeded(i) : failure.toResult();
                failed |= failure != null;
            }
            if (failed)
            {
                ensureOpen(); // reads cut short by close(): the batch fails as a whole
            }
            return Arrays.asList(results);
        }, steps);
    }

    private ReadOperation planRead(final String key)
    {
        final long askedAtNs = clock.nanoTime();
        final GetReplicaListResponse list = master.getReplicaList(keyRequest(key));
        return ReadOperation.plan(key, list, askedAtNs, checksums);
    }

    /** A read's second replica list, after a node refused its access token (expired, or the master's key changed). */
    private GetReplicaListResponse refreshReplicas(final String key)
    {
        ensureOpen();
        return master.getReplicaList(keyRequest(key));
    }

    private static void throwIfFailed(final OpFailure failure)
    {
        if (failure != null)
        {
            throw failure.toException();
        }
    }

    @Override
    public long size(final String key)
    {
        ensureOpen();
        Keys.check(key);
        final GetReplicaListResponse list = master.getReplicaList(keyRequest(key));
        if (list.getCode() != OK)
        {
            throw ReadOperation.refusal(key, list.getCode());
        }
        return list.getValueLength();
    }

    @Override
    public boolean exists(final String key)
    {
        ensureOpen();
        Keys.check(key);
        final ExistKeyResponse response = master.existKey(keyRequest(key));
        if (response.getCode() == OBJECT_NOT_FOUND)
        {
            return false;
        }
        if (response.getCode() != OK)
        {
            throw refused("exists", key, "ExistKey", response.getCode());
        }
        return response.getExists();
    }

    @Override
    public List<OpResult<Boolean>> existsBatch(final List<String> keys)
    {
        Objects.requireNonNull(keys, "keys");
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return List.of();
        }
        checkBatchSize("existsBatch", n);
        final OpResult<Boolean>[] results = newResults(n);
        final List<Integer> sent = checkKeys(keys, results);
        if (sent.isEmpty())
        {
            return Arrays.asList(results);
        }
        final BatchExistKeyResponse response = master.batchExistKey(tenant, select(keys, sent));
        if (response.getCode() != OK)
        {
            throw batchRefused("existsBatch", sent.size(), "BatchExistKey", response.getCode());
        }
        checkAnswerShape("BatchExistKey", sent.size(), response.getExistsCount(), response.getCodesCount());
        for (int j = 0; j < sent.size(); j++)
        {
            final int code = response.getCodesCount() == 0 ? OK : response.getCodes(j);
            results[sent.get(j)] = membership("exists", keys.get(sent.get(j)), response.getExists(j), code);
        }
        return Arrays.asList(results);
    }

    @Override
    public List<OpResult<Boolean>> probeBatch(final List<String> keys, final LeasePolicy policy)
    {
        Objects.requireNonNull(keys, "keys");
        Objects.requireNonNull(policy, "policy");
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return List.of();
        }
        checkProbeKeys("probeBatch", keys);
        final BatchProbeKeyResponse response =
            master.batchProbeKey(tenant, ProtoMapping.toProto(policy.mode()), policy.candidateSize(), keys);
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "probeBatch of " + n + " keys with " +
                policy + ": master answered " + ProtoMapping.describeCode(response.getCode()));
        }
        checkAnswerShape("BatchProbeKey", n, response.getMaskCount(), response.getCodesCount());
        final List<OpResult<Boolean>> results = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            final int code = response.getCodesCount() == 0 ? OK : response.getCodes(i);
            results.add(membership("probe", keys.get(i), response.getMask(i), code));
        }
        return results;
    }

    @Override
    public List<OpResult<ReadLease>> probeBatchForRead(
        final List<String> keys, final LeasePolicy policy, final int from, final int count)
    {
        Objects.requireNonNull(keys, "keys");
        checkReadSelection(Objects.requireNonNull(policy, "policy"), from, count);
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return List.of();
        }
        checkProbeKeys("probeBatchForRead", keys);
        final long askedAtNs = clock.nanoTime();
        final BatchProbeKeyResponse response = master.batchProbeKey(
            tenant, ProtoMapping.toProto(policy.mode()), policy.candidateSize(), keys, true, from, count);
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "probeBatchForRead of " + n +
                " keys with " + policy + ": master answered " + ProtoMapping.describeCode(response.getCode()));
        }
        checkAnswerShape("BatchProbeKey", n, response.getMaskCount(), response.getCodesCount());
        // A master that predates with_replicas answers none: its selected keys are then looked up when read.
        final boolean lists = response.getReplicasCount() == n;
        if (!lists && response.getReplicasCount() != 0)
        {
            throw new GranaryException(ErrorCode.INTERNAL_ERROR, "BatchProbeKey answered " +
                response.getReplicasCount() + " replica lists for " + n + " keys");
        }
        final List<OpResult<ReadLease>> results = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            final int code = response.getCodesCount() == 0 ? OK : response.getCodes(i);
            final OpResult<Boolean> member = membership("probe", keys.get(i), response.getMask(i), code);
            if (!member.ok())
            {
                results.add(OpResult.failed(member.error(), member.message()));
            }
            else if (!member.value())
            {
                results.add(OpResult.ok(null));
            }
            else
            {
                results.add(OpResult.ok(new ProbedLease(this, clock, keys.get(i),
                    lists ? response.getReplicas(i) : null, askedAtNs)));
            }
        }
        return results;
    }

    /**
     * probeBatchForRead's policy and member range.
     *
     * @throws IllegalArgumentException for a policy that leases nothing or a range not within the candidate.
     */
    static void checkReadSelection(final LeasePolicy policy, final int from, final int count)
    {
        if (policy.mode() == LeasePolicy.Mode.NONE)
        {
            throw new IllegalArgumentException("probeBatchForRead needs a policy that leases, not " + policy);
        }
        if (from < 0 || count < 1 || (long)from + count > policy.candidateSize())
        {
            throw new IllegalArgumentException("probeBatchForRead members [" + from + ", " + ((long)from + count) +
                ") are not within a candidate of " + policy.candidateSize() + " keys");
        }
    }

    /** Keys are positional in a probe: one malformed key fails the whole probe. */
    private static void checkProbeKeys(final String op, final List<String> keys)
    {
        checkBatchSize(op, keys.size());
        for (int i = 0; i < keys.size(); i++)
        {
            final OpFailure problem = Keys.problem(keys.get(i));
            if (problem != null)
            {
                // Candidates are positional: dropping one key would shift every candidate after it.
                throw new GranaryException(ErrorCode.INVALID_KEY, op + " keys[" + i + "]: " + problem.message());
            }
        }
    }

    /** Immutable, so shared by every existence answer. */
    private static final OpResult<Boolean> TRUE = OpResult.ok(Boolean.TRUE);
    private static final OpResult<Boolean> FALSE = OpResult.ok(Boolean.FALSE);

    /** A per-key existence answer: a miss is a plain false, any other code a failure. */
    private static OpResult<Boolean> membership(final String op, final String key, final boolean value, final int code)
    {
        if (code == OK)
        {
            return value ? TRUE : FALSE;
        }
        if (code == OBJECT_NOT_FOUND)
        {
            return FALSE;
        }
        return OpResult.failed(ProtoMapping.code(code), op + " " + Keys.quote(key) + ": master answered " +
            ProtoMapping.describeCode(code));
    }

    private static void checkAnswerShape(final String rpc, final int keys, final int values, final int codes)
    {
        if (values != keys || (codes != 0 && codes != keys))
        {
            throw new GranaryException(ErrorCode.INTERNAL_ERROR, rpc + " answered " + values + " values and " + codes +
                " codes for " + keys + " keys");
        }
    }

    // ------------------------------------------------------------------------------------------- removal

    @Override
    public void remove(final String key)
    {
        remove(key, false);
    }

    @Override
    public void remove(final String key, final boolean force)
    {
        ensureOpen();
        Keys.check(key);
        final CodeResponse response = master.remove(RemoveRequest.newBuilder()
            .setTenant(tenant)
            .setKey(key)
            .setForce(force)
            .build());
        if (response.getCode() != OK)
        {
            throw refused("remove", key, "Remove", response.getCode());
        }
    }

    @Override
    public long removeByRegex(final String regex)
    {
        ensureOpen();
        if (regex == null || regex.isEmpty())
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, "removeByRegex needs a regex; use removeAll() to " +
                "remove everything");
        }
        checkRegex("removeByRegex", regex);
        final CountResponse response = master.removeByRegex(RemoveByRegexRequest.newBuilder()
            .setTenant(tenant)
            .setRegex(regex)
            .build());
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "removeByRegex '" + regex +
                "': master answered " + ProtoMapping.describeCode(response.getCode()));
        }
        return response.getCount();
    }

    @Override
    public long removeAll()
    {
        ensureOpen();
        final CountResponse response = master.removeAll(RemoveAllRequest.newBuilder().setTenant(tenant).build());
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "removeAll of tenant " + tenant +
                ": master answered " + ProtoMapping.describeCode(response.getCode()));
        }
        return response.getCount();
    }

    // ------------------------------------------------------------------------------------------- inspection

    @Override
    public List<KeyInfo> listKeys(final String regexOrNull, final int limit)
    {
        ensureOpen();
        if (limit < 0)
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, "listKeys limit must not be negative, was " + limit);
        }
        final String regex = regexOrNull == null ? "" : regexOrNull;
        if (!regex.isEmpty())
        {
            checkRegex("listKeys", regex);
        }
        final ListKeysResponse response = master.listKeys(ListKeysRequest.newBuilder()
            .setTenant(tenant)
            .setRegex(regex)
            .setLimit(limit)
            .build());
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "listKeys: master answered " +
                ProtoMapping.describeCode(response.getCode()));
        }
        final List<KeyInfo> keys = new ArrayList<>(response.getKeysCount());
        for (final io.granary.proto.KeyInfo info : response.getKeysList())
        {
            keys.add(ProtoMapping.toKeyInfo(info));
        }
        return Collections.unmodifiableList(keys);
    }

    @Override
    public ClusterStatus clusterStatus()
    {
        ensureOpen();
        final ClusterStatusResponse response = master.clusterStatus();
        if (response.getCode() != OK)
        {
            throw new GranaryException(ProtoMapping.code(response.getCode()), "clusterStatus: master answered " +
                ProtoMapping.describeCode(response.getCode()));
        }
        return ProtoMapping.toClusterStatus(response);
    }

    // ------------------------------------------------------------------------------------------- lifecycle

    @Override
    public boolean registerBuffer(final ByteBuffer buffer)
    {
        return transfers.registerMemory(buffer);
    }

    @Override
    public boolean unregisterBuffer(final ByteBuffer buffer)
    {
        return transfers.unregisterMemory(buffer);
    }

    @Override
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        try
        {
            transfers.close(); // fails the transfers in flight, so their calls finish now
        }
        finally
        {
            try
            {
                master.close();
            }
            finally
            {
                clientThreads.shutdown(CLOSE_WAIT_MS);
            }
        }
    }

    private void ensureOpen()
    {
        if (closed.get())
        {
            throw closedException();
        }
    }

    private static GranaryException closedException()
    {
        return new GranaryException(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, "the client is closed");
    }

    // ------------------------------------------------------------------------------------------- helpers

    private KeyRequest keyRequest(final String key)
    {
        return KeyRequest.newBuilder().setTenant(tenant).setKey(key).build();
    }

    /** A BatchGetReplicaList request: extents that lie end to end may share one READ token ("Shared grants"). */
    private BatchKeysRequest batchLookup(final List<String> keys)
    {
        return BatchKeysRequest.newBuilder().setTenant(tenant).setClientId(clientId).addAllKeys(keys)
            .setSharedGrants(true).build();
    }

    /** Fills INVALID_KEY results and returns the indexes of the keys worth sending. */
    private static <T> List<Integer> checkKeys(final List<String> keys, final OpResult<T>[] results)
    {
        final List<Integer> sent = new ArrayList<>(keys.size());
        for (int i = 0; i < keys.size(); i++)
        {
            final OpFailure problem = Keys.problem(keys.get(i));
            if (problem != null)
            {
                results[i] = problem.toResult();
            }
            else
            {
                sent.add(i);
            }
        }
        return sent;
    }

    private static List<String> select(final List<String> keys, final List<Integer> indexes)
    {
        if (indexes.size() == keys.size())
        {
            return keys;
        }
        final List<String> selected = new ArrayList<>(indexes.size());
        for (final int i : indexes)
        {
            selected.add(keys.get(i));
        }
        return selected;
    }

    private static void checkBatchSize(final String op, final int n)
    {
        if (n > Limits.MAX_BATCH_KEYS)
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, op + " of " + n + " keys exceeds the limit of " +
                Limits.MAX_BATCH_KEYS + "; split the batch");
        }
    }

    private static void checkRegex(final String op, final String regex)
    {
        if (regex.length() > Limits.MAX_REGEX_LENGTH)
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, op + ": regex longer than " +
                Limits.MAX_REGEX_LENGTH + " characters");
        }
        try
        {
            Pattern.compile(regex);
        }
        catch (final PatternSyntaxException ex)
        {
            throw new GranaryException(ErrorCode.INVALID_PARAMS, op + ": bad regex: " + ex.getDescription(), ex);
        }
    }

    private static GranaryException refused(final String op, final String key, final String rpc, final int code)
    {
        final ErrorCode errorCode = ProtoMapping.code(code);
        final String what = errorCode == ErrorCode.OBJECT_NOT_FOUND ? "not found" :
            rpc + " answered " + ProtoMapping.describeCode(code);
        return new GranaryException(errorCode, op + " " + Keys.quote(key) + ": " + what);
    }

    private static GranaryException batchRefused(final String op, final int keys, final String rpc, final int code)
    {
        return new GranaryException(ProtoMapping.code(code), op + " of " + keys + " keys: " + rpc + " answered " +
            ProtoMapping.describeCode(code));
    }

    @SuppressWarnings("unchecked")
    private static <T> OpResult<T>[] newResults(final int n)
    {
        return (OpResult<T>[])new OpResult<?>[n];
    }
}
