package io.granary.client.internal;

import com.google.protobuf.ByteString;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.proto.Replica;
import io.granary.protocol.FrameDescriptor;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** How the client reads a replica's extent and the range its token grants. */
class ReplicaExtentTest
{
    private static final ByteString TOKEN = ByteString.copyFrom(new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH]);

    private static Replica.Builder replica(final long offset, final long length)
    {
        return Replica.newBuilder().setNodeId("n1").setEndpoint("127.0.0.1:7001").setSegmentId(3)
            .setOffset(offset).setLength(length).setAccessToken(TOKEN);
    }

    @Test
    void shouldGrantTheExtentItselfWhenTheMasterSendsNoGrant()
    {
        final ReplicaExtent extent = ReplicaExtent.from(replica(8192, 4096).build(), "k");
        assertThat(extent.grantOffset()).isEqualTo(8192);
        assertThat(extent.grantLength()).isEqualTo(4096);

        final ReplicaExtent empty = ReplicaExtent.from(replica(8192, 0).build(), "k");
        assertThat(empty.grantLength()).as("a zero-length value's COMMIT still needs a grant").isEqualTo(1);
    }

    @Test
    void shouldTakeASharedGrantThatHoldsTheExtent()
    {
        final ReplicaExtent extent =
            ReplicaExtent.from(replica(8192, 4096).setGrantOffset(4096).setGrantLength(3 * 4096).build(), "k");
        assertThat(extent.offset()).isEqualTo(8192);
        assertThat(extent.grantOffset()).isEqualTo(4096);
        assertThat(extent.grantLength()).isEqualTo(3 * 4096);
    }

    @Test
    void shouldRefuseAGrantThatDoesNotHoldTheExtentOrComesWithoutAToken()
    {
        final Replica[] bad = {
            replica(8192, 4096).setGrantOffset(12288).setGrantLength(4096).build(),     // starts after the extent
            replica(8192, 4096).setGrantOffset(4096).setGrantLength(4096).build(),      // ends before its end
            replica(8192, 4096).setGrantOffset(0).setGrantLength(FrameDescriptor.MAX_GRANT_LENGTH + 1).build(),
            replica(8192, 4096).setGrantOffset(-4096).setGrantLength(1L << 20).build(), // offset past 2^63
            replica(8192, 4096).setGrantOffset(0).setGrantLength(-1).build(),           // length past 2^63
            replica(8192, 4096).clearAccessToken().setGrantOffset(0).setGrantLength(1L << 20).build(),
        };
        for (final Replica r : bad)
        {
            assertThatThrownBy(() -> ReplicaExtent.from(r, "k"))
                .isInstanceOfSatisfying(GranaryException.class,
                    e -> assertThat(e.code()).isEqualTo(ErrorCode.INTERNAL_ERROR))
                .hasMessageContaining("grant");
        }
    }
}
