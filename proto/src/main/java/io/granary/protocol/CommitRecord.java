package io.granary.protocol;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static io.granary.protocol.FrameDescriptor.*;

/**
 * The payload of a COMMIT frame: what a storage node records in its ledger about an extent a client has
 * finished writing (key, tenant, the master's object version, pins, group, an optional CRC32C). Layout in
 * {@link FrameDescriptor} (COMMIT_*) and docs/protocol.md. Immutable; {@link #decode} validates everything
 * a node must not trust.
 */
public final class CommitRecord
{
    public static final int FLAG_HARD_PIN = 1;
    public static final int FLAG_SOFT_PIN = 2;
    /** Soft pin for the master's default TTL (the writer does not know it); with {@link #FLAG_SOFT_PIN}. */
    public static final int FLAG_SOFT_PIN_DEFAULT_TTL = 4;
    public static final int FLAG_CRC32C = 8;
    private static final int KNOWN_FLAGS = FLAG_HARD_PIN | FLAG_SOFT_PIN | FLAG_SOFT_PIN_DEFAULT_TTL | FLAG_CRC32C;
    private static final int MAX_TENANT_BYTES = 64;

    private final int flags;
    private final String tenant;
    private final String key;
    private final String groupId;
    private final long valueLength;
    private final long version;
    private final long softPinTtlMs;
    private final int crc32c;

    public CommitRecord(
        final int flags,
        final String tenant,
        final String key,
        final String groupId,
        final long valueLength,
        final long version,
        final long softPinTtlMs,
        final int crc32c)
    {
        this.flags = flags;
        this.tenant = tenant;
        this.key = key;
        this.groupId = groupId == null ? "" : groupId;
        this.valueLength = valueLength;
        this.version = version;
        this.softPinTtlMs = softPinTtlMs;
        this.crc32c = crc32c;
    }

    public int flags()
    {
        return flags;
    }

    public String tenant()
    {
        return tenant;
    }

    public String key()
    {
        return key;
    }

    /** Eviction group id, "" for none. */
    public String groupId()
    {
        return groupId;
    }

    public long valueLength()
    {
        return valueLength;
    }

    /** The master's version of the object (PutStartResponse.version); nonzero. */
    public long version()
    {
        return version;
    }

    public long softPinTtlMs()
    {
        return softPinTtlMs;
    }

    public boolean hasCrc32c()
    {
        return (flags & FLAG_CRC32C) != 0;
    }

    public int crc32c()
    {
        return crc32c;
    }

    /** This record carrying {@code crc} as the value's CRC32C (sets {@link #FLAG_CRC32C}). */
    public CommitRecord withCrc32c(final int crc)
    {
        return new CommitRecord(flags | FLAG_CRC32C, tenant, key, groupId, valueLength, version, softPinTtlMs, crc);
    }

    /** The payload bytes of a COMMIT frame for this record. */
    public byte[] encode()
    {
        return encode(flags, crc32c);
    }

    /** {@link #withCrc32c(int) withCrc32c(crc)}{@code .encode()} without the second record. */
    public byte[] encodeWithCrc32c(final int crc)
    {
        return encode(flags | FLAG_CRC32C, crc);
    }

    private byte[] encode(final int flagBits, final int crc)
    {
        final int t = utf8Length(tenant);
        final int k = utf8Length(key);
        final int g = utf8Length(groupId);
        final byte[] out = new byte[COMMIT_STRINGS_OFFSET + t + k + g];
        final ByteBuffer fields = ByteBuffer.wrap(out);
        fields.put(COMMIT_FORMAT)
            .put((byte)flagBits)
            .putShort((short)t)
            .putShort((short)k)
            .putShort((short)g)
            .putLong(valueLength)
            .putLong(version)
            .putLong(softPinTtlMs)
            .putInt(crc);
        int at = COMMIT_STRINGS_OFFSET;
        at = putUtf8(tenant, t, out, at);
        at = putUtf8(key, k, out, at);
        putUtf8(groupId, g, out, at);
        return out;
    }

    /** The UTF-8 length of {@code s}: its length when it is ASCII (keys usually are), else measured by encoding. */
    private static int utf8Length(final String s)
    {
        final int n = s.length();
        for (int i = 0; i < n; i++)
        {
            if (s.charAt(i) >= 0x80)
            {
                return s.getBytes(StandardCharsets.UTF_8).length;
            }
        }
        return n;
    }

    /** Writes {@code s} (its UTF-8 form is {@code length} bytes) at {@code at}; returns the index after it. */
    private static int putUtf8(final String s, final int length, final byte[] out, final int at)
    {
        final int n = s.length();
        for (int i = 0; i < n; i++)
        {
            final char c = s.charAt(i);
            if (c >= 0x80)
            {
                System.arraycopy(s.getBytes(StandardCharsets.UTF_8), 0, out, at, length);
                return at + length;
            }
            out[at + i] = (byte)c;
        }
        return at + length;
    }

    /**
     * Parses and checks a COMMIT payload: known format and flags, consistent lengths, a valid tenant and key,
     * a nonzero version, a value length within {@link Limits#MAX_VALUE_BYTES}.
     *
     * @return the record, or null when the payload is malformed.
     */
    public static CommitRecord decode(final byte[] payload, final int offset, final int length)
    {
        if (length < COMMIT_STRINGS_OFFSET || length > MAX_COMMIT_PAYLOAD || offset < 0 ||
            payload.length - offset < length)
        {
            return null;
        }
        final ByteBuffer in = ByteBuffer.wrap(payload, offset, length).slice();
        final int format = in.get(COMMIT_FORMAT_OFFSET);
        final int flags = in.get(COMMIT_FLAGS_OFFSET) & 0xFF;
        final int tenantLength = in.getShort(COMMIT_TENANT_LENGTH_OFFSET) & 0xFFFF;
        final int keyLength = in.getShort(COMMIT_KEY_LENGTH_OFFSET) & 0xFFFF;
        final int groupLength = in.getShort(COMMIT_GROUP_LENGTH_OFFSET) & 0xFFFF;
        final long valueLength = in.getLong(COMMIT_VALUE_LENGTH_OFFSET);
        final long version = in.getLong(COMMIT_VERSION_OFFSET);
        final long softPinTtlMs = in.getLong(COMMIT_SOFT_PIN_TTL_OFFSET);
        final int crc = in.getInt(COMMIT_CRC32C_OFFSET);
        if (format != COMMIT_FORMAT || (flags & ~KNOWN_FLAGS) != 0 ||
            COMMIT_STRINGS_OFFSET + tenantLength + keyLength + groupLength != length ||
            tenantLength == 0 || tenantLength > MAX_TENANT_BYTES || keyLength == 0 ||
            keyLength > Limits.MAX_KEY_BYTES || groupLength > Limits.MAX_KEY_BYTES ||
            valueLength < 0 || valueLength > Limits.MAX_VALUE_BYTES || version == 0 || softPinTtlMs < 0)
        {
            return null;
        }
        int at = offset + COMMIT_STRINGS_OFFSET;
        final String tenant = new String(payload, at, tenantLength, StandardCharsets.UTF_8);
        at += tenantLength;
        final String key = new String(payload, at, keyLength, StandardCharsets.UTF_8);
        at += keyLength;
        final String groupId = new String(payload, at, groupLength, StandardCharsets.UTF_8);
        if (Limits.checkTenant(tenant) != null || Limits.checkKey(key) != null)
        {
            return null;
        }
        return new CommitRecord(flags, tenant, key, groupId, valueLength, version, softPinTtlMs, crc);
    }

    @Override
    public String toString()
    {
        return "CommitRecord{" + tenant + "/" + key + ", version=" + version + ", valueLength=" + valueLength +
            ", flags=" + flags + (groupId.isEmpty() ? "" : ", group=" + groupId) + '}';
    }
}
