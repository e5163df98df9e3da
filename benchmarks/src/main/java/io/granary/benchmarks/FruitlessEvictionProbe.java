package io.granary.benchmarks;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.evict.Evictor;
import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.ErrorCode;
import io.granary.proto.PutOptions;

import java.util.ArrayList;
import java.util.Locale;

/**
 * What a put costs the master's RPC thread when the pool is full of leased objects: a metadata store (no RPC in
 * front) with the evictor attached fills one segment exactly with {@code objects} 64-byte objects and reads every one
 * (a lease of 10 s), then times puts that cannot fit. The first runs an on-demand eviction round that scans every
 * object and frees nothing; the next ones, within 100 ms and with nothing changed, are held off and refused at once;
 * puts after a pause of 150 ms scan again. Then 30 background checks 100 ms apart (the pool is above its 0.9 watermark):
 * how many rounds they ran, how many were held off, and the time they took.
 *
 * <pre>
 * java -Xmx4g -cp benchmarks/target/benchmarks.jar io.granary.benchmarks.FruitlessEvictionProbe [objects]
 * </pre>
 */
public final class FruitlessEvictionProbe
{
    private FruitlessEvictionProbe()
    {
    }

    public static void main(final String[] args) throws InterruptedException
    {
        final int objects = args.length > 0 ? Integer.parseInt(args[0]) : 2_000_000;
        if (objects < 1)
        {
            throw new IllegalArgumentException("objects must be positive, was " + objects);
        }
        final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        registry.mount("node", "node", "127.0.0.1:7000", 1, "node/seg0", 64L * objects);
        final MetadataStore store = new MetadataStore(new MetadataStore.Settings(), Clock.SYSTEM, registry);
        final Evictor evictor = new Evictor(store, registry, 0.9, 0.05, false).attach();
        final PutOptions options = PutOptions.getDefaultInstance();
        for (int i = 0; i < objects; i++)
        {
            final String key = "key-" + i;
            if (store.putStart("default", "probe", key, 64, options, new ArrayList<>()) != ErrorCode.OK_VALUE ||
                store.putEnd("default", "probe", key) != ErrorCode.OK_VALUE || store.exists("default", key, true) != 1)
            {
                throw new IllegalStateException("could not store and lease " + key);
            }
        }
        System.out.printf(Locale.ROOT, "%,d objects of 64 bytes fill the segment, every one leased%n", objects);
        for (int put = 0; put < 6; put++)
        {
            if (put >= 3)
            {
                Thread.sleep(150); // past the hold-off: the next put scans again
            }
            final long startNs = System.nanoTime();
            final int code = store.putStart("default", "probe", "extra-" + put, 64, options, new ArrayList<>());
            final long ns = System.nanoTime() - startNs;
            System.out.printf(Locale.ROOT, "put %d: %s in %.2f ms (on-demand rounds %d, held off %d)%n", put,
                code == ErrorCode.NO_AVAILABLE_HANDLE_VALUE ? "refused" : "code " + code, ns / 1e6,
                evictor.onDemandRounds(), evictor.heldOffRounds());
        }
        // The background check, as the master's evictor thread runs it: every 100 ms, the pool above its watermark.
        Thread.sleep(150);
        final long roundsBefore = evictor.rounds();
        final long heldOffBefore = evictor.heldOffRounds();
        long busyNs = 0;
        for (int check = 0; check < 30; check++)
        {
            final long startNs = System.nanoTime();
            evictor.maybeEvict();
            busyNs += System.nanoTime() - startNs;
            Thread.sleep(100);
        }
        System.out.printf(Locale.ROOT, "background: 30 checks 100 ms apart: %d rounds run, %d held off, %.0f ms scanning%n",
            evictor.rounds() - roundsBefore, evictor.heldOffRounds() - heldOffBefore, busyNs / 1e6);
    }
}
