package io.granary.master.meta;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/** How {@link KeyBatch} holds keys: Strings and bytes alike. */
class KeyBatchTest
{
    private static String randomKey(final Random random)
    {
        final StringBuilder b = new StringBuilder();
        for (int i = 0, n = random.nextInt(40); i < n; i++)
        {
            final int kind = random.nextInt(10);
            // Mostly ASCII; sometimes two-, three- and four-byte UTF-8.
            b.appendCodePoint(kind == 0 ? 0xE9 : kind == 1 ? 0x4E2D : kind == 2 ? 0x1F600 : 'a' + random.nextInt(26));
        }
        return b.toString();
    }

    @Test
    void shouldHoldAStringKeyAsItsUtf8BytesWithTheSameHash()
    {
        final Random random = new Random(5);
        final KeyBatch fromStrings = new KeyBatch(1, 16); // grows as keys come
        final KeyBatch fromBytes = new KeyBatch(1, 16);
        final List<String> keys = new ArrayList<>();
        for (int i = 0; i < 500; i++)
        {
            final String key = randomKey(random);
            keys.add(key);
            fromStrings.add(key);
            final byte[] utf8 = key.getBytes(StandardCharsets.UTF_8);
            fromBytes.add(utf8, 0, utf8.length);
        }
        assertThat(fromStrings.size()).isEqualTo(500);
        for (int i = 0; i < 500; i++)
        {
            assertThat(fromStrings.key(i)).isEqualTo(keys.get(i));
            assertThat(fromStrings.length(i)).isEqualTo(fromBytes.length(i));
            assertThat(fromStrings.hash(i)).isEqualTo(fromBytes.hash(i));
        }
        final KeyBatch of = KeyBatch.of(keys);
        for (int i = 0; i < 500; i++)
        {
            assertThat(of.hash(i)).isEqualTo(fromBytes.hash(i));
        }
    }
}
