package io.granary.master.meta;

import io.granary.common.Clock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** How {@link SharedGrants} forms runs of extents and hands each key its replicas. */
class SharedGrantsTest
{
    private final SegmentRegistry registry = new SegmentRegistry(Clock.SYSTEM,
        (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
    private final MountedSegment a;
    private final MountedSegment b;
    /** What was signed: "segmentId offset length opcode expiry" per call. */
    private final List<String> signed = new ArrayList<>();
    private final MetadataStore.ReplicaTokens tokens = (segment, offset, length, opcode, expirySec) ->
    {
        signed.add(segment.segmentId() + " " + offset + " " + length + " " + opcode + " " + expirySec);
        // A recognisable 20-byte token: the expiry, then the index of the signature.
        return ByteBuffer.allocate(FrameDescriptor.ACCESS_TOKEN_LENGTH).putInt((int)expirySec)
            .putInt(signed.size()).array();
    };

    SharedGrantsTest()
    {
        registry.mount("node-a", "a", "127.0.0.1:7001", 1, "a/seg", 1L << 40);
        registry.mount("node-b", "b", "127.0.0.1:7002", 2, "b/seg", 1L << 40);
        a = registry.segment("node-a", 1);
        b = registry.segment("node-b", 2);
    }

    private static List<Replica> replicasOf(final SharedGrants grants, final int key)
    {
        final List<Replica> out = new ArrayList<>();
        grants.replicasOf(key, out);
        return out;
    }

    private static int tokenIndex(final Replica r)
    {
        return r.getAccessToken().asReadOnlyByteBuffer().getInt(4);
    }

    @Test
    void shouldFormOneRunPerSegmentAcrossInterleavedReplicasAndSignZeroLengthValuesAlone()
    {
        final SharedGrants grants = new SharedGrants(Opcode.WRITE);
        grants.key(0);
        grants.add(new ReplicaRecord(a, 0, 4096), 100);
        grants.add(new ReplicaRecord(b, 0, 4096), 100);
        grants.key(1);
        grants.add(new ReplicaRecord(a, 4096, 4096), 90);
        grants.add(new ReplicaRecord(b, 4096, 4096), 90);
        grants.key(2); // an empty value: a one-byte grant of its own, the segment's run stays open behind it
        grants.add(new ReplicaRecord(a, 8192, 0), 95);
        grants.key(4); // key 3 failed and recorded nothing
        grants.add(new ReplicaRecord(a, 8192, 4096), 95);
        grants.sign(tokens);

        assertThat(grants.runs()).isEqualTo(3);
        assertThat(signed).containsExactly(
            "1 0 12288 " + Opcode.WRITE + " 90", "2 0 8192 " + Opcode.WRITE + " 90", "1 8192 1 " + Opcode.WRITE + " 95");

        final List<Replica> first = replicasOf(grants, 0);
        assertThat(first).hasSize(2);
        assertThat(first.get(0).getStatus()).isEqualTo(ReplicaStatus.REPLICA_STATUS_PROCESSING);
        assertThat(first.get(0).getGrantOffset()).isZero();
        assertThat(first.get(0).getGrantLength()).isEqualTo(12288);
        assertThat(tokenIndex(first.get(0))).isEqualTo(1);
        assertThat(first.get(1).getSegmentId()).isEqualTo(2);
        assertThat(first.get(1).getGrantLength()).isEqualTo(8192);
        assertThat(tokenIndex(first.get(1))).isEqualTo(2);
        assertThat(replicasOf(grants, 1)).extracting(SharedGrantsTest::tokenIndex).containsExactly(1, 2);
        final Replica empty = replicasOf(grants, 2).get(0);
        assertThat(empty.getGrantLength()).as("its own one-byte grant: no grant fields").isZero();
        assertThat(tokenIndex(empty)).isEqualTo(3);
        assertThat(replicasOf(grants, 3)).isEmpty();
        assertThat(replicasOf(grants, 4)).extracting(SharedGrantsTest::tokenIndex).containsExactly(1);
    }

    @Test
    void shouldStartANewRunBeforeAGrantWouldReach4GiBAndAfterAGap()
    {
        final SharedGrants grants = new SharedGrants(Opcode.READ);
        final long big = FrameDescriptor.MAX_GRANT_LENGTH - 4096; // one more 8 KiB extent would pass the limit
        grants.key(0);
        grants.add(new ReplicaRecord(a, 0, big), 7);
        grants.key(1);
        grants.add(new ReplicaRecord(a, big, 8192), 7);
        grants.key(2);
        grants.add(new ReplicaRecord(a, big + 8192 + 64, 4096), 7); // not where the previous one ends
        grants.sign(tokens);

        assertThat(signed).containsExactly("1 0 " + big + " " + Opcode.READ + " 7",
            "1 " + big + " 8192 " + Opcode.READ + " 7", "1 " + (big + 8192 + 64) + " 4096 " + Opcode.READ + " 7");
        for (int key = 0; key < 3; key++)
        {
            final Replica r = replicasOf(grants, key).get(0);
            assertThat(r.getStatus()).isEqualTo(ReplicaStatus.REPLICA_STATUS_COMPLETE);
            assertThat(r.getGrantLength()).as("every run holds one extent").isZero();
        }
    }

    @Test
    void shouldSignNothingAndAddNoTokenWhenTheMasterIssuesNone()
    {
        final SharedGrants grants = new SharedGrants(Opcode.WRITE);
        grants.key(0);
        grants.add(new ReplicaRecord(a, 0, 4096), 0);
        grants.key(1);
        grants.add(new ReplicaRecord(a, 4096, 4096), 0);
        grants.sign(null);
        assertThat(grants.runs()).isZero();
        for (int key = 0; key < 2; key++)
        {
            final Replica r = replicasOf(grants, key).get(0);
            assertThat(r.getAccessToken().isEmpty()).isTrue();
            assertThat(r.getGrantLength()).isZero();
        }
    }

    /** Records a batch: key i has one extent on segment a (i even) or b, 4 KiB each, runs broken every 5 keys. */
    private void fill(final SharedGrants grants, final int keys)
    {
        for (int i = 0; i < keys; i++)
        {
            grants.key(i);
            grants.add(new ReplicaRecord(i % 2 == 0 ? a : b, 4096L * (i + i / 5), 4096), 100 + i % 3);
        }
        grants.sign(tokens);
    }

    private static List<List<Replica>> all(final SharedGrants grants, final int keys)
    {
        final List<List<Replica>> out = new ArrayList<>();
        for (int i = 0; i < keys; i++)
        {
            out.add(replicasOf(grants, i));
        }
        return out;
    }

    @Test
    void shouldAnswerAfterAResetAsAFreshInstanceDoes()
    {
        final SharedGrants reused = new SharedGrants(Opcode.READ);
        // Batches of growing and shrinking size, one past the retained capacity (its arrays are let go).
        for (final int keys : new int[] {40, 3, 5000, 1, 200, 0, 17})
        {
            signed.clear();
            final SharedGrants fresh = new SharedGrants(Opcode.READ);
            fill(fresh, keys);
            final List<String> freshSigned = new ArrayList<>(signed);
            final List<List<Replica>> expected = all(fresh, keys);

            signed.clear();
            fill(reused.reset(), keys);
            assertThat(signed).as("%d keys", keys).isEqualTo(freshSigned);
            assertThat(reused.runs()).isEqualTo(fresh.runs());
            assertThat(reused.size()).isEqualTo(keys);
            // Tokens carry the index of their signature, which restarts with each batch: equal replicas, token too.
            assertThat(all(reused, keys)).as("%d keys", keys).isEqualTo(expected);
        }
    }

    @Test
    void shouldRefuseAnOperationOtherThanReadOrWrite()
    {
        assertThatThrownBy(() -> new SharedGrants(Opcode.COMMIT)).isInstanceOf(IllegalArgumentException.class);
    }
}
