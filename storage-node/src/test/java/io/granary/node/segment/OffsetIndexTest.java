package io.granary.node.segment;

import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class OffsetIndexTest
{
    private final OffsetIndex index = new OffsetIndex();

    @Test
    void shouldFindTheEntryStartingLastBelowAPositionAcrossEmptyRegions()
    {
        final long far = 40 * OffsetIndex.REGION_BYTES;
        index.put(4096, 1);
        index.put(OffsetIndex.REGION_BYTES - 64, 2); // the last bytes of region 0
        index.put(far + 128, 3);

        assertThat(index.lower(0)).isEqualTo(-1);
        assertThat(index.lower(4096)).as("strictly below").isEqualTo(-1);
        assertThat(index.lower(4097)).isEqualTo(1);
        assertThat(index.lower(OffsetIndex.REGION_BYTES - 64)).isEqualTo(1);
        assertThat(index.lower(OffsetIndex.REGION_BYTES)).isEqualTo(2);
        assertThat(index.lower(far + 128)).as("39 empty regions back").isEqualTo(2);
        assertThat(index.lower(far + 129)).isEqualTo(3);
        assertThat(index.lower(Long.MAX_VALUE)).as("beyond every region").isEqualTo(3);
        assertThat(index.get(far + 128)).isEqualTo(3);
        assertThat(index.get(far)).isEqualTo(-1);
        assertThat(index.get(-1)).isEqualTo(-1);
        assertThat(index.slotsInOrder()).containsExactly(1, 2, 3);

        assertThat(index.remove(OffsetIndex.REGION_BYTES - 64)).isEqualTo(2);
        assertThat(index.remove(OffsetIndex.REGION_BYTES - 64)).isEqualTo(-1);
        assertThat(index.lower(far + 128)).isEqualTo(1);
        assertThat(index.size()).isEqualTo(2);
    }

    @Test
    void shouldRefuseADuplicateOrNegativeOffset()
    {
        index.put(64, 1);

        assertThatThrownBy(() -> index.put(64, 2)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> index.put(-64, 2)).isInstanceOf(IllegalArgumentException.class);
        assertThat(index.get(64)).isEqualTo(1);
        assertThat(index.size()).isEqualTo(1);
    }

    @Test
    void shouldAnswerAsATreeMapDoesUnderRandomPutsAndRemoves()
    {
        final Random random = new Random(20261202);
        final TreeMap<Long, Integer> model = new TreeMap<>();
        final long span = 8 * OffsetIndex.REGION_BYTES;
        for (int step = 0; step < 200_000; step++)
        {
            final long offset = (random.nextLong() & Long.MAX_VALUE) % span / 64 * 64;
            final int op = random.nextInt(10);
            if (op < 5)
            {
                if (!model.containsKey(offset))
                {
                    model.put(offset, step);
                    index.put(offset, step);
                }
            }
            else if (op < 8)
            {
                final Integer expected = model.remove(offset);
                assertThat(index.remove(offset)).isEqualTo(expected == null ? -1 : expected);
            }
            else
            {
                final Map.Entry<Long, Integer> lower = model.lowerEntry(offset + 1);
                assertThat(index.lower(offset + 1)).isEqualTo(lower == null ? -1 : lower.getValue());
                final Integer exact = model.get(offset);
                assertThat(index.get(offset)).isEqualTo(exact == null ? -1 : exact);
            }
            if (step % 50_000 == 0)
            {
                assertThat(index.slotsInOrder()).containsExactly(model.values().stream().mapToInt(Integer::intValue).toArray());
            }
        }
        assertThat(index.size()).isEqualTo(model.size());
        assertThat(index.slotsInOrder()).containsExactly(model.values().stream().mapToInt(Integer::intValue).toArray());
        model.keySet().forEach(index::remove);
        assertThat(index.size()).isZero();
        assertThat(index.lower(Long.MAX_VALUE)).isEqualTo(-1);
    }
}
