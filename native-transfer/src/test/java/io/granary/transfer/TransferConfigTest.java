package io.granary.transfer;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TransferConfigTest
{
    @Test
    void shouldStartFromTheDocumentedDefaults()
    {
        final TransferConfig config = new TransferConfig().conclude();

        assertThat(config.lanesPerPeer()).isEqualTo(2);
        assertThat(config.sliceBytes()).isEqualTo(512 << 10);
        assertThat(config.maxQueuedTransfersPerPeer()).isEqualTo(4096);
        assertThat(config.maxPendingAdmissionsPerPeer()).isEqualTo(1024);
        assertThat(config.admissionTimeoutMs()).isEqualTo(1_000);
        assertThat(config.transferTimeoutMs()).isEqualTo(10_000);
        assertThat(config.localTransfers()).isTrue();
        assertThat(config.localMinBytes()).isEqualTo(64 << 10);
    }

    @Test
    void shouldAcceptTheLimitsOfEveryQueueSetting()
    {
        final TransferConfig lowest = new TransferConfig()
            .lanesPerPeer(1).maxQueuedTransfersPerPeer(1).maxPendingAdmissionsPerPeer(0).admissionTimeoutMs(1);
        final TransferConfig highest = new TransferConfig()
            .lanesPerPeer(TransferConfig.MAX_LANES_PER_PEER)
            .maxQueuedTransfersPerPeer(TransferConfig.MAX_QUEUE_LIMIT_PER_PEER)
            .maxPendingAdmissionsPerPeer(TransferConfig.MAX_QUEUE_LIMIT_PER_PEER)
            .admissionTimeoutMs(TransferConfig.MAX_ADMISSION_TIMEOUT_MS);

        assertThat(lowest.conclude().maxPendingAdmissionsPerPeer()).isZero();
        assertThat(highest.conclude().admissionTimeoutMs()).isEqualTo(600_000);
    }

    @Test
    void shouldNameTheBadSettingAndItsRange()
    {
        assertThatThrownBy(() -> new TransferConfig().lanesPerPeer(65).conclude())
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessage("lanesPerPeer must be in 1..64, was 65");
        assertThatThrownBy(() -> new TransferConfig().maxQueuedTransfersPerPeer(0).conclude())
            .hasMessage("maxQueuedTransfersPerPeer must be in 1..1048576, was 0");
        assertThatThrownBy(() -> new TransferConfig().maxQueuedTransfersPerPeer((1 << 20) + 1).conclude())
            .hasMessage("maxQueuedTransfersPerPeer must be in 1..1048576, was 1048577");
        assertThatThrownBy(() -> new TransferConfig().maxPendingAdmissionsPerPeer(-1).conclude())
            .hasMessage("maxPendingAdmissionsPerPeer must be in 0..1048576, was -1");
        assertThatThrownBy(() -> new TransferConfig().maxPendingAdmissionsPerPeer(2_000_000).conclude())
            .hasMessage("maxPendingAdmissionsPerPeer must be in 0..1048576, was 2000000");
        assertThatThrownBy(() -> new TransferConfig().admissionTimeoutMs(0).conclude())
            .hasMessage("admissionTimeoutMs must be in 1..600000, was 0");
        assertThatThrownBy(() -> new TransferConfig().admissionTimeoutMs(600_001).conclude())
            .hasMessage("admissionTimeoutMs must be in 1..600000, was 600001");
        assertThatThrownBy(() -> new TransferConfig().localMinBytes(0).conclude())
            .hasMessage("localMinBytes must be positive, was 0");
    }

    @Test
    void shouldCopyEverySetting()
    {
        final TransferConfig original = new TransferConfig()
            .lanesPerPeer(3).sliceBytes(8192).maxQueuedTransfersPerPeer(77).maxPendingAdmissionsPerPeer(5)
            .admissionTimeoutMs(250).transferTimeoutMs(900).connectTimeoutMs(80).ioThreads(1).preferEpoll(false);

        original.localTransfers(false).localMinBytes(4096);
        final TransferConfig copy = original.copy();
        original.maxPendingAdmissionsPerPeer(6).admissionTimeoutMs(251);

        assertThat(copy.lanesPerPeer()).isEqualTo(3);
        assertThat(copy.sliceBytes()).isEqualTo(8192);
        assertThat(copy.maxQueuedTransfersPerPeer()).isEqualTo(77);
        assertThat(copy.maxPendingAdmissionsPerPeer()).isEqualTo(5);
        assertThat(copy.admissionTimeoutMs()).isEqualTo(250);
        assertThat(copy.transferTimeoutMs()).isEqualTo(900);
        assertThat(copy.connectTimeoutMs()).isEqualTo(80);
        assertThat(copy.ioThreads()).isEqualTo(1);
        assertThat(copy.localTransfers()).isFalse();
        assertThat(copy.localMinBytes()).isEqualTo(4096);
        assertThat(copy.preferEpoll()).isFalse();
    }
}
