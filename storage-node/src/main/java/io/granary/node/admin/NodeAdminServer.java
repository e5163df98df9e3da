package io.granary.node.admin;

import io.granary.common.http.AdminHttp;
import io.granary.common.http.AdminHttp.Query;
import io.granary.common.http.AdminHttp.Response;
import io.granary.common.http.Json;
import io.granary.node.StorageNode;
import io.granary.node.segment.Segment;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

import java.util.List;

/**
 * The storage node's admin HTTP port: {@code /health} (JSON), {@code /ready} (200 once the master has every segment
 * mounted), {@code /segments} and Prometheus {@code /metrics}. Read-only; served on one daemon thread.
 */
public final class NodeAdminServer implements AutoCloseable
{
    private final AdminHttp http;
    private final StorageNode node;
    private final PrometheusMeterRegistry prometheus;

    /** Binds and starts serving. @throws java.io.UncheckedIOException when the port cannot be bound. */
    public NodeAdminServer(
        final String host, final int port, final StorageNode node, final PrometheusMeterRegistry prometheus)
    {
        this.node = node;
        this.prometheus = prometheus;
        this.http = new AdminHttp(host, port, "granary-node-admin")
            .route("/health", this::health)
            .route("/ready", this::ready)
            .route("/segments", this::segments)
            .route("/metrics", this::metrics)
            .start();
    }

    public int port()
    {
        return http.port();
    }

    /** Answers {@code path?rawQuery} as the HTTP port would. */
    public Response answer(final String path, final String rawQuery)
    {
        return http.answer(path, rawQuery);
    }

    private boolean ready()
    {
        return !node.isClosed() && node.masterLink() != null && node.masterLink().isRegistered();
    }

    private Response health(final Query query)
    {
        query.allow();
        final boolean up = !node.isClosed();
        final boolean ready = ready();
        return Response.json(up ? 200 : 503, Json.object()
            .field("status", up ? "UP" : "DOWN")
            .field("role", "node")
            .field("ready", ready)
            .field("name", node.name())
            .field("node_id", node.nodeId())
            .field("endpoint", node.endpoint())
            .field("master", node.context().masterAddress())
            .field("segments", node.segments().size())
            .field("connections", node.transferServer().openConnections())
            .end());
    }

    private Response ready(final Query query)
    {
        query.allow();
        final boolean ready = ready();
        return Response.text(ready ? 200 : 503, ready ? "ready\n" : "not ready (not registered with the master)\n");
    }

    private Response segments(final Query query)
    {
        query.allow();
        final Json json = Json.object().field("node", node.name()).beginArray("segments");
        long total = 0;
        final List<Segment> segments = node.segments();
        final long[] hugePageBytes = Segment.hugePageBytes(segments);
        for (int i = 0; i < segments.size(); i++)
        {
            final Segment segment = segments.get(i);
            total += segment.sizeBytes();
            json.beginElement()
                .field("name", segment.name())
                .field("segment_id", Integer.toUnsignedLong(segment.id()))
                .field("size_bytes", segment.sizeBytes())
                .field("huge_pages_advised", segment.hugePagesAdvised())
                .field("huge_page_bytes", hugePageBytes[i])
                .endObject();
        }
        return Response.json(200, json.endArray().field("capacity_bytes", total).end());
    }

    private Response metrics(final Query query)
    {
        query.allow();
        return new Response(200, AdminHttp.PROMETHEUS_TEXT, prometheus.scrape());
    }

    @Override
    public void close()
    {
        http.close();
    }
}
