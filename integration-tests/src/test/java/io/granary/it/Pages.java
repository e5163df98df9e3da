package io.granary.it;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;

/**
 * Deterministic KV pages for the cluster tests: a mix of sizes from 4 KiB to 4 MiB weighted toward small
 * pages, and content derived from (key, seed) alone so that any page can be regenerated to check every byte
 * read back. Stateless; call from any thread.
 */
final class Pages
{
    static final int KIB = 1024;
    static final int MIB = 1024 * KIB;

    /** Size bands, {lowest, highest, weight per mille}: the tail is small but always present. */
    private static final int[][] BANDS = {
        {4 * KIB, 4 * KIB, 150},
        {4 * KIB + 1, 16 * KIB, 480},
        {16 * KIB + 1, 64 * KIB, 271},
        {64 * KIB + 1, 256 * KIB, 80},
        {256 * KIB + 1, MIB, 15},
        {MIB + 1, 4 * MIB - 1, 3},
        {4 * MIB, 4 * MIB, 1}};

    /** One page: its key and value length. */
    record Page(String key, int sizeBytes)
    {
    }

    private Pages()
    {
    }

    /**
     * {@code count} pages named {@code prefix00000, prefix00001, ...}; their sizes follow the band weights
     * (each band gets its share of the count, so even a few hundred pages include a 4 MiB one), in an order
     * shuffled by {@code seed} so that every batch mixes sizes.
     */
    static List<Page> mixed(final String prefix, final int count, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final List<Integer> sizes = new ArrayList<>(count);
        for (int i = 0; i < count; i++)
        {
            final int[] band = band((i + 0.5) * 1000.0 / count);
            sizes.add(band[0] == band[1] ? band[0] : band[0] + random.nextInt(band[1] - band[0] + 1));
        }
        Collections.shuffle(sizes, new Random(seed));
        final List<Page> pages = new ArrayList<>(count);
        for (int i = 0; i < count; i++)
        {
            pages.add(new Page(String.format("%s%05d", prefix, i), sizes.get(i)));
        }
        return pages;
    }

    /** {@code count} pages of exactly {@code sizeBytes} each. */
    static List<Page> uniform(final String prefix, final int count, final int sizeBytes)
    {
        final List<Page> pages = new ArrayList<>(count);
        for (int i = 0; i < count; i++)
        {
            pages.add(new Page(String.format("%s%05d", prefix, i), sizeBytes));
        }
        return pages;
    }

    static long totalBytes(final List<Page> pages)
    {
        long total = 0;
        for (final Page page : pages)
        {
            total += page.sizeBytes();
        }
        return total;
    }

    static int largest(final List<Page> pages)
    {
        int largest = 0;
        for (final Page page : pages)
        {
            largest = Math.max(largest, page.sizeBytes());
        }
        return largest;
    }

    /** The page's value, derived from its key and {@code seed}. */
    static byte[] content(final Page page, final long seed)
    {
        final byte[] value = new byte[page.sizeBytes()];
        final ByteBuffer out = ByteBuffer.wrap(value).order(ByteOrder.LITTLE_ENDIAN);
        final SplittableRandom random = new SplittableRandom(keySeed(page.key(), seed));
        while (out.remaining() >= Long.BYTES)
        {
            out.putLong(random.nextLong());
        }
        long last = random.nextLong();
        while (out.hasRemaining())
        {
            out.put((byte)last);
            last >>>= 8;
        }
        return value;
    }

    /** The page's value in a direct buffer (position 0, limit its length). */
    static ByteBuffer directContent(final Page page, final long seed)
    {
        final ByteBuffer direct = ByteBuffer.allocateDirect(page.sizeBytes());
        direct.put(content(page, seed)).flip();
        return direct;
    }

    /**
     * Null when {@code actual}'s remaining bytes are exactly the page's value, else what is wrong (length,
     * or the first differing offset). Does not move {@code actual}'s position.
     */
    static String check(final Page page, final long seed, final ByteBuffer actual)
    {
        if (actual.remaining() != page.sizeBytes())
        {
            return page.key() + ": " + actual.remaining() + " bytes read, " + page.sizeBytes() + " expected";
        }
        final int at = actual.mismatch(ByteBuffer.wrap(content(page, seed)));
        return at < 0 ? null : page.key() + " (" + page.sizeBytes() + " bytes): first wrong byte at offset " + at;
    }

    private static int[] band(final double perMille)
    {
        double cumulative = 0;
        for (final int[] band : BANDS)
        {
            cumulative += band[2];
            if (perMille < cumulative)
            {
                return band;
            }
        }
        return BANDS[BANDS.length - 1];
    }

    /** FNV-1a over the key's chars, mixed with the seed; SplittableRandom mixes it further. */
    private static long keySeed(final String key, final long seed)
    {
        long hash = 0xcbf29ce484222325L ^ seed;
        for (int i = 0; i < key.length(); i++)
        {
            hash ^= key.charAt(i);
            hash *= 0x100000001b3L;
        }
        return hash;
    }
}
