package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.protocol.Limits;

/** Key checks and key text for messages. Stateless. */
final class Keys
{
    private static final int MAX_SHOWN_CHARS = 96;

    private Keys()
    {
    }

    /** @throws GranaryException INVALID_KEY with the reason when {@link Limits#checkKey} refuses the key. */
    static void check(final String key)
    {
        final OpFailure failure = problem(key);
        if (failure != null)
        {
            throw failure.toException();
        }
    }

    /** Null when the key is acceptable, else the INVALID_KEY failure. */
    static OpFailure problem(final String key)
    {
        final String reason = Limits.checkKey(key);
        return reason == null ? null : new OpFailure(ErrorCode.INVALID_KEY, "key " + quote(key) + ": " + reason);
    }

    /** 'key' for messages, cut short when long. */
    static String quote(final String key)
    {
        if (key == null)
        {
            return "null";
        }
        return key.length() <= MAX_SHOWN_CHARS ?
            "'" + key + "'" : "'" + key.substring(0, MAX_SHOWN_CHARS) + "...' (" + key.length() + " chars)";
    }
}
