package io.granary.benchmarks;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.MessageLite;
import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.KeyBatch;
import io.granary.master.meta.MetadataStore;
import io.granary.master.rpc.BatchReplicaAnswer;
import io.granary.master.rpc.LookupServer;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.master.segment.SegmentRegistry;
import io.granary.master.token.TokenIssuer;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.PutOptions;
import io.granary.protocol.AccessTokenCodec;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The master's share of one 4 KiB x 128 put batch, without a network and on one thread: decoding the
 * BatchPutStart request, handling it (placement, index insert, version, WRITE tokens), encoding the answer, then
 * the same for BatchPutEnd, then removing the 128 objects again so that every round puts new keys into a store of
 * {@code backgroundObjects} others. What {@code granary bench --op put} costs the master per batch, minus the socket
 * work and the event loop; the figure divided by 128 is the master's CPU per put that a change to this path moves.
 * {@code getBatch} is the same for one BatchGetReplicaList of 128 of the background objects.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xms2g", "-Xmx2g", "-XX:MaxTenuringThreshold=0"})
@Warmup(iterations = 4, time = 2)
@Measurement(iterations = 6, time = 2)
public class PutPathBenchmark
{
    private static final String TENANT = "default";
    private static final String CLIENT = "bench-client";
    private static final int BATCH = 128;
    private static final int ROUNDS = 64;

    /** Other objects in the store, so shard indexes are not trivially small. */
    @Param({"1000000"})
    public int backgroundObjects;

    /** Whether the master signs WRITE tokens (the default for a master with data tokens on). */
    @Param({"true"})
    public boolean tokens;

    /** Whether the request accepts shared WRITE grants (as the Java client's batch puts do). */
    @Param({"true", "false"})
    public boolean sharedGrants;

    /**
     * Whether answers with shared grants are written straight to the wire ({@link BatchReplicaAnswer}, as the lookup
     * port does since 2026-12-07) rather than built as messages and serialized (as gRPC does).
     */
    @Param({"true", "false"})
    public boolean wireAnswer;

    /**
     * Whether the tenant has a byte quota (large enough never to evict: what the charge and refund cost a put, see
     * docs/architecture.md "Tenant quotas").
     */
    @Param({"false"})
    public boolean tenantQuota;

    /**
     * Objects rebuilt from a ledger that wait for a parent the store never gets (as after a master restart that lost
     * a node): while any waits, every new object asks whether it is awaited (docs/architecture.md, "Prefix-aware
     * eviction").
     */
    @Param({"0"})
    public int awaitingChildren;

    private final BatchReplicaAnswer answer = new BatchReplicaAnswer();
    private byte[] out = new byte[1 << 16];
    private KeyBatch[] lookupKeys;
    private MetadataStore store;
    private MasterRequestHandler handler;
    private byte[][] startRequests;
    private byte[][] endRequests;
    private List<List<String>> roundKeys;
    private int round;

    @Setup
    public void setUp()
    {
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        registry.mount("node", "node", "127.0.0.1:7000", 1, "node/seg0", 64L << 30);
        final MetadataStore.Settings settings = new MetadataStore.Settings();
        if (tenantQuota)
        {
            settings.tenantQuotaBytes = java.util.Map.of(TENANT, 1L << 50);
        }
        store = new MetadataStore(settings, Clock.SYSTEM, registry);
        if (tokens)
        {
            store.replicaTokens(new TokenIssuer(AccessTokenCodec.newRandomKey()));
        }
        handler = new MasterRequestHandler(null, store, new BatchProbe(store), registry);
        if (awaitingChildren > 0)
        {
            registry.mount("ledger-node", "ledger-node", "127.0.0.1:7001", 2, "ledger-node/seg0", 1L << 30, true);
            final io.granary.master.segment.MountedSegment reported = registry.segment("ledger-node", 2);
            for (int i = 0; i < awaitingChildren; i++)
            {
                store.adopt(reported, io.granary.proto.LedgerEntry.newBuilder().setTenant(TENANT)
                    .setKey("orphan/" + i).setParentKey("lost/" + i).setOffset(i * 4096L).setValueLength(4096)
                    .setVersion(i + 1L).build());
            }
            if (store.rebuiltAwaitingParents() != awaitingChildren)
            {
                throw new IllegalStateException(store.rebuiltAwaitingParents() + " objects wait for their parent");
            }
        }
        for (int i = 0; i < backgroundObjects; i++)
        {
            final String key = "background/" + i;
            store.putStart(TENANT, CLIENT, key, 4096, PutOptions.getDefaultInstance(), new ArrayList<>());
            store.putEnd(TENANT, CLIENT, key);
        }
        startRequests = new byte[ROUNDS][];
        endRequests = new byte[ROUNDS][];
        roundKeys = new ArrayList<>();
        for (int r = 0; r < ROUNDS; r++)
        {
            final List<String> keys = new ArrayList<>();
            final BatchPutStartRequest.Builder start = BatchPutStartRequest.newBuilder()
                .setTenant(TENANT).setClientId(CLIENT).setOptions(PutOptions.newBuilder().setReplicas(1))
                .setSharedGrants(sharedGrants);
            final BatchKeysRequest.Builder end = BatchKeysRequest.newBuilder().setTenant(TENANT).setClientId(CLIENT);
            for (int i = 0; i < BATCH; i++)
            {
                final String key = "bench/run/4k/" + (r * BATCH + i);
                keys.add(key);
                start.addKeys(key).addValueLengths(4096);
                end.addKeys(key).addCrc32C(i);
            }
            roundKeys.add(keys);
            startRequests[r] = start.build().toByteArray();
            endRequests[r] = end.build().toByteArray();
        }
        lookupKeys = new KeyBatch[ROUNDS];
        final java.util.Random random = new java.util.Random(1);
        for (int r = 0; r < ROUNDS; r++)
        {
            final List<String> keys = new ArrayList<>();
            for (int i = 0; i < BATCH; i++)
            {
                keys.add("background/" + random.nextInt(Math.max(1, backgroundObjects)));
            }
            lookupKeys[r] = KeyBatch.of(keys);
        }
    }

    /** The answer's bytes as the lookup port writes them (into a reused array here, a pooled buffer there). */
    private int encode(final Object response) throws IOException
    {
        final int size;
        final CodedOutputStream cos;
        if (response instanceof LookupServer.WireAnswer)
        {
            final LookupServer.WireAnswer wire = (LookupServer.WireAnswer)response;
            size = wire.serializedSize();
            cos = CodedOutputStream.newInstance(buffer(size), 0, size);
            wire.writeTo(cos);
        }
        else
        {
            final MessageLite message = (MessageLite)response;
            size = message.getSerializedSize();
            cos = CodedOutputStream.newInstance(buffer(size), 0, size);
            message.writeTo(cos);
        }
        cos.checkNoSpaceLeft();
        return size;
    }

    private byte[] buffer(final int size)
    {
        if (out.length < size)
        {
            out = new byte[size * 2];
        }
        return out;
    }

    /**
     * One BatchGetReplicaList of 128 complete objects with shared READ grants (as the Java client's getBatch asks),
     * answered as the lookup port answers it.
     */
    @Benchmark
    public int getBatch() throws IOException
    {
        final int r = round++ & (ROUNDS - 1);
        return encode(handler.batchGetReplicaList(TENANT, lookupKeys[r], true, wireAnswer ? answer : null));
    }

    /** One batch's BatchPutStart and BatchPutEnd as the master's lookup port handles them, then the removal. */
    @Benchmark
    public int putBatch() throws IOException
    {
        final int r = round++ & (ROUNDS - 1);
        final Object started =
            handler.batchPutStart(BatchPutStartRequest.parseFrom(startRequests[r]), wireAnswer ? answer : null);
        final int startAnswer = encode(started);
        final BatchCodeResponse ended = handler.batchPutEnd(BatchKeysRequest.parseFrom(endRequests[r]));
        final int endAnswer = encode(ended);
        if (ended.getCodes(BATCH - 1) != 0 ||
            started instanceof BatchPutStartResponse && ((BatchPutStartResponse)started).getResults(BATCH - 1).getCode() != 0)
        {
            throw new IllegalStateException("the batch was refused: " + started + " / " + ended.getCodes(BATCH - 1));
        }
        for (final String key : roundKeys.get(r))
        {
            store.remove(TENANT, key, true);
        }
        return startAnswer + endAnswer;
    }
}
