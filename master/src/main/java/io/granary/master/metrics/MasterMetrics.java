package io.granary.master.metrics;

import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.evict.Evictor;
import io.granary.master.events.EventDispatcher;
import io.granary.master.events.EventJournal;
import io.granary.master.events.zmq.ZmqEventPublisher;
import io.granary.master.meta.BatchProbe;
import io.granary.master.meta.MetadataStore;
import io.granary.master.meta.TenantQuota;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.LeaseMode;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;

/**
 * The master's metrics over the counters its components already keep (LongAdders in the store, evictor, probe
 * and registry): function counters and gauges read at scrape time, so nothing is counted twice and the hot paths
 * pay nothing extra. Per-segment gauges are refreshed by {@link #refresh()} before each scrape. Per-call latency
 * lives in {@link io.granary.master.rpc.RpcMetrics}. Register once; {@link #refresh()} and {@link #close()} from
 * the admin thread.
 */
public final class MasterMetrics implements AutoCloseable
{
    private final SegmentRegistry registry;
    private final MultiGauge segmentCapacity;
    private final MultiGauge segmentAllocated;
    private final MultiGauge segmentLargestFree;
    private final JvmGcMetrics gcMetrics = new JvmGcMetrics();
    private volatile long capacityBytes;
    private volatile long allocatedBytes;

    public MasterMetrics(
        final MeterRegistry meters,
        final MetadataStore store,
        final SegmentRegistry registry,
        final Evictor evictor,
        final BatchProbe probe)
    {
        this.registry = registry;

        gauge(meters, "granary.master.objects", "Objects (keys) the master holds, all tenants, complete or not",
            store, MetadataStore::objectCount);
        gauge(meters, "granary.master.objects.max", "The object budget (--max-objects, or derived from the heap): " +
            "eviction keeps the objects below its high watermark", store, s -> s.settings().maxObjects);
        gauge(meters, "granary.master.puts.processing", "Puts started and not finished: in flight, or abandoned " +
            "until --put-release-timeout reclaims them", store, MetadataStore::processingPuts);
        gauge(meters, "granary.master.soft.pinned.objects", "Objects with a soft pin in force", store,
            MetadataStore::softPinnedCount);
        gauge(meters, "granary.master.rebuild.parents.awaited", "Rebuilt objects whose named parent the master does " +
            "not hold (yet): without a parent for prefix-aware eviction until it arrives", store,
            MetadataStore::rebuiltAwaitingParents);
        gauge(meters, "granary.master.nodes", "Storage nodes registered (alive)", registry,
            SegmentRegistry::nodeCount);
        gauge(meters, "granary.master.segments", "Segments mounted on live nodes", registry,
            r -> r.liveSegments().length);
        Gauge.builder("granary.master.capacity.bytes", this, m -> m.capacityBytes)
            .description("Bytes of all mounted segments").baseUnit("bytes").register(meters);
        Gauge.builder("granary.master.allocated.bytes", this, m -> m.allocatedBytes)
            .description("Bytes allocated to objects in all mounted segments").baseUnit("bytes").register(meters);
        segmentCapacity = MultiGauge.builder("granary.master.segment.capacity.bytes")
            .description("Bytes of one mounted segment").baseUnit("bytes").register(meters);
        segmentAllocated = MultiGauge.builder("granary.master.segment.allocated.bytes")
            .description("Bytes allocated to objects in one segment").baseUnit("bytes").register(meters);
        segmentLargestFree = MultiGauge.builder("granary.master.segment.largest.free.bytes")
            .description("Largest free extent of one segment").baseUnit("bytes").register(meters);

        for (int pass = 0; pass < 2; pass++)
        {
            final int p = pass;
            counter(meters, "granary.master.evicted.objects", "Objects evicted, by eviction pass", evictor,
                e -> e.evictedObjects(p), "pass", Integer.toString(pass + 1));
            counter(meters, "granary.master.evicted.bytes", "Bytes freed by eviction, by eviction pass", evictor,
                e -> e.evictedBytes(p), "pass", Integer.toString(pass + 1));
        }
        counter(meters, "granary.master.eviction.rounds", "Eviction rounds run (watermark and on demand)", evictor,
            Evictor::rounds);
        counter(meters, "granary.master.eviction.rounds.on.demand",
            "Eviction rounds run because an allocation found no room or a put found the master at its object budget", evictor, Evictor::onDemandRounds);
        counter(meters, "granary.master.eviction.rounds.held.off", "Eviction rounds (on demand or " +
            "background) not run because one that freed nothing had just run with nothing changed since", evictor,
            Evictor::heldOffRounds);
        counter(meters, "granary.master.eviction.rounds.tenant", "Eviction rounds run over one tenant's objects because a " +
            "put would have taken it beyond its quota", evictor, Evictor::tenantRounds);
        counter(meters, "granary.master.put.tenant.quota.refusals", "Puts of new keys refused with " +
            "TENANT_QUOTA_EXCEEDED, all tenants", store, MetadataStore::tenantQuotaRefusals);
        // Per tenant only for those --tenant-quotas names: a bounded set of label values.
        for (final String tenant : store.settings().tenantQuotaBytes.keySet())
        {
            final TenantQuota q = store.tenantQuota(tenant);
            Gauge.builder("granary.master.tenant.quota.bytes", q, TenantQuota::limitBytes).tag("tenant", tenant)
                .description("The tenant's byte quota (--tenant-quotas)").baseUnit("bytes").register(meters);
            Gauge.builder("granary.master.tenant.used.bytes", q, TenantQuota::usedBytes).tag("tenant", tenant)
                .description("Value bytes of the tenant's objects, replicas counted once").baseUnit("bytes")
                .register(meters);
            counter(meters, "granary.master.tenant.quota.refusals", "Puts of the tenant's new keys refused with " +
                "TENANT_QUOTA_EXCEEDED", q, TenantQuota::refusals, "tenant", tenant);
            counter(meters, "granary.master.tenant.quota.evicted.bytes", "Bytes evicted to keep the tenant within " +
                "its quota", q, TenantQuota::evictedBytes, "tenant", tenant);
        }
        counter(meters, "granary.master.eviction.prefix.breaks",
            "Units evicted while a live object still named them as its parent (a hole in a prefix chain)", evictor,
            Evictor::prefixBreaks);
        counter(meters, "granary.master.put.parent.links", "Puts whose named parent was live and counts them as a child",
            store, MetadataStore::parentLinks);
        counter(meters, "granary.master.put.parent.missing", "Puts naming a parent key that was not live (no link)",
            store, MetadataStore::parentsMissing);

        counter(meters, "granary.master.puts.started", "Valid PutStart requests (those then refused for space too)", store,
            MetadataStore::putStarts);
        counter(meters, "granary.master.puts.completed", "Puts made readable by PutEnd", store,
            MetadataStore::putEnds);
        counter(meters, "granary.master.puts.revoked", "Puts revoked by their client", store,
            MetadataStore::putRevokes);
        counter(meters, "granary.master.put.revoke.released.extents",
            "Extents of revoked puts freed at once (their client had settled every write to them), not quarantined",
            store, MetadataStore::revokedExtentsReleased);
        counter(meters, "granary.master.put.allocation.failures",
            "PutStart calls refused for lack of space (NO_AVAILABLE_HANDLE), after eviction", store,
            MetadataStore::allocationFailures);
        counter(meters, "granary.master.put.object.budget.refusals",
            "PutStart calls refused (NO_AVAILABLE_HANDLE) because the master held --max-objects objects and eviction " +
            "freed none", store, MetadataStore::objectBudgetRefusals);
        counter(meters, "granary.master.put.partial.allocations",
            "PutStart calls that got fewer replicas than asked", store, MetadataStore::partialAllocations);
        counter(meters, "granary.master.puts.discarded",
            "Unfinished puts preempted by a new put of the same key after the discard timeout", store,
            MetadataStore::discardedPuts);
        counter(meters, "granary.master.puts.released",
            "Abandoned puts whose extents were reclaimed after the release timeout", store,
            MetadataStore::releasedPuts);
        counter(meters, "granary.master.lease.grants", "Read leases granted or extended", store,
            MetadataStore::leaseGrants);
        counter(meters, "granary.master.objects.removed", "Objects removed by clients", store,
            MetadataStore::removedObjects);
        counter(meters, "granary.master.objects.lost", "Objects erased because every replica's segment was lost",
            store, MetadataStore::lostObjects);
        final MetadataStore.RebuildCounters rebuild = store.rebuildCounters();
        counter(meters, "granary.master.rebuild.entries.reported", "Ledger entries nodes reported to this master",
            rebuild, MetadataStore.RebuildCounters::entriesReported);
        counter(meters, "granary.master.rebuild.objects", "Objects rebuilt from node ledger reports", rebuild,
            MetadataStore.RebuildCounters::objects);
        counter(meters, "granary.master.rebuild.replicas", "Replicas rebuilt from node ledger reports", rebuild,
            MetadataStore.RebuildCounters::replicas);
        counter(meters, "granary.master.rebuild.entries.rejected", "Reported ledger entries refused, by reason",
            rebuild, MetadataStore.RebuildCounters::rejectedStale, "reason", "stale");
        counter(meters, "granary.master.rebuild.entries.rejected", "Reported ledger entries refused, by reason",
            rebuild, MetadataStore.RebuildCounters::rejectedOverlap, "reason", "overlap");
        counter(meters, "granary.master.rebuild.entries.rejected", "Reported ledger entries refused, by reason",
            rebuild, MetadataStore.RebuildCounters::rejectedInvalid, "reason", "invalid");
        counter(meters, "granary.master.rebuild.entries.rejected", "Reported ledger entries refused, by reason",
            rebuild, MetadataStore.RebuildCounters::rejectedRemoved, "reason", "removed");
        counter(meters, "granary.master.rebuild.entries.rejected", "Reported ledger entries refused, by reason",
            rebuild, MetadataStore.RebuildCounters::rejectedBudget, "reason", "budget");
        counter(meters, "granary.master.rebuild.parents.linked",
            "Rebuilt objects linked to the parent their writer named", rebuild,
            MetadataStore.RebuildCounters::parentsLinked);

        for (final LeaseMode mode : LeaseMode.values())
        {
            if (mode == LeaseMode.UNRECOGNIZED)
            {
                continue;
            }
            final int m = mode.getNumber();
            final String policy = mode.name().substring("LEASE_MODE_".length()).toLowerCase(Locale.ROOT);
            counter(meters, "granary.master.probes", "BatchProbeKey calls answered, by lease policy", probe,
                b -> b.probes(m), "policy", policy);
            if (mode != LeaseMode.LEASE_MODE_NONE)
            {
                counter(meters, "granary.master.probe.selections", "Probes that selected and leased a candidate",
                    probe, b -> b.selections(m), "policy", policy);
                counter(meters, "granary.master.probe.selected.keys", "Keys selected and leased by probes", probe,
                    b -> b.selectedKeys(m), "policy", policy);
            }
        }

        counter(meters, "granary.master.nodes.joined", "Node incarnations that registered", registry,
            SegmentRegistry::nodesJoined);
        counter(meters, "granary.master.nodes.expired", "Nodes dropped after missing heartbeats for the node TTL",
            registry, SegmentRegistry::nodesExpired);
        counter(meters, "granary.master.nodes.left", "Nodes that deregistered cleanly", registry,
            SegmentRegistry::nodesLeft);

        new JvmMemoryMetrics().bindTo(meters);
        new JvmThreadMetrics().bindTo(meters);
        new ProcessorMetrics().bindTo(meters);
        new UptimeMetrics().bindTo(meters);
        gcMetrics.bindTo(meters);
        refresh();
    }

    /** Registers the KV event metrics (events on). */
    public void events(final MeterRegistry meters, final EventDispatcher events)
    {
        final EventJournal journal = events.journal();
        counter(meters, "granary.master.events.published",
            "KV events appended to the journal (stored, removed, cleared): the next sequence number", journal,
            EventJournal::nextSequence);
        gauge(meters, "granary.master.events.subscribers", "SubscribeEvents streams open", events,
            EventDispatcher::subscriberCount);
        counter(meters, "granary.master.events.subscriptions", "SubscribeEvents streams started", events,
            EventDispatcher::subscriptions);
        counter(meters, "granary.master.events.subscribers.cut.off",
            "Event subscribers cut off (RESOURCE_EXHAUSTED) for falling more than --events-subscriber-queue behind",
            events, EventDispatcher::cutOffs);
        counter(meters, "granary.master.events.snapshots",
            "Snapshots of the present keys sent to subscribers (asked for, or start sequence no longer buffered)",
            events, EventDispatcher::snapshots);
        counter(meters, "granary.master.events.sent", "Events sent to subscribers (snapshot entries included)",
            events, EventDispatcher::eventsSent);
        counter(meters, "granary.master.events.batches.sent", "Event batches sent to subscribers", events,
            EventDispatcher::batchesSent);
    }

    /** Registers the ZeroMQ publisher's metrics (with {@code --events-zmq-endpoint}). */
    public void zmqEvents(final MeterRegistry meters, final ZmqEventPublisher zmq)
    {
        counter(meters, "granary.master.events.zmq.batches", "Batches the ZeroMQ KV-event publisher sent", zmq,
            ZmqEventPublisher::batches);
        counter(meters, "granary.master.events.zmq.replays", "Replay requests the ZeroMQ publisher answered", zmq,
            ZmqEventPublisher::replays);
        counter(meters, "granary.master.events.zmq.resyncs",
            "Times the ZeroMQ publisher sent AllBlocksCleared and the present keys instead of events", zmq,
            ZmqEventPublisher::resyncs);
    }

    /** Reads every segment's allocator once and updates the per-segment and total gauges. */
    public void refresh()
    {
        final List<MultiGauge.Row<?>> capacity = new ArrayList<>();
        final List<MultiGauge.Row<?>> allocated = new ArrayList<>();
        final List<MultiGauge.Row<?>> largestFree = new ArrayList<>();
        long totalCapacity = 0;
        long totalAllocated = 0;
        for (final MountedSegment s : registry.liveSegments())
        {
            final SegmentAllocation.Stats stats = s.stats();
            final Tags tags = Tags.of("segment", s.name(), "node", s.nodeName());
            capacity.add(MultiGauge.Row.of(tags, s.sizeBytes()));
            allocated.add(MultiGauge.Row.of(tags, stats.allocatedBytes()));
            largestFree.add(MultiGauge.Row.of(tags, stats.largestFreeBytes()));
            totalCapacity += s.sizeBytes();
            totalAllocated += stats.allocatedBytes();
        }
        segmentCapacity.register(capacity, true);
        segmentAllocated.register(allocated, true);
        segmentLargestFree.register(largestFree, true);
        capacityBytes = totalCapacity;
        allocatedBytes = totalAllocated;
    }

    private static <T> void gauge(
        final MeterRegistry meters, final String name, final String help, final T source, final ToDoubleFunction<T> f)
    {
        Gauge.builder(name, source, f).description(help).register(meters);
    }

    private static <T> void counter(
        final MeterRegistry meters,
        final String name,
        final String help,
        final T source,
        final ToDoubleFunction<T> f,
        final String... tags)
    {
        FunctionCounter.builder(name, source, f).description(help).tags(tags).register(meters);
    }

    @Override
    public void close()
    {
        gcMetrics.close();
    }
}
