package io.granary.client.internal;

import io.granary.client.ClusterStatus;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.RebuildStatus;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class ProtoMappingTest
{
    @Test
    void shouldCountEveryReasonARebuildRefusedAnEntryFor()
    {
        final ClusterStatusResponse response = ClusterStatusResponse.newBuilder().setObjects(7)
            .setRebuild(RebuildStatus.newBuilder().setMasterId("m").setReady(true).setLedgerReports(2)
                .setObjectsRebuilt(7).setReplicasRebuilt(9).setRejectedStale(1).setRejectedOverlap(2)
                .setRejectedInvalid(4).setRejectedRemoved(8).setRejectedBudget(16).setUptimeMs(5)
                .setParentsLinked(6).setParentsAwaited(1))
            .build();

        final ClusterStatus status = ProtoMapping.toClusterStatus(response);

        assertThat(status.objects()).isEqualTo(7);
        assertThat(status.rebuild().entriesRejected()).isEqualTo(31);
        assertThat(status.rebuild().objectsRebuilt()).isEqualTo(7);
        assertThat(status.rebuild().replicasRebuilt()).isEqualTo(9);
        assertThat(status.rebuild().parentsLinked()).isEqualTo(6);
        assertThat(status.rebuild().parentsAwaited()).isEqualTo(1);
    }

    @Test
    void shouldCarryTheObjectBudgetAndReadAnUnsignedOneAboveLongRangeAsUnbounded()
    {
        assertThat(ProtoMapping.toClusterStatus(ClusterStatusResponse.newBuilder().setMaxObjects(91_750).build())
            .maxObjects()).isEqualTo(91_750);
        assertThat(ProtoMapping.toClusterStatus(ClusterStatusResponse.getDefaultInstance()).maxObjects())
            .as("an older master reports none").isZero();
        assertThat(ProtoMapping.toClusterStatus(ClusterStatusResponse.newBuilder().setMaxObjects(-2).build())
            .maxObjects()).as("uint64 2^64 - 2 on the wire").isEqualTo(Long.MAX_VALUE);
    }
}
