package io.granary.client;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class LeasePolicyTest
{
    @Test
    void shouldCarryModeAndCandidateSize()
    {
        assertThat(LeasePolicy.none().mode()).isEqualTo(LeasePolicy.Mode.NONE);
        assertThat(LeasePolicy.none().candidateSize()).isZero();
        assertThat(LeasePolicy.lastHitOnly(2).mode()).isEqualTo(LeasePolicy.Mode.LAST_HIT_ONLY);
        assertThat(LeasePolicy.lastHitOnly(2).candidateSize()).isEqualTo(2);
        assertThat(LeasePolicy.longestPrefix(4).mode()).isEqualTo(LeasePolicy.Mode.LONGEST_PREFIX);
        assertThat(LeasePolicy.longestPrefix(4).candidateSize()).isEqualTo(4);
        assertThat(LeasePolicy.longestPrefixLastOnly(8).mode()).isEqualTo(LeasePolicy.Mode.LONGEST_PREFIX_LAST_ONLY);
        assertThat(LeasePolicy.longestPrefixLastOnly(8).candidateSize()).isEqualTo(8);
    }

    @Test
    void shouldLeaveCandidateSizeChecksToTheMaster()
    {
        assertThat(LeasePolicy.lastHitOnly(0).candidateSize()).isZero();
        assertThat(LeasePolicy.longestPrefix(-1).candidateSize()).isEqualTo(-1);
    }

    @Test
    void shouldCompareByValue()
    {
        assertThat(LeasePolicy.lastHitOnly(2)).isEqualTo(LeasePolicy.lastHitOnly(2))
            .hasSameHashCodeAs(LeasePolicy.lastHitOnly(2))
            .isNotEqualTo(LeasePolicy.longestPrefix(2))
            .isNotEqualTo(LeasePolicy.lastHitOnly(3));
        assertThat(LeasePolicy.lastHitOnly(2).toString()).contains("LAST_HIT_ONLY").contains("2");
    }
}
