package io.granary.protocol;

import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class AccessTokenCodecTest
{
    private static final byte[] MASTER_KEY = new byte[AccessTokenCodec.KEY_LENGTH];

    static
    {
        for (int i = 0; i < MASTER_KEY.length; i++)
        {
            MASTER_KEY[i] = (byte)(i * 7 + 1);
        }
    }

    private final byte[] nodeKey = AccessTokenCodec.deriveNodeKey(MASTER_KEY, "node-a");
    private final AccessTokenCodec codec = new AccessTokenCodec(nodeKey);

    private static byte[] mac(final byte[] token)
    {
        return Arrays.copyOfRange(token, 4, FrameDescriptor.ACCESS_TOKEN_LENGTH);
    }

    @Test
    void shouldVerifyWhatItSigned()
    {
        final byte[] token = codec.sign(Opcode.READ, 0xCAFE_BABE, 1L << 35, 4096, 1_700_000_010L);

        assertThat(token).hasSize(FrameDescriptor.ACCESS_TOKEN_LENGTH);
        assertThat(Arrays.copyOf(token, 4)).containsExactly(0x65, 0x53, (byte)0xF1, 0x0A); // 1_700_000_010
        assertThat(new AccessTokenCodec(nodeKey).verify(Opcode.READ, 0xCAFE_BABE, 1L << 35, 4096, 1_700_000_010L,
            mac(token))).isTrue();
    }

    @Test
    void shouldSignTheDocumentedBytesWithHmacSha256AsJavaxCryptoComputesIt() throws Exception
    {
        final java.util.SplittableRandom random = new java.util.SplittableRandom(42);
        for (int round = 0; round < 200; round++)
        {
            final byte[] key = new byte[AccessTokenCodec.KEY_LENGTH];
            random.nextBytes(key);
            final AccessTokenCodec signer = new AccessTokenCodec(key);
            final javax.crypto.Mac reference = javax.crypto.Mac.getInstance("HmacSHA256");
            reference.init(new javax.crypto.spec.SecretKeySpec(key, "HmacSHA256"));
            for (int i = 0; i < 5; i++) // the same codec again and again: its pads must not be used up
            {
                final int opcode = random.nextBoolean() ? Opcode.READ : Opcode.WRITE;
                final int segment = random.nextInt();
                final long offset = random.nextLong();
                final long length = random.nextLong();
                final long expiry = random.nextLong(1L << 32);
                final java.nio.ByteBuffer input = java.nio.ByteBuffer.allocate(32)
                    .put(new byte[]{'G', 'R', 'T', '1', (byte)opcode, 0, 0, 0})
                    .putInt(segment).putLong(offset).putLong(length).putInt((int)expiry);
                final byte[] expected = Arrays.copyOf(reference.doFinal(input.array()), FrameDescriptor.TOKEN_MAC_LENGTH);
                assertThat(mac(signer.sign(opcode, segment, offset, length, expiry))).isEqualTo(expected);
                assertThat(signer.verify(opcode, segment, offset, length, expiry, expected)).isTrue();
            }
        }
    }

    @Test
    void shouldRefuseATokenWhenAnyCoveredFieldDiffers()
    {
        final byte[] mac = mac(codec.sign(Opcode.READ, 7, 8192, 4096, 1_700_000_010L));

        assertThat(codec.verify(Opcode.WRITE, 7, 8192, 4096, 1_700_000_010L, mac)).as("operation").isFalse();
        assertThat(codec.verify(Opcode.READ, 8, 8192, 4096, 1_700_000_010L, mac)).as("segment").isFalse();
        assertThat(codec.verify(Opcode.READ, 7, 8193, 4096, 1_700_000_010L, mac)).as("offset").isFalse();
        assertThat(codec.verify(Opcode.READ, 7, 8192, 4097, 1_700_000_010L, mac)).as("length").isFalse();
        assertThat(codec.verify(Opcode.READ, 7, 8192, 4096, 1_700_000_011L, mac)).as("expiry").isFalse();
        final byte[] flipped = mac.clone();
        flipped[15] ^= 1;
        assertThat(codec.verify(Opcode.READ, 7, 8192, 4096, 1_700_000_010L, flipped)).as("mac").isFalse();
        assertThat(codec.verify(Opcode.READ, 7, 8192, 4096, 1_700_000_010L, mac)).as("the original").isTrue();
    }

    @Test
    void shouldGiveEveryNodeItsOwnKey()
    {
        final byte[] otherNodeKey = AccessTokenCodec.deriveNodeKey(MASTER_KEY, "node-b");
        final byte[] token = new AccessTokenCodec(otherNodeKey).sign(Opcode.WRITE, 7, 0, 4096, 1_700_000_010L);

        assertThat(otherNodeKey).hasSize(AccessTokenCodec.KEY_LENGTH).isNotEqualTo(nodeKey);
        assertThat(AccessTokenCodec.deriveNodeKey(MASTER_KEY, "node-a")).isEqualTo(nodeKey);
        assertThat(codec.verify(Opcode.WRITE, 7, 0, 4096, 1_700_000_010L, mac(token))).isFalse();
    }

    @Test
    void shouldRefuseKeysOfTheWrongLength()
    {
        assertThatThrownBy(() -> new AccessTokenCodec(new byte[16])).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("32");
        assertThatThrownBy(() -> AccessTokenCodec.deriveNodeKey(new byte[31], "n"))
            .isInstanceOf(IllegalArgumentException.class);
        assertThat(AccessTokenCodec.newRandomKey()).hasSize(32).isNotEqualTo(AccessTokenCodec.newRandomKey());
    }

    @Test
    void shouldRoundExpiryDownToTheSecondButNeverIntoThePast()
    {
        assertThat(AccessTokenCodec.expirySec(1_700_000_010_999L, 1_700_000_000_000L)).isEqualTo(1_700_000_010L);
        assertThat(AccessTokenCodec.expirySec(1_700_000_000_300L, 1_700_000_000_100L)).isEqualTo(1_700_000_001L);
        assertThat(AccessTokenCodec.isLive(1_700_000_010L, 1_700_000_009_999L)).isTrue();
        assertThat(AccessTokenCodec.isLive(1_700_000_010L, 1_700_000_010_000L)).isFalse();
    }
}
