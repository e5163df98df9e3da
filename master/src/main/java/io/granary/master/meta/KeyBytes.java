package io.granary.master.meta;

import io.granary.protocol.Limits;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Keys as the master indexes them: UTF-8 bytes and a 64-bit hash over them, so the lookup port can
 * find an object straight from the bytes of a request without building a String. Stateless.
 */
public final class KeyBytes
{
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final long M = 0x9E3779B97F4A7C15L;

    private KeyBytes()
    {
    }

    public static byte[] utf8(final String s)
    {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A well-mixed 64-bit hash of {@code len} bytes at {@code off}; never 0. Reads 8 bytes at a time. */
    public static long hash(final byte[] b, final int off, final int len)
    {
        long h = len * M;
        int i = off;
        final int end = off + len;
        for (; i + 8 <= end; i += 8)
        {
            h = Long.rotateLeft(h ^ ((long)LONGS.get(b, i) * M), 29) * 0xBF58476D1CE4E5B9L;
        }
        long tail = 0;
        for (int shift = 0; i < end; i++, shift += 8)
        {
            tail |= (b[i] & 0xFFL) << shift;
        }
        h ^= tail * M;
        h ^= h >>> 33;
        h *= 0xFF51AFD7ED558CCDL;
        h ^= h >>> 33;
        h *= 0xC4CEB9FE1A85EC53L;
        h ^= h >>> 33;
        return h == 0 ? 1 : h;
    }

    /** The ErrorCode number for a key given as bytes: OK, or INVALID_KEY when empty, too long or holding a NUL. */
    public static int check(final byte[] b, final int off, final int len)
    {
        if (len <= 0 || len > Limits.MAX_KEY_BYTES)
        {
            return io.granary.proto.ErrorCode.INVALID_KEY_VALUE;
        }
        int i = off;
        final int end = off + len;
        for (; i + 8 <= end; i += 8)
        {
            final long w = (long)LONGS.get(b, i);
            // Non-zero exactly when some byte of w is zero (the classic SWAR test).
            if (((w - 0x0101010101010101L) & ~w & 0x8080808080808080L) != 0)
            {
                return io.granary.proto.ErrorCode.INVALID_KEY_VALUE;
            }
        }
        for (; i < end; i++)
        {
            if (b[i] == 0)
            {
                return io.granary.proto.ErrorCode.INVALID_KEY_VALUE;
            }
        }
        return io.granary.proto.ErrorCode.OK_VALUE;
    }

    static boolean equal(final byte[] a, final byte[] b, final int off, final int len)
    {
        return a.length == len && java.util.Arrays.equals(a, 0, len, b, off, off + len);
    }
}
