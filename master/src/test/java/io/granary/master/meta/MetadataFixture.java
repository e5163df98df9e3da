package io.granary.master.meta;

import io.granary.common.ManualClock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.evict.EvictionPolicy;
import io.granary.master.evict.Evictor;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.LeaseMode;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** A master metadata store on a manual clock with one or more mounted segments, for scenario tests. */
public final class MetadataFixture
{
    public static final String T = "default";
    public static final String CLIENT = "client-a";

    public final ManualClock clock = new ManualClock();
    public final SegmentRegistry registry =
        new SegmentRegistry(clock, (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
    public final MetadataStore store;
    public final BatchProbe probe;

    public MetadataFixture(final int shards)
    {
        this(shards, 0);
    }

    /** With a non-zero {@code placementSeed}, two fixtures given the same calls place replicas alike. */
    public MetadataFixture(final int shards, final long placementSeed)
    {
        this(shards, placementSeed, Long.MAX_VALUE);
    }

    /** ... and a store that holds at most {@code maxObjects} objects. */
    public MetadataFixture(final int shards, final long placementSeed, final long maxObjects)
    {
        this(shards, settings ->
        {
            settings.placementSeed = placementSeed;
            settings.maxObjects = maxObjects;
        });
    }

    /** A store of {@code shards} shards with the settings {@code tune} makes (tenant quotas, for one). */
    public MetadataFixture(final int shards, final java.util.function.Consumer<MetadataStore.Settings> tune)
    {
        final MetadataStore.Settings settings = new MetadataStore.Settings();
        settings.shardCount = shards;
        tune.accept(settings);
        store = new MetadataStore(settings, clock, registry);
        probe = new BatchProbe(store);
    }

    public MetadataFixture mount(final String node, final long bytes)
    {
        final SegmentRegistry.MountResult r = registry.mount(
            node, node, "127.0.0.1:" + (7000 + registry.nodeCount()), 100 + registry.nodeCount(), node + "/seg0", bytes);
        assertThat(r.code).isEqualTo(OK_VALUE);
        return this;
    }

    public Evictor evictor(final double highWatermark, final double ratio, final boolean allowSoftPinned)
    {
        return new Evictor(store, registry, highWatermark, ratio, allowSoftPinned).attach();
    }

    public Evictor evictor(
        final double highWatermark, final double ratio, final boolean allowSoftPinned, final EvictionPolicy policy)
    {
        return new Evictor(store, registry, highWatermark, ratio, allowSoftPinned, policy).attach();
    }

    /** Live objects naming {@code key}'s eviction unit (its group, or itself) as their parent. */
    public int childRefs(final String key)
    {
        final ObjectMeta m = store.lockForKey(T, key);
        assertThat(m).as(key).isNotNull();
        try
        {
            return m.childRefs();
        }
        finally
        {
            store.unlockOwner(m);
        }
    }

    public int putCode(final String tenant, final String key, final long length, final PutOptions options)
    {
        final List<Replica> replicas = new ArrayList<>();
        final int code = store.putStart(tenant, CLIENT, key, length, options, replicas);
        if (code != OK_VALUE)
        {
            return code;
        }
        return store.putEnd(tenant, CLIENT, key);
    }

    public void put(final String key, final long length, final PutOptions options)
    {
        assertThat(putCode(T, key, length, options)).as("put " + key).isEqualTo(OK_VALUE);
    }

    public void put(final String key, final long length)
    {
        put(key, length, PutOptions.getDefaultInstance());
    }

    public void start(final String key, final long length)
    {
        assertThat(store.putStart(T, CLIENT, key, length, PutOptions.getDefaultInstance(), new ArrayList<>()))
            .isEqualTo(OK_VALUE);
    }

    public boolean present(final String key)
    {
        return store.exists(T, key, false) == 1;
    }

    public boolean leased(final String key)
    {
        return present(key, m -> m.isLeased(clock.nanoTime()));
    }

    /** Whether {@code key} is present and soft pinned now (a lapsed pin counts as none). */
    public boolean softPinned(final String key)
    {
        return present(key, m -> m.isSoftPinned(clock.nanoTime()));
    }

    /** Whether {@code key} is present and {@code test} holds for it, under its owner's lock. */
    private boolean present(final String key, final java.util.function.Predicate<ObjectMeta> test)
    {
        final ObjectMeta m = store.lockForKey(T, key);
        if (m == null)
        {
            return false;
        }
        try
        {
            return test.test(m);
        }
        finally
        {
            store.unlockOwner(m);
        }
    }

    public long leaseDeadline(final String key)
    {
        final ObjectMeta m = store.lockForKey(T, key);
        assertThat(m).as(key).isNotNull();
        try
        {
            return m.leaseDeadlineNs();
        }
        finally
        {
            store.unlockOwner(m);
        }
    }

    /** Runs a probe and returns the mask; the whole-request code must be {@code expectedCode}. */
    public boolean[] probe(final LeaseMode mode, final int n, final int expectedCode, final String... keys)
    {
        final boolean[] mask = new boolean[keys.length];
        final int[] codes = new int[keys.length];
        assertThat(probe.probe(T, mode, n, Arrays.asList(keys), mask, codes)).isEqualTo(expectedCode);
        return mask;
    }

    public long allocatedBytes()
    {
        long total = 0;
        for (final MountedSegment s : registry.liveSegments())
        {
            total += s.allocatedBytes();
        }
        return total;
    }
}
