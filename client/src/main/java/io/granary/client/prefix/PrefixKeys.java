package io.granary.client.prefix;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The stable key format of KV blocks (version 1), computed from token ids the way engines chain block hashes.
 * Thread safe (a digest per thread).
 *
 * <pre>
 * seed      = SHA-256("granary-prefix-v1" 0x00 UTF-8(salt))
 * hash(0)   = SHA-256(seed      || tokens[0 .. B)      as 4-byte little-endian ints)
 * hash(i)   = SHA-256(hash(i-1) || tokens[iB .. iB+B)  as 4-byte little-endian ints)
 * object    = "kv1/" model "/w" worldSize "/r" rank "/g" layerGroup "/" hex(hash(i))
 * group     = "kv1/" model "/w" worldSize "/" hex(hash(i))         (one eviction group per block)
 * parent    = the object of the same rank and layer group of block i-1 (none for block 0)
 * </pre>
 *
 * B is the layout's tokens per block; only full blocks have keys. hex is 64 lowercase digits; the model is written
 * with every character outside {@code [A-Za-z0-9._-]} percent-encoded as its UTF-8 bytes ({@code %2F} for '/').
 * A block's hash therefore names its whole prefix: equal keys mean equal tokens from the first one on.
 */
public final class PrefixKeys
{
    /** The version prefix of every key; a new format gets a new one, so old and new keys never mix. */
    public static final String VERSION_PREFIX = "kv1/";
    static final byte[] SEED_DOMAIN = "granary-prefix-v1\u0000".getBytes(StandardCharsets.US_ASCII);
    private static final HexFormat HEX = HexFormat.of();
    private static final ThreadLocal<MessageDigest> SHA_256 = ThreadLocal.withInitial(PrefixKeys::newDigest);

    private final PrefixLayout layout;
    private final byte[] seed;
    /** "kv1/model/wN/" */
    private final String blockPrefix;
    /** "kv1/model/wN/r{rank}/g{g}/" for every rank and layer group, [rank * layerGroups + g]. */
    private final String[] objectPrefixes;

    public PrefixKeys(final PrefixLayout layout)
    {
        this.layout = layout;
        final MessageDigest digest = SHA_256.get();
        digest.reset();
        digest.update(SEED_DOMAIN);
        this.seed = digest.digest(layout.salt().getBytes(StandardCharsets.UTF_8));
        this.blockPrefix = VERSION_PREFIX + encodeModel(layout.model()) + "/w" + layout.worldSize() + "/";
        this.objectPrefixes = new String[layout.objectsPerBlock()];
        for (int r = 0; r < layout.worldSize(); r++)
        {
            for (int g = 0; g < layout.layerGroups(); g++)
            {
                objectPrefixes[r * layout.layerGroups() + g] = blockPrefix + "r" + r + "/g" + g + "/";
            }
        }
    }

    public PrefixLayout layout()
    {
        return layout;
    }

    /** Full blocks in the first {@code length} tokens. */
    public int fullBlocks(final int length)
    {
        return length / layout.tokensPerBlock();
    }

    /**
     * The chained hashes of the first {@code maxBlocks} full blocks of {@code tokens[0, length)}, as 64 hex digits
     * each.
     */
    public String[] blockHashes(final int[] tokens, final int length, final int maxBlocks)
    {
        if (length < 0 || length > tokens.length)
        {
            throw new IllegalArgumentException("length must be in 0.." + tokens.length + ", was " + length);
        }
        final int blocks = Math.min(fullBlocks(length), Math.max(0, maxBlocks));
        final int b = layout.tokensPerBlock();
        final String[] hashes = new String[blocks];
        final MessageDigest digest = SHA_256.get();
        final byte[] bytes = new byte[b * 4];
        byte[] previous = seed;
        for (int i = 0; i < blocks; i++)
        {
            for (int t = 0, o = 0; t < b; t++, o += 4)
            {
                final int token = tokens[i * b + t];
                bytes[o] = (byte)token;
                bytes[o + 1] = (byte)(token >>> 8);
                bytes[o + 2] = (byte)(token >>> 16);
                bytes[o + 3] = (byte)(token >>> 24);
            }
            digest.reset();
            digest.update(previous);
            previous = digest.digest(bytes);
            hashes[i] = HEX.formatHex(previous);
        }
        return hashes;
    }

    /** Every full block's hash of {@code tokens}. */
    public String[] blockHashes(final int[] tokens)
    {
        return blockHashes(tokens, tokens.length, Integer.MAX_VALUE);
    }

    /** The key of one object of a block: {@code rank}'s page of {@code layerGroup}. */
    public String objectKey(final String blockHash, final int rank, final int layerGroup)
    {
        if (rank < 0 || rank >= layout.worldSize() || layerGroup < 0 || layerGroup >= layout.layerGroups())
        {
            throw new IllegalArgumentException("no object rank " + rank + ", layer group " + layerGroup + " in " + layout);
        }
        return objectPrefixes[rank * layout.layerGroups() + layerGroup] + blockHash;
    }

    /** The eviction group of a block: every rank's every page of it. */
    public String groupId(final String blockHash)
    {
        return blockPrefix + blockHash;
    }

    /** A regex matching every key of this model and world size (for {@code removeByRegex}). */
    public String modelRegex()
    {
        return java.util.regex.Pattern.quote(blockPrefix) + ".*";
    }

    /** The model as it appears in keys. */
    static String encodeModel(final String model)
    {
        final StringBuilder out = new StringBuilder(model.length());
        final byte[] utf8 = model.getBytes(StandardCharsets.UTF_8);
        for (final byte b : utf8)
        {
            final int c = b & 0xFF;
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-')
            {
                out.append((char)c);
            }
            else
            {
                out.append('%').append(Character.toUpperCase(Character.forDigit(c >>> 4, 16)))
                    .append(Character.toUpperCase(Character.forDigit(c & 0xF, 16)));
            }
        }
        return out.toString();
    }

    private static MessageDigest newDigest()
    {
        try
        {
            return MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is required of every JDK", ex);
        }
    }
}
