package io.granary.client;

import io.granary.protocol.Limits;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PutOptionsTest
{
    @Test
    void shouldDefaultToOneUnpinnedReplica()
    {
        final PutOptions defaults = PutOptions.defaults();

        assertThat(defaults.replicas()).isEqualTo(1);
        assertThat(defaults.softPinAction()).isEqualTo(SoftPinAction.PRESERVE);
        assertThat(defaults.softPinTtl()).isNull();
        assertThat(defaults.hardPin()).isFalse();
        assertThat(defaults.groupId()).isNull();
        assertThat(defaults.preferredSegment()).isNull();
        assertThat(defaults.parent()).isNull();
        assertThat(PutOptions.builder().build()).isEqualTo(defaults);
    }

    @Test
    void shouldKeepWhatWasSet()
    {
        final PutOptions options = PutOptions.builder()
            .replicas(Limits.MAX_REPLICAS).softPin(SoftPinAction.ENABLE, Duration.ofHours(1)).hardPin(true)
            .groupId("block-9").preferredSegment("node1/seg0").parent("block-8/r0").build();

        assertThat(options.replicas()).isEqualTo(Limits.MAX_REPLICAS);
        assertThat(options.softPinAction()).isEqualTo(SoftPinAction.ENABLE);
        assertThat(options.softPinTtl()).isEqualTo(Duration.ofHours(1));
        assertThat(options.hardPin()).isTrue();
        assertThat(options.groupId()).isEqualTo("block-9");
        assertThat(options.preferredSegment()).isEqualTo("node1/seg0");
        assertThat(options.parent()).isEqualTo("block-8/r0");
        assertThat(options.toString()).contains("parent=block-8/r0");
        assertThat(options.toBuilder().build()).isEqualTo(options);
        assertThat(options.toBuilder().parent("").build().parent()).isNull();
        assertThat(options.toBuilder().parent(null).build()).isNotEqualTo(options);
    }

    @Test
    void shouldTreatEmptyGroupAndSegmentAsNone()
    {
        final PutOptions options = PutOptions.builder().groupId("").preferredSegment("").build();

        assertThat(options.groupId()).isNull();
        assertThat(options.preferredSegment()).isNull();
    }

    @Test
    void shouldRefuseAReplicaCountOutOfRange()
    {
        assertThatThrownBy(() -> PutOptions.builder().replicas(0).build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("replicas");
        assertThatThrownBy(() -> PutOptions.builder().replicas(Limits.MAX_REPLICAS + 1).build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("replicas");
    }

    @Test
    void shouldRefuseANegativeTtl()
    {
        assertThatThrownBy(() -> PutOptions.builder().softPin(SoftPinAction.ENABLE, Duration.ofSeconds(-1)).build())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ttl");
    }

    @Test
    void shouldLeaveTtlAndActionCombinationsToTheMaster()
    {
        // A TTL with PRESERVE is the master's INVALID_PARAMS, not a local refusal.
        final PutOptions options = PutOptions.builder().softPin(SoftPinAction.PRESERVE, Duration.ofMinutes(1)).build();

        assertThat(options.softPinTtl()).isEqualTo(Duration.ofMinutes(1));
        assertThat(PutOptions.builder().softPin(SoftPinAction.ENABLE, Duration.ZERO).build().softPinTtl())
            .isEqualTo(Duration.ZERO);
    }
}
