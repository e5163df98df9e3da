package io.granary.cli;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;

class MasterTimesTest
{
    private final MeterRegistry registry = new SimpleMeterRegistry();

    private Timer timer(final String method, final String transport)
    {
        return Timer.builder(MasterTimes.TIMER).tags("method", method, "transport", transport).register(registry);
    }

    @Test
    void shouldCountOnlyTheCallsServedSinceTheFirstReadingSummedOverTransports()
    {
        timer("BatchPutStart", "lookup").record(5, TimeUnit.MILLISECONDS); // before: not the phase's
        final MasterTimes before = MasterTimes.of(registry);

        timer("BatchPutStart", "lookup").record(300, TimeUnit.MICROSECONDS);
        timer("BatchPutStart", "lookup").record(500, TimeUnit.MICROSECONDS);
        timer("BatchPutStart", "grpc").record(400, TimeUnit.MICROSECONDS);
        timer("BatchPutEnd", "lookup").record(100, TimeUnit.MICROSECONDS);
        timer("GetReplicaList", "lookup"); // registered, never called in the phase
        final MasterTimes phase = MasterTimes.of(registry).since(before);

        assertThat(phase.calls("BatchPutStart")).isEqualTo(3);
        assertThat(phase.meanNanos("BatchPutStart")).isCloseTo(400_000.0, offset(1.0));
        assertThat(phase.calls("BatchPutEnd")).isEqualTo(1);
        assertThat(phase.calls("GetReplicaList")).isZero();
        assertThat(phase.totalNanos()).isCloseTo(1_300_000.0, offset(1.0));
    }

    @Test
    void shouldDescribeTheCallsMostTimeWentToFirstAndTheirShareOfThePhase()
    {
        final MasterTimes before = MasterTimes.of(registry);
        timer("BatchPutEnd", "lookup").record(100, TimeUnit.MICROSECONDS);
        timer("BatchPutStart", "lookup").record(300, TimeUnit.MICROSECONDS);
        timer("BatchPutStart", "lookup").record(500, TimeUnit.MICROSECONDS);

        final String line = MasterTimes.of(registry).since(before).describe("4k put", 4_500_000L);

        assertThat(line).isEqualTo("master: 4k put: BatchPutStart 2 x 400 us, BatchPutEnd 1 x 100 us; 0.001 s serving " +
            "them = 20.0 % of the phase's 0.005 s (handling only: request read to reply built)");
    }

    @Test
    void shouldSayWhenThePhaseMadeNoCalls()
    {
        timer("PutStart", "lookup").record(1, TimeUnit.MILLISECONDS);
        final MasterTimes before = MasterTimes.of(registry);

        assertThat(MasterTimes.of(registry).since(before).describe("1m get", 1_000_000L))
            .isEqualTo("master: 1m get: no calls recorded");
    }

    @Test
    void shouldReadTheTimersFromPrometheusTextSummedOverTransports()
    {
        final String text = String.join("\n",
            "# HELP granary_master_rpc_seconds Master calls served",
            "# TYPE granary_master_rpc_seconds histogram",
            "granary_master_rpc_seconds_bucket{method=\"PutStart\",transport=\"lookup\",le=\"0.001\"} 3",
            "granary_master_rpc_seconds_count{method=\"PutStart\",transport=\"lookup\"} 3",
            "granary_master_rpc_seconds_sum{method=\"PutStart\",transport=\"lookup\"} 0.000090",
            "granary_master_rpc_seconds_count{transport=\"grpc\",method=\"PutStart\"} 1",
            "granary_master_rpc_seconds_sum{transport=\"grpc\",method=\"PutStart\"} 0.000030",
            "granary_master_rpc_seconds_count{method=\"PutEnd\",transport=\"lookup\"} NaN",
            "granary_master_rpc_seconds_count{transport=\"lookup\"} 7",
            "granary_master_rpc_failures_total{method=\"PutStart\",transport=\"lookup\"} 2",
            "granary_master_rpc_seconds_max{method=\"PutStart\",transport=\"lookup\"} 0.5");

        final MasterTimes times = MasterTimes.parse(text);

        assertThat(times.calls("PutStart")).isEqualTo(4);
        assertThat(times.meanNanos("PutStart")).isCloseTo(30_000.0, offset(1.0));
        assertThat(times.calls("PutEnd")).as("a value that is not a number is skipped").isZero();
        assertThat(times.totalNanos()).isCloseTo(120_000.0, offset(1.0));
        assertThat(MasterTimes.parse("").describe("4k put", 1)).isEqualTo("master: 4k put: no calls recorded");
    }
}
