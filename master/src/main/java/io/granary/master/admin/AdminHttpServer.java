package io.granary.master.admin;

import io.granary.common.http.AdminHttp;
import io.granary.common.http.AdminHttp.Query;
import io.granary.common.http.AdminHttp.Response;
import io.granary.common.http.Json;
import io.granary.master.MasterServer;
import io.granary.master.meta.MetadataStore;
import io.granary.master.meta.TenantQuota;
import io.granary.master.meta.ObjectSnapshot;
import io.granary.master.metrics.MasterMetrics;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.NodeStatus;
import io.granary.proto.RebuildStatus;
import io.granary.proto.SegmentStatus;
import io.granary.protocol.Limits;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

import java.util.List;
import java.util.function.Predicate;

/**
 * The master's admin HTTP port: health and readiness, the JSON cluster summary, segments, one key's metadata
 * (no lease granted), a bounded key listing and Prometheus metrics. Read-only; served on one daemon thread.
 */
public final class AdminHttpServer implements AutoCloseable
{
    /** Keys one {@code /keys} answer lists when the request gives no limit. */
    static final int DEFAULT_KEYS_LIMIT = 100;

    private final AdminHttp http;
    private final MasterServer master;
    private final MasterMetrics metrics;
    private final PrometheusMeterRegistry prometheus;

    /**
     * Binds and starts serving.
     *
     * @throws java.io.UncheckedIOException when the port cannot be bound.
     */
    public AdminHttpServer(
        final String host,
        final int port,
        final MasterServer master,
        final MasterMetrics metrics,
        final PrometheusMeterRegistry prometheus)
    {
        this.master = master;
        this.metrics = metrics;
        this.prometheus = prometheus;
        this.http = new AdminHttp(host, port, "granary-master-admin")
            .route("/health", this::health)
            .route("/ready", this::ready)
            .route("/status", this::status)
            .route("/segments", this::segments)
            .route("/query", this::query)
            .route("/keys", this::keys)
            .route("/metrics", this::metrics)
            .start();
    }

    public int port()
    {
        return http.port();
    }

    /** Answers {@code path?rawQuery} as the HTTP port would (tests, embedding). */
    public Response answer(final String path, final String rawQuery)
    {
        return http.answer(path, rawQuery);
    }

    private Response health(final Query query)
    {
        query.allow();
        final boolean up = !master.isClosed();
        return Response.json(up ? 200 : 503, Json.object()
            .field("status", up ? "UP" : "DOWN")
            .field("role", "master")
            .field("ready", master.isReady())
            .field("nodes", master.registry().nodeCount())
            .field("objects", master.store().objectCount())
            .end());
    }

    private Response ready(final Query query)
    {
        query.allow();
        final boolean ready = master.isReady();
        return Response.text(ready ? 200 : 503, ready ? "ready\n" : "not ready\n");
    }

    private Response status(final Query query)
    {
        query.allow();
        final ClusterStatusResponse s = MasterRequestHandler.clusterStatus(master, master.store(), master.registry());
        final MetadataStore store = master.store();
        final RebuildStatus r = s.getRebuild();
        final Json json = Json.object()
            .field("version", s.getVersion())
            .field("objects", s.getObjects())
            .field("max_objects", s.getMaxObjects())
            .field("capacity_bytes", s.getCapacityBytes())
            .field("allocated_bytes", s.getAllocatedBytes())
            .field("lease_ttl_ms", s.getLeaseTtlMs())
            .field("soft_pinned_objects", store.softPinnedCount())
            .field("lease_grants", store.leaseGrants())
            .beginObject("eviction")
            .field("rounds", master.evictor().rounds())
            .field("on_demand_rounds", master.evictor().onDemandRounds())
            .field("held_off", master.evictor().heldOffRounds())
            .field("tenant_rounds", master.evictor().tenantRounds())
            .field("pass1_objects", master.evictor().evictedObjects(0))
            .field("pass1_bytes", master.evictor().evictedBytes(0))
            .field("pass2_objects", master.evictor().evictedObjects(1))
            .field("pass2_bytes", master.evictor().evictedBytes(1))
            .field("prefix_breaks", master.evictor().prefixBreaks())
            .field("policy", master.evictor().policy().flagValue())
            .endObject()
            .beginObject("puts")
            .field("started", store.putStarts())
            .field("ended", store.putEnds())
            .field("revoked", store.putRevokes())
            .field("revoked_extents_released", store.revokedExtentsReleased())
            .field("allocation_failures", store.allocationFailures())
            .field("object_budget_refusals", store.objectBudgetRefusals())
            .field("tenant_quota_refusals", store.tenantQuotaRefusals())
            .field("partial_allocations", store.partialAllocations())
            .field("discarded", store.discardedPuts())
            .field("released", store.releasedPuts())
            .endObject()
            .field("lookup_requests", master.lookupRequests())
            .beginObject("rebuild")
            .field("master_id", r.getMasterId())
            .field("ready", r.getReady())
            .field("ledger_reports", r.getLedgerReports())
            .field("entries_reported", r.getEntriesReported())
            .field("objects_rebuilt", r.getObjectsRebuilt())
            .field("replicas_rebuilt", r.getReplicasRebuilt())
            .field("rejected_stale", r.getRejectedStale())
            .field("rejected_overlap", r.getRejectedOverlap())
            .field("rejected_invalid", r.getRejectedInvalid())
            .field("rejected_removed", r.getRejectedRemoved())
            .field("rejected_budget", r.getRejectedBudget())
            .field("replaced_older", r.getReplacedOlder())
            .field("parents_linked", r.getParentsLinked())
            .field("parents_awaited", r.getParentsAwaited())
            .field("discarded_reports", r.getDiscardedReports())
            .field("uptime_ms", r.getUptimeMs())
            .endObject()
            .beginArray("nodes");
        for (final NodeStatus n : s.getNodesList())
        {
            json.beginElement()
                .field("node_id", n.getNodeId())
                .field("name", n.getNodeName())
                .field("endpoint", n.getEndpoint())
                .field("last_heartbeat_ago_ms", n.getLastHeartbeatAgoMs())
                .field("segments", n.getSegments())
                .endObject();
        }
        json.endArray().field("default_tenant_quota_bytes", store.settings().defaultTenantQuotaBytes)
            .beginArray("tenant_quotas");
        for (final TenantQuota q : store.tenantQuotas())
        {
            json.beginElement()
                .field("tenant", q.tenant())
                .field("quota_bytes", q.limitBytes())
                .field("used_bytes", q.usedBytes())
                .field("refusals", q.refusals())
                .field("evicted_bytes", q.evictedBytes())
                .endObject();
        }
        json.endArray().beginArray("segments");
        writeSegments(json, s.getSegmentsList());
        return Response.json(200, json.endArray().end());
    }

    private Response segments(final Query query)
    {
        query.allow();
        final ClusterStatusResponse s = MasterRequestHandler.clusterStatus(master, master.store(), master.registry());
        final Json json = Json.object()
            .field("count", s.getSegmentsCount())
            .field("capacity_bytes", s.getCapacityBytes())
            .field("allocated_bytes", s.getAllocatedBytes())
            .beginArray("segments");
        writeSegments(json, s.getSegmentsList());
        return Response.json(200, json.endArray().end());
    }

    private static void writeSegments(final Json json, final List<SegmentStatus> segments)
    {
        for (final SegmentStatus g : segments)
        {
            json.beginElement()
                .field("name", g.getName())
                .field("node", g.getNodeName())
                .field("node_id", g.getNodeId())
                .field("endpoint", g.getEndpoint())
                .field("size_bytes", g.getSizeBytes())
                .field("allocated_bytes", g.getAllocatedBytes())
                .field("allocations", g.getAllocations())
                .field("largest_free_bytes", g.getLargestFreeBytes())
                .endObject();
        }
    }

    private Response query(final Query query)
    {
        query.allow("key", "tenant");
        final String tenant = tenant(query);
        final String key = query.require("key");
        final String keyProblem = Limits.checkKey(key);
        if (keyProblem != null)
        {
            throw new AdminHttp.BadRequest("invalid key: " + keyProblem);
        }
        final ObjectSnapshot o = master.store().query(tenant, key);
        if (o == null)
        {
            throw new AdminHttp.BadRequest(404, "no object '" + key + "' in tenant '" + tenant + "'");
        }
        final Json json = Json.object()
            .field("tenant", o.tenant())
            .field("key", o.key())
            .field("size_bytes", o.sizeBytes())
            .field("status", o.complete() ? "COMPLETE" : "PROCESSING")
            .field("lease_remaining_ms", o.leaseRemainingMs())
            .field("hard_pinned", o.hardPinned())
            .field("soft_pinned", o.softPinned())
            .field("soft_pin_remaining_ms", o.softPinRemainingMs())
            .field("group", o.groupId())
            .beginArray("replicas");
        for (final ObjectSnapshot.Replica r : o.replicas())
        {
            json.beginElement()
                .field("segment", r.segment())
                .field("node", r.node())
                .field("endpoint", r.endpoint())
                .field("offset", r.offset())
                .field("length_bytes", r.lengthBytes())
                .field("alive", r.alive())
                .endObject();
        }
        return Response.json(200, json.endArray().end());
    }

    private Response keys(final Query query)
    {
        query.allow("regex", "limit", "tenant");
        final String tenant = tenant(query);
        final int cap = master.store().settings().listKeysLimit;
        final int limit = query.intValue("limit", Math.min(DEFAULT_KEYS_LIMIT, cap), 1, cap);
        final String regex = query.get("regex", "");
        final Predicate<String> filter = MasterRequestHandler.keyFilter(regex, true);
        if (filter == null)
        {
            throw new AdminHttp.BadRequest("bad regex '" + regex + "' (Java syntax, at most " +
                Limits.MAX_REGEX_LENGTH + " characters)");
        }
        final boolean[] truncated = new boolean[1];
        final List<KeyInfo> keys = master.store().listKeys(tenant, filter, limit, truncated);
        final Json json = Json.object()
            .field("tenant", tenant)
            .field("regex", regex)
            .field("limit", limit)
            .field("count", keys.size())
            .field("truncated", truncated[0])
            .beginArray("keys");
        for (final KeyInfo k : keys)
        {
            json.beginElement()
                .field("key", k.getKey())
                .field("size_bytes", k.getValueLength())
                .field("status", k.getStatus().name().substring("REPLICA_STATUS_".length()))
                .field("replicas", k.getReplicas())
                .field("lease_remaining_ms", k.getLeaseRemainingMs())
                .field("hard_pinned", k.getHardPinned())
                .field("soft_pinned", k.getSoftPinned())
                .field("group", k.getGroupId().isEmpty() ? null : k.getGroupId())
                .endObject();
        }
        return Response.json(200, json.endArray().end());
    }

    private Response metrics(final Query query)
    {
        query.allow();
        metrics.refresh();
        return new Response(200, AdminHttp.PROMETHEUS_TEXT, prometheus.scrape());
    }

    private static String tenant(final Query query)
    {
        final String tenant = query.get("tenant", "");
        final String problem = Limits.checkTenant(tenant);
        if (problem != null)
        {
            throw new AdminHttp.BadRequest("bad tenant '" + tenant + "': " + problem);
        }
        return Limits.tenantOrDefault(tenant);
    }

    @Override
    public void close()
    {
        http.close();
    }
}
