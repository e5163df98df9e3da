package io.granary.node;

import io.granary.protocol.FrameDescriptor;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class StorageNodeContextTest
{
    private static StorageNode.Context valid()
    {
        return new StorageNode.Context().masterAddress("127.0.0.1:50051");
    }

    @Test
    void shouldStartFromDocumentedDefaults()
    {
        final StorageNode.Context ctx = valid().conclude();
        assertThat(ctx.host()).isEqualTo("127.0.0.1");
        assertThat(ctx.transferPort()).isZero();
        assertThat(ctx.segmentSizeBytes()).isEqualTo(1L << 30);
        assertThat(ctx.segmentCount()).isEqualTo(1);
        assertThat(ctx.name()).isNull();
        assertThat(ctx.heartbeatIntervalMs()).isEqualTo(1_000);
        assertThat(ctx.maxFrameBytes()).isEqualTo(16 << 20);
        assertThat(ctx.ioThreads()).isEqualTo(2);
        assertThat(ctx.preTouch()).isTrue();
        assertThat(ctx.clock()).isNotNull();
    }

    @Test
    void shouldRequireAMasterAddressOfHostAndPort()
    {
        assertThatThrownBy(() -> new StorageNode.Context().conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("masterAddress is required");
        assertThatThrownBy(() -> new StorageNode.Context().masterAddress("localhost").conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("host:port");
        assertThatThrownBy(() -> new StorageNode.Context().masterAddress("localhost:0").conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("host:port");
    }

    @Test
    void shouldRoundSegmentSizeUpToThePage()
    {
        assertThat(valid().segmentSizeBytes((1 << 20) + 1).conclude().segmentSizeBytes()).isEqualTo((1 << 20) + 4096);
    }

    @Test
    void shouldRefuseOutOfRangeSettingsNamingThem()
    {
        assertThatThrownBy(() -> valid().segmentSizeBytes((1 << 20) - 1).conclude())
            .hasMessageContaining("segmentSizeBytes");
        assertThatThrownBy(() -> valid().segmentCount(0).conclude()).hasMessageContaining("segmentCount");
        assertThatThrownBy(() -> valid().transferPort(70_000).conclude()).hasMessageContaining("transferPort");
        assertThatThrownBy(() -> valid().heartbeatIntervalMs(0).conclude()).hasMessageContaining("heartbeatIntervalMs");
        assertThatThrownBy(() -> valid().maxFrameBytes(100).conclude()).hasMessageContaining("maxFrameBytes");
        assertThatThrownBy(() -> valid().maxFrameBytes(FrameDescriptor.MAX_FRAME_LENGTH_LIMIT + 1).conclude())
            .hasMessageContaining("maxFrameBytes");
        assertThatThrownBy(() -> valid().ioThreads(0).conclude()).hasMessageContaining("ioThreads");
        assertThatThrownBy(() -> valid().name("a/b").conclude()).hasMessageContaining("name");
        assertThatThrownBy(() -> valid().host(" ").conclude()).hasMessageContaining("host");
        assertThatThrownBy(() -> valid().clock(null).conclude()).hasMessageContaining("clock");
        assertThatThrownBy(() -> valid().ledgerBudgetBytes(-1).conclude()).hasMessageContaining("ledgerBudgetBytes");
    }

    @Test
    void shouldTakeDefaultsFromSystemProperties()
    {
        System.setProperty(Configuration.SEGMENT_SIZE_PROP_NAME, "64m");
        System.setProperty(Configuration.HEARTBEAT_INTERVAL_PROP_NAME, "2s");
        try
        {
            final StorageNode.Context ctx = valid();
            assertThat(ctx.segmentSizeBytes()).isEqualTo(64L << 20);
            assertThat(ctx.heartbeatIntervalMs()).isEqualTo(2_000);
        }
        finally
        {
            System.clearProperty(Configuration.SEGMENT_SIZE_PROP_NAME);
            System.clearProperty(Configuration.HEARTBEAT_INTERVAL_PROP_NAME);
        }
    }

    @Test
    void shouldNameTheBadPropertyInItsError()
    {
        System.setProperty(Configuration.SEGMENT_COUNT_PROP_NAME, "three");
        try
        {
            assertThatThrownBy(StorageNode.Context::new)
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining(Configuration.SEGMENT_COUNT_PROP_NAME);
        }
        finally
        {
            System.clearProperty(Configuration.SEGMENT_COUNT_PROP_NAME);
        }
    }
}
