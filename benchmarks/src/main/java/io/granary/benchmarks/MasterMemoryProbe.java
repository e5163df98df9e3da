package io.granary.benchmarks;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;
import io.granary.protocol.AccessTokenCodec;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.UUID;

/**
 * Heap the master's metadata needs per object: a metadata store (the master's own, no RPC in front) with data tokens
 * on and {@code replicas} mounted segments takes {@code objects} complete 4 KiB objects of {@code replicas} replicas
 * each (1 by default), with keys shaped like
 * the prefix helper's (44 bytes), one put per call as a client's single puts arrive: every call brings its own
 * tenant and client id Strings (as decoding a request makes them), the tenant {@code tenant} ("default" by default)
 * and a client id shaped like a client's own (a random UUID). The used heap after full GCs is measured before and
 * after, and again after one read of every object (a read caches the bytes of each replica's READ token).
 *
 * <pre>
 * java -Xmx4g -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.MasterMemoryProbe [objects] [replicas] [tenant]
 * </pre>
 * The figure is for sizing a master's heap (docs/operations.md); keys of other lengths add or remove their bytes.
 */
public final class MasterMemoryProbe
{
    private MasterMemoryProbe()
    {
    }

    public static void main(final String[] args)
    {
        final int objects = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        final int replicaCount = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        final String tenant = args.length > 2 ? args[2] : "default";
        final String clientId = UUID.randomUUID().toString();
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        final MetadataStore store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        final AccessTokenCodec codec = new AccessTokenCodec(AccessTokenCodec.newRandomKey());
        store.replicaTokens((segment, grantOffset, grantLength, opcode, expirySec) ->
            codec.sign(opcode, segment.segmentId(), grantOffset, grantLength, expirySec));
        for (int n = 1; n <= replicaCount; n++)
        {
            registry.mount("node-" + n, "node-" + n, "10.0.0." + n + ":7001", n, "node-" + n + "/seg0", 1L << 40);
        }
        final PutOptions options = PutOptions.newBuilder().setReplicas(replicaCount).build();

        final long empty = usedHeap();
        final List<Replica> replicas = new ArrayList<>();
        for (int i = 0; i < objects; i++)
        {
            final String key = key(i);
            replicas.clear();
            // New String instances per call, equal to the last ones, as every decoded request carries.
            check(store.putStart(fresh(tenant), fresh(clientId), key, 4096, options, replicas), "PutStart");
            if (replicas.size() != replicaCount)
            {
                throw new IllegalStateException("PutStart placed " + replicas.size() + " replicas");
            }
            check(store.putEnd(fresh(tenant), fresh(clientId), key), "PutEnd");
        }
        final long stored = usedHeap();
        final MetadataStore.Lookup lookup = new MetadataStore.Lookup();
        for (int i = 0; i < objects; i++)
        {
            store.getReplicaList(tenant, key(i), lookup);
            check(lookup.code, "GetReplicaList");
        }
        final long read = usedHeap();
        System.out.printf(Locale.ROOT, "master heap per object (key 44 bytes, tenant '%s', %d replica(s), tokens on, " +
            "%d objects): %.0f bytes stored, %.0f bytes after one read of each (the cached READ tokens)%n", tenant,
            replicaCount, objects,
            (stored - empty) / (double)objects, (read - empty) / (double)objects);
        System.out.printf(Locale.ROOT, "(used heap: empty %.1f MiB, stored %.1f MiB, read %.1f MiB)%n",
            empty / 1048576.0, stored / 1048576.0, read / 1048576.0);
    }

    /** An equal String with its own bytes, as decoding a request makes one. */
    private static String fresh(final String s)
    {
        return new String(s.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    }

    /** A 44-byte key shaped like the prefix helper's (kv1/model/world size/rank/block hash/page). */
    private static String key(final int i)
    {
        return String.format(Locale.ROOT, "kv1/llama-3.1-8b/ws1/r0/%016x/p%02d", i * 0x9E3779B97F4A7C15L, i % 2);
    }

    private static void check(final int code, final String what)
    {
        if (code != 0)
        {
            throw new IllegalStateException(what + " failed with code " + code);
        }
    }

    private static long usedHeap()
    {
        final Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 4; i++)
        {
            System.gc();
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }
}
