package io.granary.node.admin;

import io.granary.node.master.MasterLink;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.node.transfer.TransferServer;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;

import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The storage node's metrics over the counters its transfer server and master link already keep (LongAdders read
 * at scrape time, nothing counted twice), plus segment and JVM gauges. The transfer latency histograms are
 * {@link io.granary.node.transfer.TransferMetrics}. Register once; close with the node.
 */
public final class NodeMetrics implements AutoCloseable
{
    private final JvmGcMetrics gcMetrics = new JvmGcMetrics();
    /** Held here: meters keep only weak references to what they read. */
    private final Supplier<MasterLink> link;

    /** @param link supplies the master link, which the node creates after its transfer server. */
    public NodeMetrics(
        final MeterRegistry meters,
        final TransferServer server,
        final SegmentRegistry segments,
        final Supplier<MasterLink> link)
    {
        this.link = link;
        counter(meters, "granary.node.transfer.bytes", "Bytes received by the transfer server (headers and payloads)",
            server, TransferServer::bytesIn, "direction", "in");
        counter(meters, "granary.node.transfer.bytes", "Bytes sent by the transfer server (headers and payloads)",
            server, TransferServer::bytesOut, "direction", "out");
        counter(meters, "granary.node.transfer.requests", "Transfer frames served (READ, WRITE, PING), refused ones too",
            server, TransferServer::requests);
        counter(meters, "granary.node.transfer.rejected",
            "Transfer requests refused before any byte moved (unknown segment, range outside it)", server,
            TransferServer::errorResponses);
        counter(meters, "granary.node.transfer.protocol.errors",
            "Connections closed because a frame could not be decoded", server, TransferServer::protocolErrors);
        counter(meters, "granary.node.transfer.backpressure.pauses",
            "Times a connection stopped reading because its responses were not leaving fast enough", server,
            TransferServer::backpressurePauses);
        counter(meters, "granary.node.transfer.connections.opened", "Client connections accepted", server,
            TransferServer::connectionsOpened);
        Gauge.builder("granary.node.transfer.connections", server, TransferServer::openConnections)
            .description("Client connections open").register(meters);
        Gauge.builder("granary.node.transfer.queued.bytes", server, TransferServer::queuedBytes)
            .description("Response bytes queued on connections, not yet written to their sockets")
            .baseUnit("bytes").register(meters);

        Gauge.builder("granary.node.segments", segments, s -> s.segments().size())
            .description("Segments this node holds").register(meters);
        Gauge.builder("granary.node.segment.capacity.bytes", segments, NodeMetrics::capacityBytes)
            .description("Bytes of all segments this node holds").baseUnit("bytes").register(meters);
        Gauge.builder("granary.node.segment.huge.page.bytes", segments, NodeMetrics::hugePageBytes)
            .description("Bytes of all segments backed by transparent huge pages now (read from /proc/self/smaps)")
            .baseUnit("bytes").register(meters);
        Gauge.builder("granary.node.registered", link, l -> l.get() != null && l.get().isRegistered() ? 1 : 0)
            .description("1 while the master has every segment of this node mounted, else 0").register(meters);
        counter(meters, "granary.node.master.mounts", "Segment mounts acknowledged by the master", link,
            l -> l.get() == null ? 0 : l.get().mounts());
        counter(meters, "granary.node.master.heartbeats", "Heartbeats acknowledged by the master", link,
            l -> l.get() == null ? 0 : l.get().heartbeats());

        counter(meters, "granary.node.master.registrations",
            "Registrations completed: every segment mounted and its ledger reported", link,
            l -> l.get() == null ? 0 : l.get().registrations());
        counter(meters, "granary.node.master.rekeys",
            "Times the segments got fresh ids because the master had forgotten this node", link,
            l -> l.get() == null ? 0 : l.get().rekeys());
        counter(meters, "granary.node.ledger.entries.reported", "Ledger entries sent to the master in reports", link,
            l -> l.get() == null ? 0 : l.get().entriesReported());
        counter(meters, "granary.node.ledger.entries.rejected",
            "Reported ledger entries the master did not adopt (dropped from the ledger)", link,
            l -> l.get() == null ? 0 : l.get().entriesRejected());
        counter(meters, "granary.node.ledger.discards",
            "Segment ledgers cleared because the master had expired this node", link,
            l -> l.get() == null ? 0 : l.get().ledgersDiscarded());
        counter(meters, "granary.node.ledger.frees", "Ledger entries dropped because the master freed their extent",
            link, l -> l.get() == null ? 0 : l.get().freesApplied());
        counter(meters, "granary.node.ledger.commits", "COMMIT frames recorded in the segments' ledgers", segments,
            NodeMetrics::ledgerCommits);
        Gauge.builder("granary.node.ledger.entries", segments, NodeMetrics::ledgerEntries)
            .description("Entries in the segments' ledgers: extents holding a committed value").register(meters);
        counter(meters, "granary.node.ledger.refusals",
            "COMMIT frames refused with NO_AVAILABLE_HANDLE because the ledgers were at their heap budget", segments,
            s -> s.ledgerBudget().refusals());
        Gauge.builder("granary.node.ledger.heap", segments, s -> s.ledgerBudget().usedBytes())
            .description("Heap the segments' ledgers are counted as holding").baseUnit("bytes").register(meters);
        Gauge.builder("granary.node.ledger.budget", segments, s -> s.ledgerBudget().limitBytes())
            .description("Heap the segments' ledgers may hold (70 % of the JVM's max heap); COMMITs beyond it are refused")
            .baseUnit("bytes").register(meters);

        new JvmMemoryMetrics().bindTo(meters);
        new JvmThreadMetrics().bindTo(meters);
        new ProcessorMetrics().bindTo(meters);
        new UptimeMetrics().bindTo(meters);
        gcMetrics.bindTo(meters);
    }

    private static double ledgerCommits(final SegmentRegistry segments)
    {
        long commits = 0;
        for (final Segment segment : segments.segments())
        {
            commits += segment.ledger().commits();
        }
        return commits;
    }

    private static double ledgerEntries(final SegmentRegistry segments)
    {
        long entries = 0;
        for (final Segment segment : segments.segments())
        {
            entries += segment.ledger().size();
        }
        return entries;
    }

    private static double hugePageBytes(final SegmentRegistry segments)
    {
        return java.util.Arrays.stream(Segment.hugePageBytes(segments.segments())).sum();
    }

    private static double capacityBytes(final SegmentRegistry segments)
    {
        return segments.segments().stream().mapToLong(Segment::sizeBytes).sum();
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
