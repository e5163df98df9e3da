package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.transfer.AdmissionStats;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransferEngine;
import io.granary.transfer.tcp.CallerDrivenEngine;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * A client's metrics in the embedding application's {@link MeterRegistry}: per-operation latency, value bytes moved,
 * misses and failed keys, and the transfer engine's admission refusals. Every meter is registered when the client
 * connects, so recording is an array read and an atomic add. Thread safe.
 */
final class ClientMetrics
{
    /** The operations measured; the tag value is the API method's name. */
    enum Op
    {
        PUT("put"), GET("get"), GET_INTO("getInto"), SIZE("size"), EXISTS("exists"), REMOVE("remove"),
        REMOVE_BY_REGEX("removeByRegex"), REMOVE_ALL("removeAll"), PUT_BATCH("putBatch"), GET_BATCH("getBatch"),
        EXISTS_BATCH("existsBatch"), PROBE_BATCH("probeBatch"), LIST_KEYS("listKeys"), CLUSTER_STATUS("clusterStatus");

        final String tag;

        Op(final String tag)
        {
            this.tag = tag;
        }
    }

    static final Duration[] LATENCY_BUCKETS = {
        Duration.ofNanos(100_000), Duration.ofNanos(250_000), Duration.ofNanos(500_000), Duration.ofMillis(1),
        Duration.ofMillis(2), Duration.ofMillis(5), Duration.ofMillis(10), Duration.ofMillis(25),
        Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofSeconds(1),
        Duration.ofSeconds(5)};

    private static final String REJECTED_HELP = "Transfers the engine refused with UNAVAILABLE_IN_CURRENT_STATUS: " +
        "queue_full at once (queue and pending admissions full), timeout after waiting the admission timeout";

    private final MeterRegistry registry;
    private final Timer[] latency;
    private final Counter[] failedKeys;
    private final Counter[] misses;
    private final Counter bytesWritten;
    private final Counter bytesRead;

    ClientMetrics(final MeterRegistry registry, final String tenant)
    {
        this.registry = registry;
        final Op[] ops = Op.values();
        latency = new Timer[ops.length];
        failedKeys = new Counter[ops.length];
        misses = new Counter[ops.length];
        for (final Op op : ops)
        {
            latency[op.ordinal()] = Timer.builder("granary.client.op")
                .description("Client calls, by operation: latency from call to result (a batch is one call)")
                .tags("op", op.tag, "tenant", tenant)
                .serviceLevelObjectives(LATENCY_BUCKETS)
                .register(registry);
            failedKeys[op.ordinal()] = Counter.builder("granary.client.failed.keys")
                .description("Keys whose operation failed (a failed single-key call counts 1, a batch its failed keys)")
                .tags("op", op.tag, "tenant", tenant)
                .register(registry);
            misses[op.ordinal()] = Counter.builder("granary.client.misses")
                .description("Keys read that were not found (OBJECT_NOT_FOUND), not counted as failures")
                .tags("op", op.tag, "tenant", tenant)
                .register(registry);
        }
        bytesWritten = Counter.builder("granary.client.bytes").description("Value bytes stored or read")
            .baseUnit("bytes").tags("direction", "written", "tenant", tenant).register(registry);
        bytesRead = Counter.builder("granary.client.bytes").description("Value bytes stored or read")
            .baseUnit("bytes").tags("direction", "read", "tenant", tenant).register(registry);
    }

    /** READs completed one-sided over RDMA (transport rdma only). */
    private static final String RDMA_READS = "granary.client.transfer.rdma.reads";
    private static final String RDMA_READS_HELP = "READs completed one-sided over RDMA (the rest went over TCP)";
    private static final String LOCAL_TRANSFERS = "granary.client.transfer.local";
    private static final String LOCAL_TRANSFERS_HELP = "Transfers to nodes on this host that moved with " +
        "process_vm_readv/writev (local) or could have and took TCP (tcp)";

    /** Exposes the engine's admission refusals (its own counters, read at scrape time) when it keeps them. */
    void bindEngine(final TransferEngine engine, final String tenant)
    {
        if (engine instanceof AdmissionStats)
        {
            final AdmissionStats stats = (AdmissionStats)engine;
            FunctionCounter.builder("granary.client.transfer.admission.rejected", stats,
                    AdmissionStats::rejectedQueueFull)
                .description(REJECTED_HELP).tags("reason", "queue_full", "tenant", tenant).register(registry);
            FunctionCounter.builder("granary.client.transfer.admission.rejected", stats,
                    AdmissionStats::rejectedAdmissionTimeout)
                .description(REJECTED_HELP).tags("reason", "timeout", "tenant", tenant).register(registry);
            FunctionCounter.builder("granary.client.transfer.admitted", stats, AdmissionStats::admittedTransfers)
                .description("Transfers admitted to a storage node's queue").tags("tenant", tenant).register(registry);
        }
        if (engine instanceof CallerDrivenEngine)
        {
            FunctionCounter.builder("granary.client.transfer.caller.driven", (CallerDrivenEngine)engine,
                    CallerDrivenEngine::drivenTransfers)
                .description("Transfers the calling thread carried out itself (synchronous calls)")
                .tags("tenant", tenant).register(registry);
        }
        else if (engine instanceof NativeTransferEngine)
        {
            final NativeTransferEngine natives = (NativeTransferEngine)engine;
            FunctionCounter.builder("granary.client.transfer.caller.driven", natives,
                    NativeTransferEngine::drivenTransfers)
                .description("Transfers the calling thread carried out itself (synchronous calls)")
                .tags("tenant", tenant).register(registry);
            FunctionCounter.builder(LOCAL_TRANSFERS, natives, NativeTransferEngine::localTransfers)
                .description(LOCAL_TRANSFERS_HELP).tags("outcome", "local", "tenant", tenant).register(registry);
            FunctionCounter.builder(LOCAL_TRANSFERS, natives, NativeTransferEngine::localFallbacks)
                .description(LOCAL_TRANSFERS_HELP).tags("outcome", "tcp", "tenant", tenant).register(registry);
            if (natives.kind() == TransportKind.RDMA)
            {
                FunctionCounter.builder(RDMA_READS, natives, NativeTransferEngine::rdmaReads)
                    .description(RDMA_READS_HELP).tags("outcome", "ok", "tenant", tenant).register(registry);
                FunctionCounter.builder(RDMA_READS, natives, NativeTransferEngine::rdmaFailedReads)
                    .description(RDMA_READS_HELP).tags("outcome", "failed", "tenant", tenant).register(registry);
            }
        }
    }

    private static final String LEASE_READS = "granary.client.lease.reads";
    private static final String LEASE_READS_HELP =
        "Keys readBatchInto read with the replica list of their probe (with_list) or looked up again (looked_up)";

    /** Exposes how readBatchInto's leases were read (the client's own counters, read at scrape time). */
    void bindLeaseReads(final GranaryClientImpl client, final String tenant)
    {
        FunctionCounter.builder(LEASE_READS, client, GranaryClientImpl::leaseReadsWithList)
            .description(LEASE_READS_HELP).tags("outcome", "with_list", "tenant", tenant).register(registry);
        FunctionCounter.builder(LEASE_READS, client, GranaryClientImpl::leaseReadsLookedUp)
            .description(LEASE_READS_HELP).tags("outcome", "looked_up", "tenant", tenant).register(registry);
    }

    /** A call of {@code op} that returned after starting at {@code startNs}. */
    void succeeded(final Op op, final long startNs)
    {
        latency[op.ordinal()].record(System.nanoTime() - startNs, TimeUnit.NANOSECONDS);
    }

    /** A call of {@code op} that threw: a miss for OBJECT_NOT_FOUND on a read, else one failed key. */
    void failed(final Op op, final long startNs, final Throwable failure)
    {
        latency[op.ordinal()].record(System.nanoTime() - startNs, TimeUnit.NANOSECONDS);
        final Throwable cause = unwrap(failure);
        if (cause instanceof GranaryException && ((GranaryException)cause).code() == ErrorCode.OBJECT_NOT_FOUND &&
            isRead(op))
        {
            misses[op.ordinal()].increment();
        }
        else
        {
            failedKeys[op.ordinal()].increment();
        }
    }

    /** Counts the failed keys and misses of a batch's results. */
    void batchResults(final Op op, final List<? extends OpResult<?>> results)
    {
        int failed = 0;
        int missed = 0;
        for (int i = 0, n = results.size(); i < n; i++)
        {
            final OpResult<?> r = results.get(i);
            if (!r.ok())
            {
                if (r.error() == ErrorCode.OBJECT_NOT_FOUND && isRead(op))
                {
                    missed++;
                }
                else
                {
                    failed++;
                }
            }
        }
        if (failed > 0)
        {
            failedKeys[op.ordinal()].increment(failed);
        }
        if (missed > 0)
        {
            misses[op.ordinal()].increment(missed);
        }
    }

    void written(final long bytes)
    {
        bytesWritten.increment(bytes);
    }

    void read(final long bytes)
    {
        bytesRead.increment(bytes);
    }

    private static boolean isRead(final Op op)
    {
        return op == Op.GET || op == Op.GET_INTO || op == Op.SIZE || op == Op.GET_BATCH;
    }

    private static Throwable unwrap(final Throwable failure)
    {
        Throwable t = failure;
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null)
        {
            t = t.getCause();
        }
        return t;
    }
}
