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

    /** The tenant a decode last read, reused while COMMITs keep naming the same one (a benign race: any is valid). */
    private static String lastTenant = "default";

    private final int flags;
    private final String tenant;
    /** Null in a decoded record until asked for: decoded from {@link #keyAndGroup} on demand. */
    private String key;
    private String groupId;
    /**
     * A decoded record's key bytes followed by its group id's, copied from the payload (validated: the key is UTF-8
     * without NUL, the group id UTF-8), so that a node can record them without building Strings; null in a record
     * made from Strings.
     */
    private final byte[] keyAndGroup;
    private final int keyBytes;
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
        this(flags, tenant, key, groupId == null ? "" : groupId, null, -1, valueLength, version, softPinTtlMs, crc32c);
    }

    /**
     * Every field: a record made from Strings ({@code keyAndGroup} null), or a decoded one (the strings kept as the
     * payload's UTF-8 bytes, {@code key} and {@code groupId} null until asked for).
     */
    private CommitRecord(
        final int flags,
        final String tenant,
        final String key,
        final String groupId,
        final byte[] keyAndGroup,
        final int keyBytes,
        final long valueLength,
        final long version,
        final long softPinTtlMs,
        final int crc32c)
    {
        this.flags = flags;
        this.tenant = tenant;
        this.key = key;
        this.groupId = groupId;
        this.keyAndGroup = keyAndGroup;
        this.keyBytes = keyBytes;
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
        String k = key;
        if (k == null)
        {
            k = new String(keyAndGroup, 0, keyBytes, StandardCharsets.UTF_8);
            key = k;
        }
        return k;
    }

    /** Eviction group id, "" for none. */
    public String groupId()
    {
        String g = groupId;
        if (g == null)
        {
            g = new String(keyAndGroup, keyBytes, keyAndGroup.length - keyBytes, StandardCharsets.UTF_8);
            groupId = g;
        }
        return g;
    }

    /** The UTF-8 length of the key. */
    public int keyUtf8Length()
    {
        return keyAndGroup != null ? keyBytes : utf8Length(key);
    }

    /** The UTF-8 length of the key and the group id together. */
    public int keyAndGroupUtf8Length()
    {
        return keyUtf8Length() + groupUtf8Length();
    }

    private int groupUtf8Length()
    {
        return keyAndGroup != null ? keyAndGroup.length - keyBytes : utf8Length(groupId);
    }

    /**
     * Writes the key's UTF-8 bytes and then the group id's at {@code at} ({@link #keyAndGroupUtf8Length()} bytes);
     * a decoded record copies them as they came, without Strings.
     */
    public void putKeyAndGroup(final byte[] out, final int at)
    {
        putKeyAndGroup(out, at, keyUtf8Length(), groupUtf8Length());
    }

    /** {@link #putKeyAndGroup(byte[], int)} with the key's and group id's UTF-8 lengths already known. */
    private void putKeyAndGroup(final byte[] out, final int at, final int keyLength, final int groupLength)
    {
        if (keyAndGroup != null)
        {
            System.arraycopy(keyAndGroup, 0, out, at, keyAndGroup.length);
            return;
        }
        putUtf8(groupId, groupLength, out, putUtf8(key, keyLength, out, at));
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
        return new CommitRecord(flags | FLAG_CRC32C, tenant, key(), groupId(), valueLength, version, softPinTtlMs, crc);
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
        final int k = keyUtf8Length();
        final int g = groupUtf8Length();
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
        putKeyAndGroup(out, at, k, g);
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
        final int at = offset + COMMIT_STRINGS_OFFSET;
        final String tenant = tenant(payload, at, tenantLength);
        final int keyAt = at + tenantLength;
        if (tenant == null || !Limits.isValidKey(payload, keyAt, keyLength) ||
            !ProtoWireReader.validUtf8(payload, keyAt + keyLength, groupLength))
        {
            return null;
        }
        final byte[] keyAndGroup = java.util.Arrays.copyOfRange(payload, keyAt, keyAt + keyLength + groupLength);
        return new CommitRecord(flags, tenant, null, null, keyAndGroup, keyLength, valueLength, version, softPinTtlMs,
            crc);
    }

    /** The tenant in {@code length} bytes at {@code at} if it is valid, else null; the one last decoded when the same. */
    private static String tenant(final byte[] b, final int at, final int length)
    {
        if (!Limits.isValidTenant(b, at, length))
        {
            return null;
        }
        final String last = lastTenant;
        if (last.length() == length)
        {
            boolean same = true;
            for (int i = 0; same && i < length; i++)
            {
                same = last.charAt(i) == b[at + i];
            }
            if (same)
            {
                return last;
            }
        }
        final String tenant = new String(b, at, length, StandardCharsets.US_ASCII);
        lastTenant = tenant;
        return tenant;
    }

    @Override
    public String toString()
    {
        final String group = groupId();
        return "CommitRecord{" + tenant + "/" + key() + ", version=" + version + ", valueLength=" + valueLength +
            ", flags=" + flags + (group.isEmpty() ? "" : ", group=" + group) + '}';
    }
}
