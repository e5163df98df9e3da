package io.granary.master.rpc;

import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.CountResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.HeartbeatResponse;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.PutStartResponse;
import io.granary.proto.ServerInfoResponse;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Per-call metrics of one master transport ("grpc" or "lookup"): a latency histogram (whose count is the number
 * of requests) and a failure counter per {@link MasterRpc}, all registered up front so that recording is an array
 * index and an atomic add. A failure is a call that threw, or whose reply carries a whole-request code other than
 * OK (as Mooncake counts them; per-key codes of batches are not failures). Thread safe.
 */
public final class RpcMetrics
{
    /** Records nothing: for transports built without a registry (tests). */
    public static final RpcMetrics NONE = new RpcMetrics();

    /** Histogram buckets of the call latency: the master's calls take tens of microseconds to milliseconds. */
    static final Duration[] LATENCY_BUCKETS = {
        Duration.ofNanos(50_000), Duration.ofNanos(100_000), Duration.ofNanos(250_000), Duration.ofNanos(500_000),
        Duration.ofMillis(1), Duration.ofMillis(2), Duration.ofMillis(5), Duration.ofMillis(10),
        Duration.ofMillis(25), Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250),
        Duration.ofSeconds(1)};

    private final Timer[] latency;
    private final Counter[] failures;

    private RpcMetrics()
    {
        latency = null;
        failures = null;
    }

    /** Registers {@code granary.master.rpc} and {@code granary.master.rpc.failures} for every call of a transport. */
    public RpcMetrics(final MeterRegistry registry, final String transport)
    {
        final MasterRpc[] rpcs = MasterRpc.values();
        latency = new Timer[rpcs.length];
        failures = new Counter[rpcs.length];
        for (final MasterRpc rpc : rpcs)
        {
            latency[rpc.ordinal()] = Timer.builder("granary.master.rpc")
                .description("Master calls served, by call and transport: latency from request decoded to reply built")
                .tags("method", rpc.rpcName(), "transport", transport)
                .serviceLevelObjectives(LATENCY_BUCKETS)
                .register(registry);
            failures[rpc.ordinal()] = Counter.builder("granary.master.rpc.failures")
                .description("Master calls that threw or answered a whole-request code other than OK")
                .tags("method", rpc.rpcName(), "transport", transport)
                .register(registry);
        }
    }

    /** Records one call that started at {@code startNs} (System.nanoTime) and answered {@code response}. */
    public void record(final MasterRpc rpc, final long startNs, final Object response)
    {
        if (latency == null)
        {
            return;
        }
        latency[rpc.ordinal()].record(System.nanoTime() - startNs, TimeUnit.NANOSECONDS);
        if (codeOf(response) != 0)
        {
            failures[rpc.ordinal()].increment();
        }
    }

    /** Records one call that threw instead of answering. */
    public void recordFailure(final MasterRpc rpc, final long startNs)
    {
        if (latency == null)
        {
            return;
        }
        latency[rpc.ordinal()].record(System.nanoTime() - startNs, TimeUnit.NANOSECONDS);
        failures[rpc.ordinal()].increment();
    }

    /** The whole-request code of a master reply (every reply carries it as field 1); 0 for anything else. */
    static int codeOf(final Object response)
    {
        // Hottest replies first: this runs once per call.
        if (response instanceof LookupServer.WireAnswer)
        {
            return ((LookupServer.WireAnswer)response).code();
        }
        if (response instanceof BatchExistKeyResponse)
        {
            return ((BatchExistKeyResponse)response).getCode();
        }
        if (response instanceof BatchProbeKeyResponse)
        {
            return ((BatchProbeKeyResponse)response).getCode();
        }
        if (response instanceof GetReplicaListResponse)
        {
            return ((GetReplicaListResponse)response).getCode();
        }
        if (response instanceof PutStartResponse)
        {
            return ((PutStartResponse)response).getCode();
        }
        if (response instanceof CodeResponse)
        {
            return ((CodeResponse)response).getCode();
        }
        if (response instanceof BatchGetReplicaListResponse)
        {
            return ((BatchGetReplicaListResponse)response).getCode();
        }
        if (response instanceof BatchPutStartResponse)
        {
            return ((BatchPutStartResponse)response).getCode();
        }
        if (response instanceof BatchCodeResponse)
        {
            return ((BatchCodeResponse)response).getCode();
        }
        if (response instanceof ExistKeyResponse)
        {
            return ((ExistKeyResponse)response).getCode();
        }
        if (response instanceof HeartbeatResponse)
        {
            return ((HeartbeatResponse)response).getCode();
        }
        if (response instanceof CountResponse)
        {
            return ((CountResponse)response).getCode();
        }
        if (response instanceof ListKeysResponse)
        {
            return ((ListKeysResponse)response).getCode();
        }
        if (response instanceof MountSegmentResponse)
        {
            return ((MountSegmentResponse)response).getCode();
        }
        if (response instanceof ServerInfoResponse)
        {
            return ((ServerInfoResponse)response).getCode();
        }
        if (response instanceof ClusterStatusResponse)
        {
            return ((ClusterStatusResponse)response).getCode();
        }
        return 0;
    }
}
