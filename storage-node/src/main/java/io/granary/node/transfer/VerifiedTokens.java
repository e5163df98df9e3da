package io.granary.node.transfer;

import io.granary.protocol.FrameDescriptor;

import java.util.Arrays;

/**
 * The last few access tokens one connection verified, in a small direct-mapped table indexed by what the token
 * grants (operation, segment, extent): a frame whose token equals a remembered one in every field (MAC compared in
 * constant time) needs no HMAC. Holds only tokens that verified under the current key. Not thread safe.
 */
final class VerifiedTokens
{
    private static final int SLOTS = 64;

    private final boolean[] used = new boolean[SLOTS];
    private final int[] opcodes = new int[SLOTS];
    private final int[] segmentIds = new int[SLOTS];
    private final long[] grantOffsets = new long[SLOTS];
    private final long[] grantLengths = new long[SLOTS];
    private final long[] expiries = new long[SLOTS];
    private final byte[] macs = new byte[SLOTS * FrameDescriptor.TOKEN_MAC_LENGTH];

    boolean contains(
        final int opcode, final int segmentId, final long grantOffset, final long grantLength, final long expirySec,
        final byte[] mac)
    {
        final int slot = slot(opcode, segmentId, grantOffset);
        if (!used[slot] || opcodes[slot] != opcode || segmentIds[slot] != segmentId ||
            grantOffsets[slot] != grantOffset || grantLengths[slot] != grantLength || expiries[slot] != expirySec)
        {
            return false;
        }
        int difference = 0;
        final int base = slot * FrameDescriptor.TOKEN_MAC_LENGTH;
        for (int i = 0; i < FrameDescriptor.TOKEN_MAC_LENGTH; i++)
        {
            difference |= macs[base + i] ^ mac[i];
        }
        return difference == 0;
    }

    /** Remembers a token that verified (replacing whatever held its slot). */
    void add(
        final int opcode, final int segmentId, final long grantOffset, final long grantLength, final long expirySec,
        final byte[] mac)
    {
        final int slot = slot(opcode, segmentId, grantOffset);
        used[slot] = true;
        opcodes[slot] = opcode;
        segmentIds[slot] = segmentId;
        grantOffsets[slot] = grantOffset;
        grantLengths[slot] = grantLength;
        expiries[slot] = expirySec;
        System.arraycopy(mac, 0, macs, slot * FrameDescriptor.TOKEN_MAC_LENGTH, FrameDescriptor.TOKEN_MAC_LENGTH);
    }

    void clear()
    {
        Arrays.fill(used, false);
    }

    private static int slot(final int opcode, final int segmentId, final long grantOffset)
    {
        long h = grantOffset * 0x9E3779B97F4A7C15L + segmentId * 0xC2B2AE3D27D4EB4FL + opcode;
        h ^= h >>> 29;
        return (int)(h & (SLOTS - 1));
    }
}
