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
    /**
     * The record names the object's parent (the previous block of a prefix chain, as the put named it): its key's
     * UTF-8 bytes follow the group id and take the rest of the payload. A record without it is laid out as before
     * the flag existed, so nodes that do not know it still take every record that names no parent.
     */
    public static final int FLAG_PARENT = 16;
    private static final int KNOWN_FLAGS =
        FLAG_HARD_PIN | FLAG_SOFT_PIN | FLAG_SOFT_PIN_DEFAULT_TTL | FLAG_CRC32C | FLAG_PARENT;
    private static final int MAX_TENANT_BYTES = 64;

    /** The tenant a decode last read, reused while COMMITs keep naming the same one (a benign race: any is valid). */
    private static String lastTenant = "default";

    private final int flags;
    private final String tenant;
    /** Null in a decoded record until asked for: decoded from {@link #names} on demand. */
    private String key;
    private String groupId;
    private String parentKey;
    /**
     * A decoded record's key bytes, then its group id's, then its parent key's, copied from the payload (validated:
     * the keys are UTF-8 without NUL, the group id UTF-8), so that a node can record them without building Strings;
     * null in a record made from Strings.
     */
    private final byte[] names;
    private final int keyBytes;
    private final int groupBytes;
    private final long valueLength;
    private final long version;
    private final long softPinTtlMs;
    private final int crc32c;

    /** A record that names no parent. */
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
        this(flags, tenant, key, groupId, "", valueLength, version, softPinTtlMs, crc32c);
    }

    /**
     * A record naming {@code parentKey} as the object's parent ("" or null: none; {@link #FLAG_PARENT} is set or
     * cleared to match, whatever {@code flags} says).
     */
    public CommitRecord(
        final int flags,
        final String tenant,
        final String key,
        final String groupId,
        final String parentKey,
        final long valueLength,
        final long version,
        final long softPinTtlMs,
        final int crc32c)
    {
        this(parentKey == null || parentKey.isEmpty() ? flags & ~FLAG_PARENT : flags | FLAG_PARENT, tenant, key,
            groupId == null ? "" : groupId, parentKey == null ? "" : parentKey, null, -1, -1, valueLength, version,
            softPinTtlMs, crc32c);
    }

    /**
     * Every field: a record made from Strings ({@code names} null), or a decoded one (the strings kept as the
     * payload's UTF-8 bytes, {@code key}, {@code groupId} and {@code parentKey} null until asked for).
     */
    private CommitRecord(
        final int flags,
        final String tenant,
        final String key,
        final String groupId,
        final String parentKey,
        final byte[] names,
        final int keyBytes,
        final int groupBytes,
        final long valueLength,
        final long version,
        final long softPinTtlMs,
        final int crc32c)
    {
        this.flags = flags;
        this.tenant = tenant;
        this.key = key;
        this.groupId = groupId;
        this.parentKey = parentKey;
        this.names = names;
        this.keyBytes = keyBytes;
        this.groupBytes = groupBytes;
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
            k = new String(names, 0, keyBytes, StandardCharsets.UTF_8);
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
            g = new String(names, keyBytes, groupBytes, StandardCharsets.UTF_8);
            groupId = g;
        }
        return g;
    }

    /** The parent's key, "" for none (then {@link #FLAG_PARENT} is clear). */
    public String parentKey()
    {
        String p = parentKey;
        if (p == null)
        {
            final int at = keyBytes + groupBytes;
            p = new String(names, at, names.length - at, StandardCharsets.UTF_8);
            parentKey = p;
        }
        return p;
    }

    /** The UTF-8 length of the key. */
    public int keyUtf8Length()
    {
        return names != null ? keyBytes : utf8Length(key);
    }

    /** The UTF-8 length of the group id. */
    public int groupUtf8Length()
    {
        return names != null ? groupBytes : utf8Length(groupId);
    }

    private int parentUtf8Length()
    {
        return names != null ? names.length - keyBytes - groupBytes : utf8Length(parentKey);
    }

    /** The UTF-8 length of the key, the group id and the parent key together. */
    public int namesUtf8Length()
    {
        return keyUtf8Length() + groupUtf8Length() + parentUtf8Length();
    }

    /**
     * Writes the key's UTF-8 bytes, then the group id's, then the parent key's at {@code at}
     * ({@link #namesUtf8Length()} bytes); a decoded record copies them as they came, without Strings.
     */
    public void putNames(final byte[] out, final int at)
    {
        putNames(out, at, keyUtf8Length(), groupUtf8Length());
    }

    /** {@link #putNames(byte[], int)} with the key's and group id's UTF-8 lengths already known. */
    private void putNames(final byte[] out, final int at, final int keyLength, final int groupLength)
    {
        if (names != null)
        {
            System.arraycopy(names, 0, out, at, names.length);
            return;
        }
        final int afterKey = putUtf8(key, keyLength, out, at);
        putUtf8(parentKey, parentUtf8Length(), out, putUtf8(groupId, groupLength, out, afterKey));
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
        return new CommitRecord(flags | FLAG_CRC32C, tenant, key(), groupId(), parentKey(), valueLength, version,
            softPinTtlMs, crc);
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
        final byte[] out = new byte[COMMIT_STRINGS_OFFSET + t + k + g + parentUtf8Length()];
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
        putNames(out, at, k, g);
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
     * Parses and checks a COMMIT payload: known format and flags, consistent lengths, a valid tenant and key (and
     * parent key: 1 to {@link Limits#MAX_KEY_BYTES} bytes with {@link #FLAG_PARENT}, none without), a nonzero
     * version, a value length within {@link Limits#MAX_VALUE_BYTES}.
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
        // What the strings leave of the payload is the parent key: none without FLAG_PARENT, a key's length with it.
        final int parentLength = length - COMMIT_STRINGS_OFFSET - tenantLength - keyLength - groupLength;
        final boolean parentFits = (flags & FLAG_PARENT) != 0 ?
            parentLength > 0 && parentLength <= Limits.MAX_KEY_BYTES : parentLength == 0;
        if (format != COMMIT_FORMAT || (flags & ~KNOWN_FLAGS) != 0 || !parentFits ||
            tenantLength == 0 || tenantLength > MAX_TENANT_BYTES || keyLength == 0 ||
            keyLength > Limits.MAX_KEY_BYTES || groupLength > Limits.MAX_KEY_BYTES ||
            valueLength < 0 || valueLength > Limits.MAX_VALUE_BYTES || version == 0 || softPinTtlMs < 0)
        {
            return null;
        }
        final int at = offset + COMMIT_STRINGS_OFFSET;
        final String tenant = tenant(payload, at, tenantLength);
        final int keyAt = at + tenantLength;
        final int parentAt = keyAt + keyLength + groupLength;
        if (tenant == null || !Limits.isValidKey(payload, keyAt, keyLength) ||
            !ProtoWireReader.validUtf8(payload, keyAt + keyLength, groupLength) ||
            (parentLength > 0 && !Limits.isValidKey(payload, parentAt, parentLength)))
        {
            return null;
        }
        final byte[] names = java.util.Arrays.copyOfRange(payload, keyAt, parentAt + parentLength);
        return new CommitRecord(flags, tenant, null, null, null, names, keyLength, groupLength, valueLength, version,
            softPinTtlMs, crc);
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
        final String parent = parentKey();
        return "CommitRecord{" + tenant + "/" + key() + ", version=" + version + ", valueLength=" + valueLength +
            ", flags=" + flags + (group.isEmpty() ? "" : ", group=" + group) +
            (parent.isEmpty() ? "" : ", parent=" + parent) + '}';
    }
}
