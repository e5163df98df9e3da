package io.granary.master.meta;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

class KeyIndexTest
{
    static ObjectMeta meta(final String tenant, final String key, final long hash)
    {
        return new ObjectMeta(tenant, key.getBytes(StandardCharsets.UTF_8), hash, 0, 1, "c", 0, false, null,
            new ReplicaRecord[0], 0);
    }

    static ObjectMeta meta(final String tenant, final String key)
    {
        final byte[] b = key.getBytes(StandardCharsets.UTF_8);
        return meta(tenant, key, MetadataStore.hashOf(tenant, b, 0, b.length));
    }

    static ObjectMeta find(final KeyIndex index, final ObjectMeta like)
    {
        return index.get(like.tenant, like.keyBytes, 0, like.keyBytes.length, like.hash);
    }

    @Test
    void shouldLetABatchTouchItsSlotsWithoutTheLockWhileTheIndexGrowsAndShrinks() throws Exception
    {
        // touch() reads the index's two arrays without the shard lock: a rehash between the two reads hands it
        // arrays of different sizes, which it must survive (an index past the shorter one, a slot emptied meanwhile).
        final KeyIndex index = new KeyIndex();
        final List<ObjectMeta> metas = new ArrayList<>();
        for (int i = 0; i < 4096; i++)
        {
            metas.add(meta("t", "key-" + i));
        }
        final Object lock = new Object();
        final java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        final java.util.concurrent.atomic.AtomicReference<Throwable> failure =
            new java.util.concurrent.atomic.AtomicReference<>();
        final java.util.concurrent.atomic.AtomicLong touches = new java.util.concurrent.atomic.AtomicLong();
        final Thread toucher = new Thread(() ->
        {
            final SplittableRandom random = new SplittableRandom(9);
            try
            {
                while (!stop.get())
                {
                    index.touch(metas.get(random.nextInt(metas.size())).hash);
                    touches.incrementAndGet();
                }
            }
            catch (final Throwable ex)
            {
                failure.set(ex);
            }
        });
        toucher.start();
        final long end = System.nanoTime() + 1_500_000_000L;
        int rounds = 0;
        while (System.nanoTime() < end && failure.get() == null)
        {
            for (final ObjectMeta m : metas) // grows 8 -> 8192 slots, rehashing on the way
            {
                synchronized (lock)
                {
                    index.put(m);
                }
            }
            for (final ObjectMeta m : metas) // and shrinks back
            {
                synchronized (lock)
                {
                    index.remove(m);
                }
            }
            rounds++;
        }
        stop.set(true);
        toucher.join();
        assertThat(failure.get()).as("touch while the index was resized").isNull();
        assertThat(rounds).isPositive();
        assertThat(touches.get()).isPositive();
        assertThat(index.size()).isZero();
        // With nothing racing it, touch reads the object of a present key (its key bytes count in the answer).
        final ObjectMeta present = metas.get(7);
        index.put(present);
        assertThat(index.touch(present.hash)).isEqualTo(present.keyBytes.length);
    }

    @Test
    void shouldMatchAHashMapModelThroughRandomPutsAndRemoves()
    {
        for (final long seed : new long[]{1, 2, 3, 42})
        {
            final SplittableRandom random = new SplittableRandom(seed);
            final KeyIndex index = new KeyIndex();
            final Map<String, ObjectMeta> model = new HashMap<>();
            for (int step = 0; step < 20_000; step++)
            {
                final String tenant = random.nextInt(4) == 0 ? "t2" : "default";
                final String key = "k" + random.nextInt(2_000);
                final String id = tenant + "\u0000" + key;
                // Every fifth key shares one hash with others, so probing and backward shift are exercised.
                final ObjectMeta candidate = random.nextInt(5) == 0 ? meta(tenant, key, 77) : meta(tenant, key);
                final ObjectMeta present = model.get(id);
                if (present != null && random.nextBoolean())
                {
                    assertThat(index.remove(present)).as("seed %d step %d", seed, step).isTrue();
                    model.remove(id);
                }
                else if (present == null)
                {
                    index.put(candidate);
                    model.put(id, candidate);
                }
                if (step % 500 == 0 || step == 19_999)
                {
                    assertThat(index.size()).as("seed %d step %d", seed, step).isEqualTo(model.size());
                    for (final ObjectMeta m : model.values())
                    {
                        assertThat(find(index, m)).as("seed %d step %d %s", seed, step, m.key()).isSameAs(m);
                    }
                    final List<ObjectMeta> seen = new ArrayList<>();
                    index.forEach(seen::add);
                    assertThat(seen).hasSize(model.size()).containsExactlyInAnyOrderElementsOf(model.values());
                }
            }
        }
    }

    @Test
    void shouldKeepTenantsAndEqualHashesApart()
    {
        final KeyIndex index = new KeyIndex();
        final ObjectMeta a = meta("default", "same", 5);
        final ObjectMeta b = meta("other", "same", 5);
        final ObjectMeta c = meta("default", "diff", 5);
        index.put(a);
        index.put(b);
        index.put(c);
        assertThat(find(index, meta("default", "same", 5))).isSameAs(a);
        assertThat(find(index, meta("other", "same", 5))).isSameAs(b);
        assertThat(find(index, meta("default", "diff", 5))).isSameAs(c);
        assertThat(find(index, meta("third", "same", 5))).isNull();
        assertThat(index.remove(meta("default", "same", 5))).as("removal is by identity").isFalse();
        assertThat(index.remove(a)).isTrue();
        assertThat(find(index, meta("default", "same", 5))).isNull();
        assertThat(find(index, meta("default", "diff", 5))).isSameAs(c);
    }

    @Test
    void shouldGrowAndShrink()
    {
        final KeyIndex index = new KeyIndex();
        final List<ObjectMeta> all = new ArrayList<>();
        for (int i = 0; i < 10_000; i++)
        {
            final ObjectMeta m = meta("default", "key-" + i);
            all.add(m);
            index.put(m);
        }
        assertThat(index.capacity()).isGreaterThanOrEqualTo(20_000);
        for (final ObjectMeta m : all.subList(0, 9_990))
        {
            assertThat(index.remove(m)).isTrue();
        }
        assertThat(index.size()).isEqualTo(10);
        assertThat(index.capacity()).isLessThanOrEqualTo(128);
        for (final ObjectMeta m : all.subList(9_990, 10_000))
        {
            assertThat(find(index, m)).isSameAs(m);
        }
    }

    @Test
    void shouldHashDifferentKeysDifferentlyAndNeverToZero()
    {
        final byte[] a = "model/w5/kda128/r0".getBytes(StandardCharsets.UTF_8);
        final byte[] b = "model/w5/kda128/r1".getBytes(StandardCharsets.UTF_8);
        assertThat(KeyBytes.hash(a, 0, a.length)).isNotEqualTo(KeyBytes.hash(b, 0, b.length));
        assertThat(KeyBytes.hash(new byte[0], 0, 0)).isNotZero();
        final byte[] padded = ("xx" + "model/w5/kda128/r0").getBytes(StandardCharsets.UTF_8);
        assertThat(KeyBytes.hash(padded, 2, a.length)).as("offset-independent").isEqualTo(KeyBytes.hash(a, 0, a.length));
    }
}
