package io.granary.node.transfer;

import io.granary.common.ManualClock;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.TOKEN_EXPIRED_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The node's token check with its memory of recently verified tokens: a repeat is accepted without an HMAC, but
 * only the very same token; expiry is checked on every frame; a new key forgets everything.
 */
class AccessTokenVerifierTest
{
    private static final long NOW_MS = 1_700_000_000_000L;
    private final ManualClock clock = new ManualClock(0, NOW_MS);
    private final byte[] key = AccessTokenCodec.newRandomKey();
    private final AccessTokenVerifier verifier = new AccessTokenVerifier(clock);

    /** A frame at {@code offset + delta} of {@code length} bytes with a token granting [offset, offset + grant). */
    private FrameHeader frame(final byte[] signingKey, final int opcode, final long offset, final long delta,
        final long length, final long grant, final long expirySec)
    {
        final byte[] token = new AccessTokenCodec(signingKey).sign(opcode, 7, offset, grant, expirySec);
        final FrameHeader header = new FrameHeader().set(opcode, 1, 7, offset + delta, length);
        header.grantDelta = delta;
        header.grantLength = grant;
        header.tokenExpirySec = expirySec;
        System.arraycopy(token, 4, header.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
        return header;
    }

    @Test
    void shouldAcceptTheSlicesOfOneGrantAndRefuseAnyOtherMacForIt()
    {
        verifier.updateKey(key);
        final AccessTokenVerifier.Checker checker = verifier.newChecker();
        final long expiry = NOW_MS / 1000 + 60;
        for (int slice = 0; slice < 4; slice++)
        {
            assertThat(checker.check(frame(key, Opcode.WRITE, 1 << 20, slice * 4096L, 4096, 16384, expiry))).isZero();
        }
        for (int bit = 0; bit < FrameDescriptor.TOKEN_MAC_LENGTH * 8; bit += 7)
        {
            final FrameHeader forged = frame(key, Opcode.WRITE, 1 << 20, 0, 4096, 16384, expiry);
            forged.tokenMac[bit / 8] ^= (byte)(1 << (bit % 8));
            assertThat(checker.check(forged)).as("bit %d flipped", bit).isEqualTo(ACCESS_DENIED_VALUE);
        }
        final FrameHeader otherOp = frame(key, Opcode.WRITE, 1 << 20, 0, 4096, 16384, expiry);
        otherOp.opcode = Opcode.READ;
        assertThat(checker.check(otherOp)).as("the WRITE token used for a READ").isEqualTo(ACCESS_DENIED_VALUE);
        final FrameHeader stretched = frame(key, Opcode.WRITE, 1 << 20, 0, 4096, 16384, expiry);
        stretched.grantLength = 32768;
        assertThat(checker.check(stretched)).isEqualTo(ACCESS_DENIED_VALUE);
        final FrameHeader later = frame(key, Opcode.WRITE, 1 << 20, 0, 4096, 16384, expiry);
        later.tokenExpirySec = expiry + 3600;
        assertThat(checker.check(later)).as("a remembered MAC with another expiry").isEqualTo(ACCESS_DENIED_VALUE);
        assertThat(verifier.verified()).isEqualTo(4);
    }

    @Test
    void shouldCheckTheExpiryOfARememberedTokenOnEveryFrame()
    {
        verifier.updateKey(key);
        final AccessTokenVerifier.Checker checker = verifier.newChecker();
        final long expiry = NOW_MS / 1000 + 2;
        final FrameHeader read = frame(key, Opcode.READ, 8192, 0, 100, 100, expiry);
        assertThat(checker.check(read)).isZero();
        assertThat(checker.check(read)).isZero();

        clock.advanceMillis(2_000);

        assertThat(checker.check(read)).isEqualTo(TOKEN_EXPIRED_VALUE);
    }

    @Test
    void shouldForgetWhatItVerifiedWhenTheKeyChanges()
    {
        verifier.updateKey(key);
        final AccessTokenVerifier.Checker checker = verifier.newChecker();
        final long expiry = NOW_MS / 1000 + 60;
        final FrameHeader read = frame(key, Opcode.READ, 8192, 0, 100, 100, expiry);
        assertThat(checker.check(read)).isZero();

        final byte[] replacement = Arrays.copyOf(AccessTokenCodec.newRandomKey(), AccessTokenCodec.KEY_LENGTH);
        verifier.updateKey(replacement);

        assertThat(checker.check(read)).as("signed with the old key").isEqualTo(ACCESS_DENIED_VALUE);
        assertThat(checker.check(frame(replacement, Opcode.READ, 8192, 0, 100, 100, expiry))).isZero();
    }
}
