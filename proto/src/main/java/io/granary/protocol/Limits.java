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
        boolean valid = tenant.length() <= MAX_TENANT_LENGTH && isAlphanumeric(tenant.charAt(0));
        for (int i = 1; valid && i < tenant.length(); i++)
        {
            final char c = tenant.charAt(i);
            valid = isAlphanumeric(c) || c == '.' || c == '_' || c == '-';
        }
        return valid ? null : "tenant id must be 1-64 characters of [A-Za-z0-9._-] starting with a letter or digit";
    }

    private static boolean isAlphanumeric(final char c)
    {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
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
