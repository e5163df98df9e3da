package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;

import java.util.Arrays;

/**
 * The access token of one transfer as its frames carry it: expiry and MAC from the master's token, and the granted
 * extent, so that each slice can say where it lies in the grant. Immutable.
 */
final class FrameToken
{
    final long expirySec;
    final byte[] mac;
    final long grantOffset;
    final long grantLength;

    private FrameToken(final long expirySec, final byte[] mac, final long grantOffset, final long grantLength)
    {
        this.expirySec = expirySec;
        this.mac = mac;
        this.grantOffset = grantOffset;
        this.grantLength = grantLength;
    }

    /**
     * Splits a master token ({@value FrameDescriptor#ACCESS_TOKEN_LENGTH} bytes: uint32 expiry, then the MAC).
     *
     * @return null when the token has another length, an expiry of 0, or a grant the header cannot carry.
     */
    static FrameToken of(final byte[] token, final long grantOffset, final long grantLength)
    {
        if (token.length != FrameDescriptor.ACCESS_TOKEN_LENGTH || grantLength <= 0 ||
            grantLength > FrameDescriptor.MAX_GRANT_LENGTH)
        {
            return null;
        }
        final long expirySec = ((token[0] & 0xFFL) << 24) | ((token[1] & 0xFFL) << 16) | ((token[2] & 0xFFL) << 8) |
            (token[3] & 0xFFL);
        if (expirySec == 0)
        {
            return null;
        }
        return new FrameToken(expirySec, Arrays.copyOfRange(token, 4, FrameDescriptor.ACCESS_TOKEN_LENGTH),
            grantOffset, grantLength);
    }

    /** The header's grant-delta field for a frame at {@code remoteOffset} (inside the grant by construction). */
    long deltaOf(final long remoteOffset)
    {
        return remoteOffset - grantOffset;
    }
}
