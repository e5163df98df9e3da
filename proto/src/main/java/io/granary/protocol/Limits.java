package io.granary.protocol;

import java.nio.charset.StandardCharsets;

/** Input limits shared by the client (early checks) and the master (authoritative checks). */
public final class Limits
{
    /** Longest key, in UTF-8 bytes. */
    public static final int MAX_KEY_BYTES = 4096;
    /** Most keys in one batch call. */
    public static final int MAX_BATCH_KEYS = 65_536;
    /** Longest regex accepted by RemoveByRegex/ListKeys. */
    public static final int MAX_REGEX_LENGTH = 1024;
    /** Largest single value (1 TiB; in practice bounded by segment size). */
    public static final long MAX_VALUE_BYTES = 1L << 40;
    /** Most replicas of one object. */
    public static final int MAX_REPLICAS = 16;
    /** Longest client id, in characters (clients use a UUID by default). */
    public static final int MAX_CLIENT_ID_LENGTH = 256;
    public static final String DEFAULT_TENANT = "default";

    /** Longest tenant id, in characters. */
    public static final int MAX_TENANT_LENGTH = 64;

    private Limits()
    {
    }

    /** Null when the key is acceptable, else the reason. */
    public static String checkKey(final String key)
    {
        if (key == null || key.isEmpty())
        {
            return "key is empty";
        }
        if (key.length() > MAX_KEY_BYTES ||
            (key.length() * 3 > MAX_KEY_BYTES && key.getBytes(StandardCharsets.UTF_8).length > MAX_KEY_BYTES))
        {
            return "key longer than " + MAX_KEY_BYTES + " bytes";
        }
        if (key.indexOf(0) >= 0)
        {
            return "key contains a NUL character";
        }
        return null;
    }

    /** Null when the tenant id is acceptable (letters, digits, '.', '_', '-'; 1..64 chars), else the reason. */
    public static String checkTenant(final String tenant)
    {
        if (tenant == null || tenant.isEmpty())
        {
            return null; // empty means the default tenant
        }
        // [A-Za-z0-9][A-Za-z0-9._-]{0,63}, checked by hand: the master and every node run this per request.
        boolean valid = tenant.length() <= MAX_TENANT_LENGTH;
        for (int i = 0; valid && i < tenant.length(); i++)
        {
            valid = isTenantChar(tenant.charAt(i), i == 0);
        }
        return valid ? null : "tenant id must be 1-64 characters of [A-Za-z0-9._-] starting with a letter or digit";
    }

    /** {@link #checkTenant}'s rule on a non-empty tenant given as {@code length} bytes at {@code at}. */
    public static boolean isValidTenant(final byte[] b, final int at, final int length)
    {
        boolean valid = length > 0 && length <= MAX_TENANT_LENGTH;
        for (int i = 0; valid && i < length; i++)
        {
            valid = isTenantChar((char)(b[at + i] & 0xFF), i == 0);
        }
        return valid;
    }

    private static boolean isTenantChar(final char c, final boolean first)
    {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            (!first && (c == '.' || c == '_' || c == '-'));
    }

    /**
     * {@link #checkKey}'s rule on a key given as {@code length} UTF-8 bytes at {@code at}: not empty, within
     * {@link #MAX_KEY_BYTES}, valid UTF-8, no NUL. One pass while the key is ASCII.
     */
    public static boolean isValidKey(final byte[] b, final int at, final int length)
    {
        if (length == 0 || length > MAX_KEY_BYTES)
        {
            return false;
        }
        final int end = at + length;
        for (int i = at; i < end; i++)
        {
            final byte c = b[i];
            if (c <= 0)
            {
                // NUL, or the first byte past ASCII: the rest is checked as UTF-8 (where a 0 byte is only ever NUL).
                return c < 0 && ProtoWireReader.validUtf8(b, i, end - i) && noNul(b, i, end);
            }
        }
        return true;
    }

    private static boolean noNul(final byte[] b, final int from, final int end)
    {
        for (int i = from; i < end; i++)
        {
            if (b[i] == 0)
            {
                return false;
            }
        }
        return true;
    }

    /** Null when the client id is acceptable (1..256 characters, no control characters), else the reason. */
    public static String checkClientId(final String clientId)
    {
        if (clientId == null || clientId.isEmpty())
        {
            return "is empty";
        }
        if (clientId.length() > MAX_CLIENT_ID_LENGTH)
        {
            return "is longer than " + MAX_CLIENT_ID_LENGTH + " characters";
        }
        for (int i = 0; i < clientId.length(); i++)
        {
            if (Character.isISOControl(clientId.charAt(i)))
            {
                return "contains a control character";
            }
        }
        return null;
    }

    public static String tenantOrDefault(final String tenant)
    {
        return tenant == null || tenant.isEmpty() ? DEFAULT_TENANT : tenant;
    }
}
