package io.granary.master.meta;

import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ReplicaRecordTest
{
    private final ReplicaRecord record = new ReplicaRecord(null, 4096, 1000);

    @Test
    void shouldKnowItsTokensExpiryFromTheTokensOwnFirstBytes()
    {
        assertThat(record.readTokenExpirySec()).as("none kept yet").isZero();
        final AccessTokenCodec codec = new AccessTokenCodec(AccessTokenCodec.newRandomKey());
        // An expiry past 2038 still fits: it is a uint32 on the wire and here.
        for (final long expirySec : new long[] {1_796_640_000L, 0xFFFF_FFF0L})
        {
            final byte[] token = codec.sign(Opcode.READ, 7, 4096, 1000, expirySec);
            record.readToken(token, expirySec);

            assertThat(record.readTokenExpirySec()).isEqualTo(expirySec);
            assertThat(record.readToken()).isEqualTo(token).isNotSameAs(token);
        }
    }

    @Test
    void shouldRefuseATokenThatDoesNotStartWithTheExpiryItIsKeptFor()
    {
        final byte[] token = ByteBuffer.allocate(FrameDescriptor.ACCESS_TOKEN_LENGTH).putInt(41).array();

        assertThatThrownBy(() -> record.readToken(token, 42)).isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("expiry 42, got 41");
        assertThatThrownBy(() -> record.readToken(new byte[19], 42)).isInstanceOf(IllegalStateException.class);
        assertThat(record.readTokenExpirySec()).as("nothing kept").isZero();
    }
}
