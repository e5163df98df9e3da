package io.granary.master.meta;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** How {@link KeyBatch} holds keys: Strings and bytes alike, and a reused batch let go of a huge request's arrays. */
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

    @Test
    void shouldLetGoOfHugeArraysOnResetAndKeepSmallOnes()
    {
        final KeyBatch batch = new KeyBatch(128, 4096);
        batch.add("a");
        final byte[] small = batch.bytes();
        batch.reset(1 << 16);
        assertThat(batch.size()).isZero();
        assertThat(batch.bytes()).isSameAs(small);
        for (int i = 0; i < 70_000; i++)
        {
            batch.add("key-" + i);
        }
        assertThat(batch.bytes().length).isGreaterThan(1 << 16);
        batch.reset(1 << 16);
        assertThat(batch.size()).isZero();
        assertThat(batch.bytes().length).isLessThanOrEqualTo(1 << 16);
        batch.add("after");
        assertThat(batch.key(0)).isEqualTo("after");
        // A batch wrapping a request's array takes no copies until it is reset.
        batch.wrap(new byte[] {'x', 'y'});
        assertThatThrownBy(() -> batch.add("z")).isInstanceOf(IllegalStateException.class);
        batch.reset(1 << 16);
        batch.add("z");
        assertThat(batch.key(0)).isEqualTo("z");
    }
}
