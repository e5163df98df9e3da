package io.granary.master.admin;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.granary.master.MasterServer;
import io.granary.master.rpc.MasterRequestHandler;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.NodeStatus;
import io.granary.proto.RebuildStatus;
import io.granary.proto.SegmentStatus;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The master's admin HTTP port: health, readiness and a JSON cluster summary. Served by the JDK's
 * built-in HTTP server on one daemon thread; handlers only read metadata.
 */
public final class AdminHttpServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(AdminHttpServer.class);

    private final HttpServer http;
    private final ExecutorService executor;
    private final MasterServer master;

    public AdminHttpServer(final String host, final int port, final MasterServer master)
    {
        this.master = master;
        try
        {
            http = HttpServer.create(new InetSocketAddress(host, port), 64);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot bind the admin port " + host + ":" + port, ex);
        }
        executor = Executors.newSingleThreadExecutor(r ->
        {
            final Thread t = new Thread(r, "granary-master-admin");
            t.setDaemon(true);
            return t;
        });
        http.setExecutor(executor);
        http.createContext("/health", ex -> safely(ex, this::health));
        http.createContext("/ready", ex -> safely(ex, this::ready));
        http.createContext("/status", ex -> safely(ex, this::status));
        http.createContext("/", ex -> safely(ex, e -> send(e, 404, "text/plain", "not found: " + e.getRequestURI().getPath() +
            "\nendpoints: /health /ready /status\n")));
        http.start();
    }

    public int port()
    {
        return http.getAddress().getPort();
    }

    private interface Handler
    {
        void handle(HttpExchange exchange) throws IOException;
    }

    private static void safely(final HttpExchange exchange, final Handler handler)
    {
        try (exchange)
        {
            if (!"GET".equals(exchange.getRequestMethod()) && !"HEAD".equals(exchange.getRequestMethod()))
            {
                send(exchange, 405, "text/plain", "only GET is supported\n");
                return;
            }
            handler.handle(exchange);
        }
        catch (final IOException | RuntimeException ex)
        {
            LOG.debug("admin request {} failed", exchange.getRequestURI(), ex);
        }
    }

    private void health(final HttpExchange exchange) throws IOException
    {
        final boolean up = !master.isClosed();
        final String body = "{\"status\":" + Json.quote(up ? "UP" : "DOWN") +
            ",\"role\":\"master\",\"ready\":" + master.isReady() +
            ",\"nodes\":" + master.registry().nodeCount() +
            ",\"objects\":" + master.store().objectCount() + "}\n";
        send(exchange, up ? 200 : 503, "application/json", body);
    }

    private void ready(final HttpExchange exchange) throws IOException
    {
        final boolean ready = master.isReady();
        send(exchange, ready ? 200 : 503, "text/plain", ready ? "ready\n" : "not ready\n");
    }

    private void status(final HttpExchange exchange) throws IOException
    {
        final ClusterStatusResponse s = MasterRequestHandler.clusterStatus(master, master.store(), master.registry());
        final StringBuilder b = new StringBuilder(256);
        b.append("{\"version\":").append(Json.quote(s.getVersion()))
            .append(",\"objects\":").append(s.getObjects())
            .append(",\"capacity_bytes\":").append(s.getCapacityBytes())
            .append(",\"allocated_bytes\":").append(s.getAllocatedBytes())
            .append(",\"lease_ttl_ms\":").append(s.getLeaseTtlMs())
            .append(",\"soft_pinned_objects\":").append(master.store().softPinnedCount())
            .append(",\"lease_grants\":").append(master.store().leaseGrants())
            .append(",\"eviction\":{\"rounds\":").append(master.evictor().rounds())
            .append(",\"on_demand_rounds\":").append(master.evictor().onDemandRounds())
            .append(",\"pass1_objects\":").append(master.evictor().evictedObjects(0))
            .append(",\"pass1_bytes\":").append(master.evictor().evictedBytes(0))
            .append(",\"pass2_objects\":").append(master.evictor().evictedObjects(1))
            .append(",\"pass2_bytes\":").append(master.evictor().evictedBytes(1)).append('}')
            .append(",\"puts\":{\"started\":").append(master.store().putStarts())
            .append(",\"ended\":").append(master.store().putEnds())
            .append(",\"revoked\":").append(master.store().putRevokes())
            .append(",\"allocation_failures\":").append(master.store().allocationFailures())
            .append(",\"partial_allocations\":").append(master.store().partialAllocations())
            .append(",\"discarded\":").append(master.store().discardedPuts())
            .append(",\"released\":").append(master.store().releasedPuts()).append('}')
            .append(",\"lookup_requests\":").append(master.lookupRequests());
        final RebuildStatus r = s.getRebuild();
        b.append(",\"rebuild\":{\"master_id\":").append(Json.quote(r.getMasterId()))
            .append(",\"ready\":").append(r.getReady())
            .append(",\"ledger_reports\":").append(r.getLedgerReports())
            .append(",\"entries_reported\":").append(r.getEntriesReported())
            .append(",\"objects_rebuilt\":").append(r.getObjectsRebuilt())
            .append(",\"replicas_rebuilt\":").append(r.getReplicasRebuilt())
            .append(",\"rejected_stale\":").append(r.getRejectedStale())
            .append(",\"rejected_overlap\":").append(r.getRejectedOverlap())
            .append(",\"rejected_invalid\":").append(r.getRejectedInvalid())
            .append(",\"rejected_removed\":").append(r.getRejectedRemoved())
            .append(",\"replaced_older\":").append(r.getReplacedOlder())
            .append(",\"discarded_reports\":").append(r.getDiscardedReports())
            .append(",\"uptime_ms\":").append(r.getUptimeMs()).append('}')
            .append(",\"nodes\":[");
        for (int i = 0; i < s.getNodesCount(); i++)
        {
            final NodeStatus n = s.getNodes(i);
            b.append(i == 0 ? "" : ",")
                .append("{\"node_id\":").append(Json.quote(n.getNodeId()))
                .append(",\"name\":").append(Json.quote(n.getNodeName()))
                .append(",\"endpoint\":").append(Json.quote(n.getEndpoint()))
                .append(",\"last_heartbeat_ago_ms\":").append(n.getLastHeartbeatAgoMs())
                .append(",\"segments\":").append(n.getSegments()).append('}');
        }
        b.append("],\"segments\":[");
        for (int i = 0; i < s.getSegmentsCount(); i++)
        {
            final SegmentStatus g = s.getSegments(i);
            b.append(i == 0 ? "" : ",")
                .append("{\"name\":").append(Json.quote(g.getName()))
                .append(",\"node\":").append(Json.quote(g.getNodeName()))
                .append(",\"endpoint\":").append(Json.quote(g.getEndpoint()))
                .append(",\"size_bytes\":").append(g.getSizeBytes())
                .append(",\"allocated_bytes\":").append(g.getAllocatedBytes())
                .append(",\"allocations\":").append(g.getAllocations())
                .append(",\"largest_free_bytes\":").append(g.getLargestFreeBytes()).append('}');
        }
        b.append("]}\n");
        send(exchange, 200, "application/json", b.toString());
    }

    private static void send(final HttpExchange exchange, final int status, final String type, final String body)
        throws IOException
    {
        final byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", type + "; charset=utf-8");
        final boolean head = "HEAD".equals(exchange.getRequestMethod());
        exchange.sendResponseHeaders(status, head ? -1 : bytes.length);
        if (!head)
        {
            try (OutputStream out = exchange.getResponseBody())
            {
                out.write(bytes);
            }
        }
    }

    @Override
    public void close()
    {
        http.stop(0);
        executor.shutdownNow();
    }
}
