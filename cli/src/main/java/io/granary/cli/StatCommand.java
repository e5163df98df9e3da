package io.granary.cli;

import io.granary.client.ClusterStatus;
import io.granary.client.GranaryClient;
import io.granary.common.Units;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * {@code granary stat}: the cluster as the master sees it — nodes, segments, objects, capacity — over gRPC, or the
 * master's JSON cluster summary ({@code /status} of its admin port) with its counters when {@code --admin} is given.
 */
@Command(
    name = "stat",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = "Show the cluster as the master sees it: storage nodes, segments (size, used, allocations, "
        + "largest free extent), objects (all tenants) and capacity; with --admin, from the master's admin port, "
        + "with lease, put and eviction counters too.")
final class StatCommand extends ClientCommand
{
    @Option(names = "--admin", paramLabel = "HOST:PORT",
        description = "Read the JSON cluster summary from the master's admin port (/status) instead of gRPC, and show "
            + "its counters as well.")
    String admin;

    @Override
    int run(final GranaryClient client, final PrintWriter out)
    {
        if (admin == null)
        {
            print(client.clusterStatus(), clientOptions.master, out);
            return 0;
        }
        final Map<String, Object> summary = fetchSummary(admin, clientOptions.timeout);
        print(fromSummary(summary), "admin " + admin, out);
        printCounters(summary, out);
        return 0;
    }

    /** Prints the summary; demo and bench use it too. */
    static void print(final ClusterStatus status, final String masterAddress, final PrintWriter out)
    {
        out.println("master " + masterAddress + "  version " + status.version() + "  lease-ttl " +
            Converters.humanDuration(status.leaseTtlMs()));

        out.println("nodes: " + status.nodes().size());
        if (!status.nodes().isEmpty())
        {
            final Table nodes = new Table("NAME", "ENDPOINT", "NODE-ID", ">SEGMENTS", ">LAST-HEARTBEAT");
            for (final ClusterStatus.Node n : sorted(status.nodes(), ClusterStatus.Node::nodeName))
            {
                nodes.row(n.nodeName(), n.endpoint(), n.nodeId(), n.segments(),
                    Converters.humanDuration(n.lastHeartbeatAgoMs()) + " ago");
            }
            nodes.print(out, "  ");
        }

        out.println("segments: " + status.segments().size());
        if (!status.segments().isEmpty())
        {
            final Table segments = new Table(
                "SEGMENT", "NODE", ">SIZE", ">USED", ">USED%", ">ALLOCATIONS", ">LARGEST-FREE");
            for (final ClusterStatus.Segment s : sorted(status.segments(), ClusterStatus.Segment::name))
            {
                segments.row(s.name(), s.nodeName(), Units.formatBytes(s.sizeBytes()),
                    Units.formatBytes(s.allocatedBytes()), percent(s.allocatedBytes(), s.sizeBytes()),
                    s.allocations(), Units.formatBytes(s.largestFreeBytes()));
            }
            segments.print(out, "  ");
        }

        out.println("objects: " + status.objects() + (status.maxObjects() == 0 ? "" : " of at most " +
            status.maxObjects() + " (" + percent(status.objects(), status.maxObjects()) + " of the object budget)"));
        out.println("capacity: " + Units.formatBytes(status.capacityBytes()) + ", used " +
            Units.formatBytes(status.allocatedBytes()) + " (" +
            percent(status.allocatedBytes(), status.capacityBytes()) + ")");
        final ClusterStatus.Rebuild r = status.rebuild();
        if (!r.masterId().isEmpty())
        {
            out.println("master: id " + r.masterId() + ", up " + Converters.humanDuration(r.uptimeMs()) +
                (r.ready() ? ", ready" : ", not ready") + "; rebuilt from node ledgers: " + r.objectsRebuilt() +
                " objects, " + r.replicasRebuilt() + " replicas from " + r.ledgerReports() + " segment report(s), " +
                r.entriesRejected() + " entries refused" + (r.parentsLinked() + r.parentsAwaited() == 0 ? "" :
                "; " + r.parentsLinked() + " linked to their parent, " + r.parentsAwaited() + " waiting for it"));
        }
    }

    /** The counters of the admin summary: leases and pins, puts, eviction by pass, lookup-port requests. */
    static void printCounters(final Map<String, Object> summary, final PrintWriter out)
    {
        out.println("leases: " + number(summary, "lease_grants") + " granted, soft-pinned objects " +
            number(summary, "soft_pinned_objects"));
        final Map<String, Object> puts = map(summary, "puts");
        out.println("puts: " + number(puts, "started") + " started, " + number(puts, "ended") + " completed, " +
            number(puts, "revoked") + " revoked (" + number(puts, "revoked_extents_released") +
            " of their extents freed at once), " + number(puts, "allocation_failures") + " allocation failures, " +
            number(puts, "partial_allocations") + " partial, " + number(puts, "discarded") + " discarded, " +
            number(puts, "released") + " released");
        out.println("object budget: " + number(puts, "object_budget_refusals") + " puts of new keys refused at it");
        final Map<String, Object> eviction = map(summary, "eviction");
        out.println("eviction: " + number(eviction, "rounds") + " rounds (" + number(eviction, "on_demand_rounds") +
            " on demand, " + number(eviction, "held_off") + " held off), policy " + text(eviction, "policy") +
            ", " + number(eviction, "prefix_breaks") + " prefix breaks");
        final Table passes = new Table("PASS", ">OBJECTS", ">BYTES");
        passes.row("1 (unpinned)", number(eviction, "pass1_objects"),
            Units.formatBytes(number(eviction, "pass1_bytes")));
        passes.row("2 (soft-pinned)", number(eviction, "pass2_objects"),
            Units.formatBytes(number(eviction, "pass2_bytes")));
        passes.print(out, "  ");
        final List<Map<String, Object>> quotas = list(summary, "tenant_quotas");
        if (!quotas.isEmpty())
        {
            out.println("tenant quotas: " + quotas.size());
            final Table tenants = new Table("TENANT", ">QUOTA", ">USED", ">USED%", ">REFUSED", ">EVICTED");
            for (final Map<String, Object> q : quotas)
            {
                tenants.row(text(q, "tenant"), Units.formatBytes(number(q, "quota_bytes")),
                    Units.formatBytes(number(q, "used_bytes")), percent(number(q, "used_bytes"), number(q, "quota_bytes")),
                    number(q, "refusals"), Units.formatBytes(number(q, "evicted_bytes")));
            }
            tenants.print(out, "  ");
        }
        out.println("lookup-port requests: " + number(summary, "lookup_requests"));
    }

    /** The client-side view of the admin summary's nodes, segments and totals. */
    static ClusterStatus fromSummary(final Map<String, Object> summary)
    {
        final List<ClusterStatus.Node> nodes = new ArrayList<>();
        for (final Map<String, Object> n : list(summary, "nodes"))
        {
            nodes.add(new ClusterStatus.Node(text(n, "node_id"), text(n, "name"), text(n, "endpoint"),
                number(n, "last_heartbeat_ago_ms"), (int)number(n, "segments")));
        }
        final List<ClusterStatus.Segment> segments = new ArrayList<>();
        for (final Map<String, Object> s : list(summary, "segments"))
        {
            segments.add(new ClusterStatus.Segment(text(s, "node_id"), text(s, "node"), text(s, "endpoint"), 0,
                text(s, "name"), number(s, "size_bytes"), number(s, "allocated_bytes"), number(s, "allocations"),
                number(s, "largest_free_bytes")));
        }
        return new ClusterStatus(nodes, segments, number(summary, "objects"), number(summary, "capacity_bytes"),
            number(summary, "allocated_bytes"), number(summary, "lease_ttl_ms"), text(summary, "version"),
            ClusterStatus.Rebuild.NONE, number(summary, "max_objects"));
    }

    /** GETs {@code http://admin/status} and parses the JSON. */
    static Map<String, Object> fetchSummary(final String admin, final Duration timeout)
    {
        final String base = admin.startsWith("http://") || admin.startsWith("https://") ? admin : "http://" + admin;
        final URI uri;
        try
        {
            uri = URI.create(base.endsWith("/") ? base + "status" : base + "/status");
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException("--admin must be HOST:PORT of the master's admin port, was '" + admin +
                "'");
        }
        final HttpResponse<String> response;
        try
        {
            response = HttpClient.newBuilder().connectTimeout(timeout).build()
                .send(HttpRequest.newBuilder(uri).timeout(timeout).GET().build(), HttpResponse.BodyHandlers.ofString());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot read " + uri + " (is the master's --admin-port " + admin + "?)", ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while reading " + uri, ex);
        }
        if (response.statusCode() != 200)
        {
            throw new UncheckedIOException("GET " + uri + " answered " + response.statusCode(),
                new IOException(response.body().trim()));
        }
        return parseJson(response.body(), uri.toString());
    }

    /** JSON is YAML: the parser the config files use reads the summary too. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> parseJson(final String json, final String source)
    {
        try
        {
            final Object parsed = new Yaml(new SafeConstructor(new LoaderOptions())).load(json);
            if (parsed instanceof Map)
            {
                return (Map<String, Object>)parsed;
            }
        }
        catch (final YAMLException ex)
        {
            throw new UncheckedIOException("bad JSON from " + source, new IOException(ex.getMessage()));
        }
        throw new UncheckedIOException("bad JSON from " + source, new IOException("not a JSON object"));
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(final Map<String, Object> parent, final String name)
    {
        final Object value = parent.get(name);
        return value instanceof Map ? (Map<String, Object>)value : Map.of();
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(final Map<String, Object> parent, final String name)
    {
        final Object value = parent.get(name);
        final List<Map<String, Object>> items = new ArrayList<>();
        if (value instanceof List)
        {
            for (final Object item : (List<Object>)value)
            {
                if (item instanceof Map)
                {
                    items.add((Map<String, Object>)item);
                }
            }
        }
        return items;
    }

    private static long number(final Map<String, Object> parent, final String name)
    {
        final Object value = parent.get(name);
        return value instanceof Number ? ((Number)value).longValue() : 0;
    }

    private static String text(final Map<String, Object> parent, final String name)
    {
        final Object value = parent.get(name);
        return value == null ? "-" : String.valueOf(value);
    }

    private static <T> List<T> sorted(final List<T> items, final Function<T, String> name)
    {
        final List<T> copy = new ArrayList<>(items);
        copy.sort(Comparator.comparing(name));
        return copy;
    }

    static String percent(final long part, final long whole)
    {
        return whole <= 0 ? "-" : String.format(Locale.ROOT, "%.1f%%", 100.0 * part / whole);
    }
}
