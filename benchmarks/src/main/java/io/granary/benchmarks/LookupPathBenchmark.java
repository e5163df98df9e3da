package io.granary.benchmarks;

import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.MetadataStore;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.PutOptions;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Where the time of a 640-key BatchExistKey goes, stage by stage, without a network: the client
 * encoding the request, the master decoding it, looking the keys up, encoding the reply, and the
 * client decoding it. The sum plus one loopback round trip is the end-to-end figure
 * {@link LookupLatency} measures.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx2g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class LookupPathBenchmark
{
    /** Other objects in the store, so shard maps are not trivially small. */
    @org.openjdk.jmh.annotations.Param({"100000"})
    public int backgroundObjects;

    private List<String> keys;
    private byte[] requestBytes;
    private BatchKeysRequest request;
    private BatchExistKeyResponse response;
    private byte[] responseBytes;
    private MasterRequestHandler handler;

    @Setup
    public void setUp()
    {
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        registry.mount("node", "node", "127.0.0.1:7000", 1, "node/seg0", 64L << 30);
        final MetadataStore store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        handler = new MasterRequestHandler(null, store, new BatchProbe(store), registry);
        for (int i = 0; i < backgroundObjects; i++)
        {
            put(store, "background/" + i);
        }
        keys = new ArrayList<>();
        for (int c = 0; c < 128; c++)
        {
            for (int r = 0; r < 5; r++)
            {
                final String key = "model/w5/kda" + (c * 128) + "/r" + r;
                keys.add(key);
                put(store, key);
            }
        }
        request = BatchKeysRequest.newBuilder().addAllKeys(keys).build();
        requestBytes = request.toByteArray();
        response = handler.batchExistKey(request);
        responseBytes = response.toByteArray();
    }

    private static void put(final MetadataStore store, final String key)
    {
        store.putStart("default", "bench", key, 4096, PutOptions.getDefaultInstance(), new ArrayList<>());
        store.putEnd("default", "bench", key);
    }

    @Benchmark
    public byte[] clientEncode()
    {
        return BatchKeysRequest.newBuilder().addAllKeys(keys).build().toByteArray();
    }

    @Benchmark
    public BatchKeysRequest masterDecode() throws InvalidProtocolBufferException
    {
        return BatchKeysRequest.parseFrom(requestBytes);
    }

    @Benchmark
    public BatchExistKeyResponse masterLookup()
    {
        return handler.batchExistKey(request);
    }

    @Benchmark
    public byte[] masterEncode()
    {
        return response.toByteArray();
    }

    @Benchmark
    public BatchExistKeyResponse clientDecode() throws InvalidProtocolBufferException
    {
        return BatchExistKeyResponse.parseFrom(responseBytes);
    }
}
