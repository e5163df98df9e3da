package io.granary.cli;

import io.granary.client.ClusterStatus;
import io.granary.client.GranaryClient;
import io.granary.common.Units;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/** {@code granary stat}: the cluster as the master sees it — nodes, segments, objects, capacity. */
@Command(
    name = "stat",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = "Show the cluster as the master sees it: storage nodes, segments (size, used, allocations, "
        + "largest free extent), objects (all tenants) and capacity.")
final class StatCommand extends ClientCommand
{
    @Override
    int run(final GranaryClient client, final PrintWriter out)
    {
        print(client.clusterStatus(), clientOptions.master, out);
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

        out.println("objects: " + status.objects());
        out.println("capacity: " + Units.formatBytes(status.capacityBytes()) + ", used " +
            Units.formatBytes(status.allocatedBytes()) + " (" +
            percent(status.allocatedBytes(), status.capacityBytes()) + ")");
        final ClusterStatus.Rebuild r = status.rebuild();
        if (!r.masterId().isEmpty())
        {
            out.println("master: id " + r.masterId() + ", up " + Converters.humanDuration(r.uptimeMs()) +
                (r.ready() ? ", ready" : ", not ready") + "; rebuilt from node ledgers: " + r.objectsRebuilt() +
                " objects, " + r.replicasRebuilt() + " replicas from " + r.ledgerReports() + " segment report(s), " +
                r.entriesRejected() + " entries refused");
        }
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
