package io.granary.master.meta;

import io.granary.master.evict.EvictionPolicy;
import io.granary.master.evict.Evictor;
import io.granary.master.segment.MountedSegment;
import io.granary.proto.LedgerEntry;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Parent links of rebuilt objects under a random mix of what a restarted master sees: ledger entries naming parents
 * (held, not yet reported, malformed, the entry itself, a member of the entry's own group) in any order, newer
 * versions replacing rebuilt objects, puts of keys that children wait for, removes and leaf-first evictions. After
 * every step the links must add up: each live unit's child count is the number of live objects linked to it, the
 * objects waiting for a parent are exactly the live ones without a link that name one, and none waits for a parent the
 * store holds (a missed link would leave a parent evictable before its child: a hole).
 */
class ParentRelinkPropertyTest
{
    private static final int KEYS = 40;
    private static final String[] GROUPS = {"", "", "", "g0", "g1"};

    @Test
    void shouldKeepChildCountsAndWaitingChildrenExactThroughAnyMixOfReportsPutsRemovesAndEvictions()
    {
        for (int seed = 0; seed < 12; seed++)
        {
            run(new Random(seed), seed);
        }
    }

    private static void run(final Random random, final int seed)
    {
        final MetadataFixture f = new MetadataFixture(16).mount("put-node", 64L << 20);
        assertThat(f.registry.mount("ledger-node", "ledger-node", "127.0.0.1:7099", 99, "ledger-node/seg0", 64L << 20,
            true).code).isEqualTo(OK_VALUE);
        final MountedSegment reported = f.registry.segment("ledger-node", 99);
        final Evictor evictor = f.evictor(1.0, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        long version = 1;
        long offset = 0;
        for (int step = 0; step < 600; step++)
        {
            final int op = random.nextInt(20);
            final String key = "k" + random.nextInt(KEYS);
            if (op < 12)
            {
                final LedgerEntry e = LedgerEntry.newBuilder().setTenant(T).setKey(key).setOffset(offset)
                    .setValueLength(100).setVersion(version++).setAgeMs(random.nextInt(10_000))
                    .setGroupId(GROUPS[random.nextInt(GROUPS.length)]).setParentKey(parentKey(random, key)).build();
                offset += 4096;
                f.store.adopt(reported, e); // any outcome: newer versions replace, same versions may be refused
            }
            else if (op < 15)
            {
                f.putCode(T, key, 100, PutOptions.newBuilder().setParentKey(parentKey(random, key)).build());
            }
            else if (op < 18)
            {
                f.store.remove(T, key, true);
            }
            else
            {
                evictor.evict(100L * (1 + random.nextInt(3)));
            }
            checkLinks(f, "seed " + seed + ", step " + step);
        }
    }

    /** Another key, none, the key itself, or a malformed one (a NUL). */
    private static String parentKey(final Random random, final String key)
    {
        final int kind = random.nextInt(12);
        return kind == 0 ? "" : kind == 1 ? key : kind == 2 ? "bad\u0000key" : "k" + random.nextInt(KEYS);
    }

    private static void checkLinks(final MetadataFixture f, final String when)
    {
        final List<ObjectMeta> live = new ArrayList<>();
        for (int i = 0; i < KEYS; i++)
        {
            final ObjectMeta m = f.store.lockForKey(T, "k" + i);
            if (m != null)
            {
                live.add(m);
                f.store.unlockOwner(m);
            }
        }
        final Map<Object, Integer> children = new IdentityHashMap<>();
        int waiting = 0;
        for (final ObjectMeta m : live)
        {
            if (m.parentUnit != null)
            {
                children.merge(m.parentUnit, 1, Integer::sum);
            }
            else if (m.parentKeyBytes != null)
            {
                waiting++;
                final String parent = new String(m.parentKeyBytes, java.nio.charset.StandardCharsets.UTF_8);
                final ObjectMeta held = f.store.lockForKey(T, parent);
                if (held != null)
                {
                    final boolean sameGroup = held.group != null && held.group == m.group;
                    f.store.unlockOwner(held);
                    assertThat(sameGroup).as("%s: %s waits for %s, which the store holds", when, m.key(), parent)
                        .isTrue();
                }
            }
        }
        for (final ObjectMeta m : live)
        {
            final Object unit = ParentLinks.unitOf(m);
            assertThat(ParentLinks.childRefs(unit)).as("%s: children of %s's unit", when, m.key())
                .isEqualTo(children.getOrDefault(unit, 0));
        }
        assertThat(f.store.rebuiltAwaitingParents()).as("%s: objects waiting for a parent", when).isEqualTo(waiting);
    }
}
