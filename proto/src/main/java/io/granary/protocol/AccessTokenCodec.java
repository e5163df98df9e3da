package io.granary.protocol;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Objects;

/**
 * Signs (master) and verifies (storage node) data-plane access tokens: HMAC-SHA256 truncated to
 * {@value FrameDescriptor#TOKEN_MAC_LENGTH} bytes over what a token grants. The one place that says what a token
 * covers; docs/protocol.md ("Access tokens") describes the same bytes. Thread safe: the key's SHA-256 states are only
 * ever cloned, and each token is computed in buffers of its own.
 *
 * <p>MAC input, 32 bytes big-endian: the tag "GRT1", the operation (uint8, {@link Opcode#READ} or
 * {@link Opcode#WRITE}), three zero bytes, the segment id (uint32), the granted extent's offset (uint64) and length
 * (uint64), the expiry (uint32 epoch seconds). The node is bound by the key: every node gets its own key,
 * {@link #deriveNodeKey derived} from the master's key and the node id, so a token of one node never verifies on
 * another.
 *
 * <p>The HMAC is computed from SHA-256 states that already hold the key's inner and outer pads (RFC 2104's
 * precomputation, section 4): two compression rounds per token instead of the four a {@link Mac} runs. Tests check it
 * against {@code javax.crypto.Mac}.
 */
public final class AccessTokenCodec
{
    /** Length of the master's key and of every node key, in bytes (256 bits). */
    public static final int KEY_LENGTH = 32;

    private static final String ALGORITHM = "HmacSHA256";
    private static final int MAC_INPUT_LENGTH = 32;
    private static final byte[] TAG = {'G', 'R', 'T', '1'};
    private static final byte[] NODE_KEY_LABEL = "granary data-token node key v1\0".getBytes(StandardCharsets.UTF_8);

    private static final int SHA256_BLOCK = 64;
    private static final int SHA256_LENGTH = 32;

    /** SHA-256 after the key XOR ipad block, and after the key XOR opad block; cloned for every token. */
    private final MessageDigest innerStart;
    private final MessageDigest outerStart;

    /**
     * @param key a {@value #KEY_LENGTH}-byte node key.
     * @throws IllegalArgumentException for a key of another length.
     */
    public AccessTokenCodec(final byte[] key)
    {
        Objects.requireNonNull(key, "key");
        if (key.length != KEY_LENGTH)
        {
            throw new IllegalArgumentException("a data-token key has " + KEY_LENGTH + " bytes, was " + key.length);
        }
        // A 32-byte key is shorter than SHA-256's block: HMAC pads it with zeros (RFC 2104).
        final byte[] pad = new byte[SHA256_BLOCK];
        innerStart = sha256();
        outerStart = sha256();
        for (int i = 0; i < SHA256_BLOCK; i++)
        {
            pad[i] = (byte)((i < key.length ? key[i] : 0) ^ 0x36);
        }
        innerStart.update(pad);
        for (int i = 0; i < SHA256_BLOCK; i++)
        {
            pad[i] = (byte)((i < key.length ? key[i] : 0) ^ 0x5c);
        }
        outerStart.update(pad);
    }

    /** A fresh random {@value #KEY_LENGTH}-byte key from a {@link SecureRandom}. */
    public static byte[] newRandomKey()
    {
        final byte[] key = new byte[KEY_LENGTH];
        new SecureRandom().nextBytes(key);
        return key;
    }

    /** The key of node {@code nodeId}: HMAC-SHA256(masterKey, label || node id in UTF-8). */
    public static byte[] deriveNodeKey(final byte[] masterKey, final String nodeId)
    {
        Objects.requireNonNull(masterKey, "masterKey");
        if (masterKey.length != KEY_LENGTH)
        {
            throw new IllegalArgumentException("the master's data-token key has " + KEY_LENGTH + " bytes, was " +
                masterKey.length);
        }
        final Mac derive = newMac(masterKey);
        derive.update(NODE_KEY_LABEL);
        return derive.doFinal(nodeId.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The expiry (epoch seconds) of a token that should last until {@code deadlineEpochMs}: the deadline rounded
     * down to the second, so a token never outlives what it stands for, yet at least the second after
     * {@code nowEpochMs}, so that a grant shorter than a second is still usable once.
     */
    public static long expirySec(final long deadlineEpochMs, final long nowEpochMs)
    {
        return Math.max(Math.floorDiv(deadlineEpochMs, 1000L), Math.floorDiv(nowEpochMs, 1000L) + 1);
    }

    /** True while a token expiring at {@code expirySec} may be used at {@code nowEpochMs}. */
    public static boolean isLive(final long expirySec, final long nowEpochMs)
    {
        return nowEpochMs < expirySec * 1000L;
    }

    /**
     * Writes a token ({@value FrameDescriptor#ACCESS_TOKEN_LENGTH} bytes: expiry as uint32, then the MAC) into
     * {@code token} at {@code at}.
     *
     * @param opcode {@link Opcode#READ} or {@link Opcode#WRITE}.
     */
    public void sign(
        final int opcode,
        final int segmentId,
        final long grantOffset,
        final long grantLength,
        final long expirySec,
        final byte[] token,
        final int at)
    {
        final byte[] output = compute(opcode, segmentId, grantOffset, grantLength, expirySec);
        token[at] = (byte)(expirySec >>> 24);
        token[at + 1] = (byte)(expirySec >>> 16);
        token[at + 2] = (byte)(expirySec >>> 8);
        token[at + 3] = (byte)expirySec;
        System.arraycopy(output, 0, token, at + 4, FrameDescriptor.TOKEN_MAC_LENGTH);
    }

    /** A new token; see {@link #sign(int, int, long, long, long, byte[], int)}. */
    public byte[] sign(
        final int opcode, final int segmentId, final long grantOffset, final long grantLength, final long expirySec)
    {
        final byte[] token = new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH];
        sign(opcode, segmentId, grantOffset, grantLength, expirySec, token, 0);
        return token;
    }

    /** True when {@code tokenMac} is the MAC of these fields under this codec's key (constant-time comparison). */
    public boolean verify(
        final int opcode,
        final int segmentId,
        final long grantOffset,
        final long grantLength,
        final long expirySec,
        final byte[] tokenMac)
    {
        final byte[] output = compute(opcode, segmentId, grantOffset, grantLength, expirySec);
        int difference = 0;
        for (int i = 0; i < FrameDescriptor.TOKEN_MAC_LENGTH; i++)
        {
            difference |= output[i] ^ tokenMac[i];
        }
        return difference == 0;
    }

    /** The HMAC of the token's fields, 32 bytes (a token carries the first {@code TOKEN_MAC_LENGTH}). */
    private byte[] compute(
        final int opcode, final int segmentId, final long grantOffset, final long grantLength, final long expirySec)
    {
        final byte[] b = new byte[MAC_INPUT_LENGTH];
        System.arraycopy(TAG, 0, b, 0, TAG.length);
        b[4] = (byte)opcode;
        b[5] = 0;
        b[6] = 0;
        b[7] = 0;
        putInt(b, 8, segmentId);
        putLong(b, 12, grantOffset);
        putLong(b, 20, grantLength);
        putInt(b, 28, (int)expirySec);
        final byte[] innerHash = new byte[SHA256_LENGTH];
        final byte[] output = new byte[SHA256_LENGTH];
        try
        {
            final MessageDigest inner = (MessageDigest)innerStart.clone();
            inner.update(b, 0, MAC_INPUT_LENGTH);
            inner.digest(innerHash, 0, SHA256_LENGTH);
            final MessageDigest outer = (MessageDigest)outerStart.clone();
            outer.update(innerHash, 0, SHA256_LENGTH);
            outer.digest(output, 0, SHA256_LENGTH);
        }
        catch (final CloneNotSupportedException | DigestException ex)
        {
            throw new IllegalStateException("SHA-256 of this JVM cannot be cloned or finished", ex);
        }
        return output;
    }

    private static MessageDigest sha256()
    {
        try
        {
            final MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.clone(); // fail here, at construction, if this provider cannot clone its state
            return md;
        }
        catch (final NoSuchAlgorithmException | CloneNotSupportedException ex)
        {
            throw new IllegalStateException("SHA-256 with cloneable state is not available in this JVM", ex);
        }
    }

    /** Constant-time equality of two keys (or MACs). */
    public static boolean sameKey(final byte[] a, final byte[] b)
    {
        return MessageDigest.isEqual(a, b);
    }

    private static Mac newMac(final byte[] key)
    {
        try
        {
            final Mac m = Mac.getInstance(ALGORITHM);
            m.init(new SecretKeySpec(key, ALGORITHM));
            return m;
        }
        catch (final GeneralSecurityException ex)
        {
            throw new IllegalStateException(ALGORITHM + " is not available in this JVM", ex);
        }
    }

    private static void putInt(final byte[] b, final int at, final int v)
    {
        b[at] = (byte)(v >>> 24);
        b[at + 1] = (byte)(v >>> 16);
        b[at + 2] = (byte)(v >>> 8);
        b[at + 3] = (byte)v;
    }

    private static void putLong(final byte[] b, final int at, final long v)
    {
        putInt(b, at, (int)(v >>> 32));
        putInt(b, at + 4, (int)v);
    }
}
