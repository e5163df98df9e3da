package io.granary.client.internal;

import io.granary.client.ClientConfig;
import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.Clock;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
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
import io.granary.protocol.Limits;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferEngines;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * The {@link GranaryClient}: control-plane calls through {@link MasterClient}, bytes through a
 * {@link TransferDispatcher}, following DESIGN "Data flow" (PutStart, parallel replica writes,
 * PutEnd/PutRevoke; GetReplicaList, read with failover; one master round trip per phase of a batch).
 * Thread safe: it holds no per-call state; every call runs on its caller's thread.
 */
public final class GranaryClientImpl implements GranaryClient
{
    private static final Logger LOG = LoggerFactory.getLogger(GranaryClientImpl.class);

    /** Largest value a byte[] can hold on common JVMs. */
    static final int MAX_ARRAY_BYTES = Integer.MAX_VALUE - 8;

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
    private final AtomicBoolean closed = new AtomicBoolean();

    private GranaryClientImpl(
        final ClientConfig config, final MasterClient master, final TransferEngine engine, final Clock clock)
    {
        this.config = config;
        this.tenant = config.tenant();
        this.clientId = config.clientId();
        this.master = master;
        this.transfers = new TransferDispatcher(engine);
        this.clock = clock;
        final LocalHosts localHosts =
            config.localHost() == null ? LocalHosts.ofThisMachine() : LocalHosts.of(config.localHost());
        this.selector = new ReplicaSelector(localHosts::isLocal, transfers::inFlight);
    }

    /** The production client: the engine from {@link TransferEngines#create}, the system clock. */
    public static GranaryClient connect(final ClientConfig config)
    {
        return connect(config, TransferEngines::create, Clock.SYSTEM);
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
            return new GranaryClientImpl(config, new MasterClient(config.masterAddress(), config.rpcTimeout(), config.fastLookups()), engine,
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
        ensureOpen();
        Keys.check(key);
        final ByteBuffer data = value.duplicate();
        final PutStartResponse started = master.putStart(PutStartRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setKey(key)
            .setValueLength(data.remaining())
            .setOptions(ProtoMapping.toProto(options))
            .build());
        if (started.getCode() == OBJECT_ALREADY_EXISTS)
        {
            return; // objects are immutable: the stored value stands
        }
        if (started.getCode() != OK)
        {
            throw refused("put", key, "PutStart", started.getCode());
        }
        final WriteOperation write;
        try
        {
            write = WriteOperation.plan(key, data, started.getReplicasList());
        }
        catch (final GranaryException ex)
        {
            revokeQuietly(key, ex);
            throw ex;
        }
        write.start(transfers);
        final OpFailure failure = write.await();
        if (failure != null)
        {
            final GranaryException ex = failure.toException();
            revokeQuietly(key, ex);
            throw ex;
        }
        final CodeResponse ended = master.putEnd(PutEndRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setKey(key)
            .build());
        if (ended.getCode() != OK)
        {
            throw refused("put", key, "PutEnd", ended.getCode());
        }
    }

    @Override
    public List<OpResult<Void>> putBatch(
        final List<String> keys, final List<ByteBuffer> values, final PutOptions options)
    {
        Objects.requireNonNull(keys, "keys");
        Objects.requireNonNull(values, "values");
        Objects.requireNonNull(options, "options");
        if (keys.size() != values.size())
        {
            throw new IllegalArgumentException(
                "putBatch needs one value per key: " + keys.size() + " keys, " + values.size() + " values");
        }
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return List.of();
        }
        checkBatchSize("putBatch", n);

        final OpResult<Void>[] results = newResults(n);
        final ByteBuffer[] data = new ByteBuffer[n];
        final List<Integer> sent = new ArrayList<>(n);
        final BatchPutStartRequest.Builder request = BatchPutStartRequest.newBuilder()
            .setTenant(tenant)
            .setClientId(clientId)
            .setOptions(ProtoMapping.toProto(options));
        for (int i = 0; i < n; i++)
        {
            data[i] = Objects.requireNonNull(values.get(i), "values[" + i + "]").duplicate();
            final OpFailure problem = Keys.problem(keys.get(i));
            if (problem != null)
            {
                results[i] = problem.toResult();
                continue;
            }
            sent.add(i);
            request.addKeys(keys.get(i)).addValueLengths(data[i].remaining());
        }
        if (sent.isEmpty())
        {
            return Arrays.asList(results);
        }

        final BatchPutStartResponse started = master.batchPutStart(request.build());
        if (started.getCode() != OK)
        {
            throw batchRefused("putBatch", sent.size(), "BatchPutStart", started.getCode());
        }
        if (started.getResultsCount() != sent.size())
        {
            final GranaryException ex = new GranaryException(ErrorCode.INTERNAL_ERROR, "BatchPutStart answered " +
                started.getResultsCount() + " results for " + sent.size() + " keys");
            batchRevokeQuietly(request.getKeysList(), ex);
            throw ex;
        }

        // Phase 2: every replica write of every key, all in flight together.
        final List<WriteOperation> writes = new ArrayList<>(sent.size());
        final List<Integer> writeIndex = new ArrayList<>(sent.size());
        final List<String> toRevoke = new ArrayList<>();
        for (int j = 0; j < sent.size(); j++)
        {
            final int i = sent.get(j);
            final String key = keys.get(i);
            final PutStartResponse result = started.getResults(j);
            if (result.getCode() == OBJECT_ALREADY_EXISTS)
            {
                results[i] = OpResult.ok(null);
                continue;
            }
            if (result.getCode() != OK)
            {
                results[i] = OpFailure.of(refused("put", key, "BatchPutStart", result.getCode())).toResult();
                continue;
            }
            try
            {
                final WriteOperation write = WriteOperation.plan(key, data[i], result.getReplicasList());
                write.start(transfers);
                writes.add(write);
                writeIndex.add(i);
            }
            catch (final GranaryException ex)
            {
                results[i] = OpFailure.of(ex).toResult();
                toRevoke.add(key);
            }
        }
        final List<String> toEnd = new ArrayList<>(writes.size());
        final List<Integer> endIndex = new ArrayList<>(writes.size());
        for (int w = 0; w < writes.size(); w++)
        {
            final OpFailure failure = writes.get(w).await();
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
            }
        }

        // Phase 3: one PutEnd for the written keys, one PutRevoke for the rest.
        if (!toEnd.isEmpty())
        {
            endBatch(keys, toEnd, endIndex, results);
        }
        if (!toRevoke.isEmpty())
        {
            batchRevokeQuietly(toRevoke, null);
        }
        return Arrays.asList(results);
    }

    private void endBatch(
        final List<String> keys, final List<String> toEnd, final List<Integer> endIndex, final OpResult<Void>[] results)
    {
        final BatchCodeResponse ended;
        try
        {
            ended = master.batchPutEnd(batchKeys(toEnd));
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

    private void revokeQuietly(final String key, final GranaryException cause)
    {
        try
        {
            final CodeResponse revoked = master.putRevoke(PutRevokeRequest.newBuilder()
                .setTenant(tenant)
                .setClientId(clientId)
                .setKey(key)
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

    private void batchRevokeQuietly(final List<String> keys, final GranaryException cause)
    {
        try
        {
            final BatchCodeResponse revoked = master.batchPutRevoke(batchKeys(keys));
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
        runReads(List.of(read));
        throwIfFailed(read);
        return value;
    }

    @Override
    public int getInto(final String key, final ByteBuffer dst)
    {
        Objects.requireNonNull(dst, "dst");
        if (dst.isReadOnly())
        {
            throw new IllegalArgumentException("getInto needs a writable buffer");
        }
        ensureOpen();
        Keys.check(key);
        final ReadOperation read = planRead(key);
        final int position = dst.position();
        if (read.length() > dst.remaining())
        {
            throw new GranaryException(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": the value has " +
                read.length() + " bytes, the buffer " + dst.remaining() + " remaining");
        }
        final int length = (int)read.length();
        final ByteBuffer target = dst.duplicate();
        target.limit(position + length);
        read.target(target);
        runReads(List.of(read));
        throwIfFailed(read);
        dst.position(position + length);
        return length;
    }

    @Override
    public List<OpResult<byte[]>> getBatch(final List<String> keys)
    {
        Objects.requireNonNull(keys, "keys");
        ensureOpen();
        final int n = keys.size();
        if (n == 0)
        {
            return List.of();
        }
        checkBatchSize("getBatch", n);
        final OpResult<byte[]>[] results = newResults(n);
        final List<Integer> sent = checkKeys(keys, results);
        if (sent.isEmpty())
        {
            return Arrays.asList(results);
        }

        final long askedAtNs = clock.nanoTime();
        final BatchGetReplicaListResponse lists = master.batchGetReplicaList(batchKeys(select(keys, sent)));
        if (lists.getCode() != OK)
        {
            throw batchRefused("getBatch", sent.size(), "BatchGetReplicaList", lists.getCode());
        }
        if (lists.getResultsCount() != sent.size())
        {
            throw new GranaryException(ErrorCode.INTERNAL_ERROR, "BatchGetReplicaList answered " +
                lists.getResultsCount() + " results for " + sent.size() + " keys");
        }

        final List<ReadOperation> reads = new ArrayList<>(sent.size());
        final List<byte[]> values = new ArrayList<>(sent.size());
        final List<Integer> readIndex = new ArrayList<>(sent.size());
        for (int j = 0; j < sent.size(); j++)
        {
            final int i = sent.get(j);
            final String key = keys.get(i);
            final ReadOperation read;
            try
            {
                read = ReadOperation.plan(key, lists.getResults(j), askedAtNs);
            }
            catch (final GranaryException ex)
            {
                results[i] = OpFailure.of(ex).toResult();
                continue;
            }
            if (read.length() > MAX_ARRAY_BYTES)
            {
                results[i] = OpResult.failed(ErrorCode.BUFFER_OVERFLOW, "get " + Keys.quote(key) + ": a value of " +
                    read.length() + " bytes does not fit a byte[]");
                continue;
            }
            final byte[] value = new byte[(int)read.length()];
            read.target(ByteBuffer.wrap(value));
            reads.add(read);
            values.add(value);
            readIndex.add(i);
        }
        runReads(reads);
        for (int r = 0; r < reads.size(); r++)
        {
            final OpFailure failure = reads.get(r).failure();
            results[readIndex.get(r)] = failure == null ? OpResult.ok(values.get(r)) : failure.toResult();
        }
        return Arrays.asList(results);
    }

    private ReadOperation planRead(final String key)
    {
        final long askedAtNs = clock.nanoTime();
        final GetReplicaListResponse list = master.getReplicaList(keyRequest(key));
        return ReadOperation.plan(key, list, askedAtNs);
    }

    /**
     * Runs reads to completion in rounds: every unfinished read submits its next attempt, then the round
     * is awaited; failed reads move to their next replica in the next round. Waits on the calling thread
     * so that no failover is ever submitted from an engine I/O thread.
     */
    private void runReads(final List<ReadOperation> reads)
    {
        List<ReadOperation> pending = new ArrayList<>(reads.size());
        for (final ReadOperation read : reads)
        {
            if (!read.isDone())
            {
                pending.add(read);
            }
        }
        while (!pending.isEmpty())
        {
            final List<CompletableFuture<Integer>> attempts = new ArrayList<>(pending.size());
            for (final ReadOperation read : pending)
            {
                attempts.add(read.startNextAttempt(transfers, selector));
            }
            final List<ReadOperation> next = new ArrayList<>();
            for (int r = 0; r < pending.size(); r++)
            {
                final int code = attempts.get(r).join();
                final ReadOperation read = pending.get(r);
                read.onAttemptDone(code, clock.nanoTime());
                if (!read.isDone())
                {
                    next.add(read);
                }
            }
            pending = next;
        }
    }

    private static void throwIfFailed(final ReadOperation read)
    {
        if (read.failure() != null)
        {
            throw read.failure().toException();
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
        checkBatchSize("probeBatch", n);
        for (int i = 0; i < n; i++)
        {
            final OpFailure problem = Keys.problem(keys.get(i));
            if (problem != null)
            {
                // Candidates are positional: dropping one key would shift every candidate after it.
                throw new GranaryException(ErrorCode.INVALID_KEY, "probeBatch keys[" + i + "]: " + problem.message());
            }
        }
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
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        try
        {
            master.close();
        }
        finally
        {
            transfers.close();
        }
    }

    private void ensureOpen()
    {
        if (closed.get())
        {
            throw new GranaryException(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, "the client is closed");
        }
    }

    // ------------------------------------------------------------------------------------------- helpers

    private KeyRequest keyRequest(final String key)
    {
        return KeyRequest.newBuilder().setTenant(tenant).setKey(key).build();
    }

    private BatchKeysRequest batchKeys(final List<String> keys)
    {
        return BatchKeysRequest.newBuilder().setTenant(tenant).setClientId(clientId).addAllKeys(keys).build();
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
