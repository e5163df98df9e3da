package io.granary.client;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransportKind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ClientConfigTest
{
    private static ClientConfig.Builder valid()
    {
        return ClientConfig.builder().masterAddress("127.0.0.1:50051");
    }

    @Test
    void shouldApplyDefaults()
    {
        final ClientConfig config = valid().build();

        assertThat(config.masterAddress()).isEqualTo("127.0.0.1:50051");
        assertThat(config.tenant()).isEqualTo("default");
        assertThat(config.transport()).isEqualTo(TransportKind.AUTO);
        assertThat(config.rpcTimeout()).isEqualTo(Duration.ofSeconds(5));
        assertThat(config.lanesPerPeer()).isEqualTo(TransferConfig.DEFAULT_LANES_PER_PEER);
        assertThat(config.sliceBytes()).isEqualTo(TransferConfig.DEFAULT_SLICE_BYTES);
        assertThat(config.maxVectorEntries()).isEqualTo(TransferConfig.DEFAULT_MAX_VECTOR_ENTRIES);
        assertThat(config.maxQueuedTransfersPerPeer()).isEqualTo(TransferConfig.DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER);
        assertThat(config.maxPendingAdmissionsPerPeer())
            .isEqualTo(TransferConfig.DEFAULT_MAX_PENDING_ADMISSIONS_PER_PEER);
        assertThat(config.admissionTimeout().toMillis()).isEqualTo(TransferConfig.DEFAULT_ADMISSION_TIMEOUT_MS);
        assertThat(config.transferTimeout().toMillis()).isEqualTo(TransferConfig.DEFAULT_TRANSFER_TIMEOUT_MS);
        assertThat(config.connectTimeout().toMillis()).isEqualTo(TransferConfig.DEFAULT_CONNECT_TIMEOUT_MS);
        assertThat(config.ioThreads()).isEqualTo(new TransferConfig().ioThreads());
        assertThat(config.localHost()).isNull();
        assertThat(config.clientId()).isNotBlank();
        assertThat(config.checksums()).isTrue();
    }

    @Test
    void shouldKeepTheChecksumsSwitchThroughToBuilder()
    {
        final ClientConfig off = valid().checksums(false).build();

        assertThat(off.checksums()).isFalse();
        assertThat(off.toBuilder().build()).isEqualTo(off);
        assertThat(off.toBuilder().checksums(true).build()).isNotEqualTo(off);
        assertThat(off.toString()).contains("checksums=false");
    }

    @Test
    void shouldGiveEachClientItsOwnIdUnlessOneIsSet()
    {
        assertThat(valid().build().clientId()).isNotEqualTo(valid().build().clientId());
        assertThat(valid().clientId("engine-3").build().clientId()).isEqualTo("engine-3");
        final ClientConfig config = valid().maxPendingAdmissionsPerPeer(7).admissionTimeout(Duration.ofSeconds(3))
            .build();
        assertThat(config.toBuilder().build()).isEqualTo(config);
        assertThat(config.toBuilder().admissionTimeout(Duration.ofSeconds(4)).build()).isNotEqualTo(config);
    }

    @Test
    void shouldMapTransferKnobsOntoTransferConfig()
    {
        final TransferConfig transfer = valid()
            .lanesPerPeer(4).sliceBytes(65536).maxVectorEntries(7)
            .transferTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofMillis(500))
            .ioThreads(3).maxQueuedTransfersPerPeer(128)
            .maxPendingAdmissionsPerPeer(0).admissionTimeout(Duration.ofMillis(250))
            .build().transferConfig();

        assertThat(transfer.lanesPerPeer()).isEqualTo(4);
        assertThat(transfer.sliceBytes()).isEqualTo(65536);
        assertThat(transfer.maxVectorEntries()).isEqualTo(7);
        assertThat(transfer.transferTimeoutMs()).isEqualTo(2000);
        assertThat(transfer.connectTimeoutMs()).isEqualTo(500);
        assertThat(transfer.ioThreads()).isEqualTo(3);
        assertThat(transfer.maxQueuedTransfersPerPeer()).isEqualTo(128);
        assertThat(transfer.maxPendingAdmissionsPerPeer()).isZero();
        assertThat(transfer.admissionTimeoutMs()).isEqualTo(250);
    }

    @Test
    void shouldTreatAnEmptyTenantAsTheDefault()
    {
        assertThat(valid().tenant("").build().tenant()).isEqualTo("default");
        assertThat(valid().tenant(null).build().tenant()).isEqualTo("default");
        assertThat(valid().tenant("team-a.v2").build().tenant()).isEqualTo("team-a.v2");
    }

    @ParameterizedTest
    @ValueSource(strings = {"localhost:1", "10.0.0.1:65535", "master.example.com:50051", "[::1]:50051"})
    void shouldAcceptHostAndPort(final String address)
    {
        assertThat(valid().masterAddress(address).build().masterAddress()).isEqualTo(address);
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "localhost", "localhost:", ":50051", "host:0", "host:65536", "host:http",
        "::1:50051", "a b:1", "http://host:1"})
    void shouldRefuseABadMasterAddress(final String address)
    {
        assertThatThrownBy(() -> valid().masterAddress(address).build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("masterAddress");
    }

    @Test
    void shouldRequireAMasterAddress()
    {
        assertThatThrownBy(() -> ClientConfig.builder().build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("masterAddress");
    }

    @Test
    void shouldRefuseABadTenant()
    {
        assertThatThrownBy(() -> valid().tenant("no spaces").build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tenant");
        assertThatThrownBy(() -> valid().tenant("x".repeat(65)).build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tenant");
    }

    @Test
    void shouldNameTheBadSetting()
    {
        assertThatThrownBy(() -> valid().rpcTimeout(Duration.ZERO).build()).hasMessageContaining("rpcTimeout");
        assertThatThrownBy(() -> valid().rpcTimeout(null).build()).hasMessageContaining("rpcTimeout");
        assertThatThrownBy(() -> valid().transferTimeout(Duration.ofMillis(-1)).build())
            .hasMessageContaining("transferTimeout");
        assertThatThrownBy(() -> valid().connectTimeout(Duration.ofNanos(10)).build())
            .hasMessageContaining("connectTimeout");
        assertThatThrownBy(() -> valid().lanesPerPeer(0).build()).hasMessageContaining("lanesPerPeer");
        assertThatThrownBy(() -> valid().sliceBytes(100).build()).hasMessageContaining("sliceBytes");
        assertThatThrownBy(() -> valid().maxVectorEntries(0).build()).hasMessageContaining("maxVectorEntries");
        assertThatThrownBy(() -> valid().maxVectorEntries(1025).build()).hasMessageContaining("maxVectorEntries");
        assertThatThrownBy(() -> valid().ioThreads(0).build()).hasMessageContaining("ioThreads");
        assertThatThrownBy(() -> valid().maxQueuedTransfersPerPeer(0).build())
            .hasMessageContaining("maxQueuedTransfersPerPeer");
        assertThatThrownBy(() -> valid().maxPendingAdmissionsPerPeer(-1).build())
            .hasMessageContaining("maxPendingAdmissionsPerPeer");
        assertThatThrownBy(() -> valid().admissionTimeout(Duration.ZERO).build())
            .hasMessageContaining("admissionTimeout");
        assertThatThrownBy(() -> valid().admissionTimeout(null).build()).hasMessageContaining("admissionTimeout");
        assertThatThrownBy(() -> valid().admissionTimeout(Duration.ofMinutes(11)).build())
            .hasMessageContaining("admissionTimeoutMs must be in 1..600000");
        assertThatThrownBy(() -> valid().transport(null).build()).hasMessageContaining("transport");
        assertThatThrownBy(() -> valid().clientId(" ").build()).hasMessageContaining("clientId");
        assertThatThrownBy(() -> valid().localHost("host:7000").build()).hasMessageContaining("localHost");
    }

    @Test
    void shouldAcceptALocalHostNameOrAddress()
    {
        assertThat(valid().localHost("gpu-box-7").build().localHost()).isEqualTo("gpu-box-7");
        assertThat(valid().localHost("fe80::1").build().localHost()).isEqualTo("fe80::1");
    }
}
