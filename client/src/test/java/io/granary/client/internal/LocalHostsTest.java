package io.granary.client.internal;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class LocalHostsTest
{
    @Test
    void shouldTakeTheHostPartOfAnEndpoint()
    {
        assertThat(LocalHosts.hostOf("10.0.0.1:7000")).isEqualTo("10.0.0.1");
        assertThat(LocalHosts.hostOf("node-1.example:7000")).isEqualTo("node-1.example");
        assertThat(LocalHosts.hostOf("[fe80::1]:7000")).isEqualTo("fe80::1");
        assertThat(LocalHosts.hostOf("fe80::1")).isEqualTo("fe80::1");
        assertThat(LocalHosts.hostOf("plainhost")).isEqualTo("plainhost");
    }

    @Test
    void shouldMatchOnlyTheConfiguredHost()
    {
        final LocalHosts hosts = LocalHosts.of("GPU-Box-7");

        assertThat(hosts.isLocal("gpu-box-7:7000")).isTrue();
        assertThat(hosts.isLocal("gpu-box-8:7000")).isFalse();
        assertThat(hosts.isLocal("127.0.0.1:7000")).isFalse();
    }

    @Test
    void shouldTreatLoopbackAsThisMachineByDefault()
    {
        final LocalHosts hosts = LocalHosts.ofThisMachine();

        assertThat(hosts.isLocal("127.0.0.1:7000")).isTrue();
        assertThat(hosts.isLocal("localhost:7000")).isTrue();
        assertThat(hosts.isLocal("[::1]:7000")).isTrue();
        assertThat(hosts.isLocal("192.0.2.55:7000")).isFalse(); // TEST-NET-1, never assigned
    }
}
