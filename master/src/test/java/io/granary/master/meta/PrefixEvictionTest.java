package io.granary.master.meta;

import io.granary.master.evict.EvictionPolicy;
import io.granary.master.evict.Evictor;
import io.granary.proto.PutOptions;
import io.granary.proto.SoftPinAction;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;

/** Parent links and the prefix-aware eviction policy on a real store and evictor, on a manual clock. */
class PrefixEvictionTest
{
    static final long PAGE = 1 << 20;

    final MetadataFixture f = new MetadataFixture(64).mount("n1", 64L << 20);

    static PutOptions parent(final String parentKey)
    {
        return PutOptions.newBuilder().setParentKey(parentKey).build();
    }

    static PutOptions block(final String groupId, final String parentKey)
    {
        return PutOptions.newBuilder().setGroupId(groupId).setParentKey(parentKey).build();
    }

    /**
     * c0 <- c1 <- c2, then an unrelated x; c0 is read later, so by age the order is c1, c2, x, c0. Times: puts at 1, 2,
     * 3, 4 ms, the read of c0 at 5 ms; every lease has expired when eviction runs.
     */
    private void chainWithReadRoot()
    {
        f.clock.advanceMillis(1);
        f.put("c0", PAGE);
        f.clock.advanceMillis(1);
        f.put("c1", PAGE, parent("c0"));
        f.clock.advanceMillis(1);
        f.put("c2", PAGE, parent("c1"));
        f.clock.advanceMillis(1);
        f.put("x", PAGE);
        f.clock.advanceMillis(1);
        assertThat(f.store.exists(T, "c0", true)).isEqualTo(1);
        f.clock.advance(Duration.ofSeconds(11));
    }

    /** Evicts one unit per round and returns the keys in the order they went. */
    private List<String> evictionOrder(final Evictor evictor, final String... keys)
    {
        final List<String> order = new ArrayList<>();
        for (int round = 0; round < keys.length; round++)
        {
            assertThat(evictor.evict(1).totalObjects()).as("round " + round).isPositive();
            for (final String k : keys)
            {
                if (!order.contains(k) && !f.present(k))
                {
                    order.add(k);
                }
            }
        }
        return order;
    }

    @Test
    void shouldCountChildrenOnTheParentsUnit()
    {
        chainWithReadRoot();

        assertThat(f.childRefs("c0")).isEqualTo(1);
        assertThat(f.childRefs("c1")).isEqualTo(1);
        assertThat(f.childRefs("c2")).isZero();
        assertThat(f.store.parentLinks()).isEqualTo(2);
        assertThat(f.store.parentsMissing()).isZero();
    }

    @Test
    void shouldEvictAChainFromItsLeafUnderPrefixLeafFirst()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        chainWithReadRoot();

        assertThat(evictionOrder(evictor, "c0", "c1", "c2", "x")).containsExactly("c2", "c1", "x", "c0");
        assertThat(evictor.prefixBreaks()).isZero();
    }

    @Test
    void shouldEvictTheMiddleOfAChainUnderOldestLeaseAndCountTheBreak()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.OLDEST_LEASE);
        chainWithReadRoot();

        assertThat(evictionOrder(evictor, "c0", "c1", "c2", "x")).containsExactly("c1", "c2", "x", "c0");
        assertThat(evictor.prefixBreaks()).isEqualTo(1);
    }

    @Test
    void shouldTakeAParentFreedInTheSameRoundBeforeYoungerLeaves()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        chainWithReadRoot();

        final Evictor.Result r = evictor.evict(2 * PAGE);

        assertThat(r.totalObjects()).isEqualTo(2);
        assertThat(f.present("c2")).isFalse();
        assertThat(f.present("c1")).isFalse();
        assertThat(f.present("x")).isTrue();
        assertThat(f.present("c0")).isTrue();
    }

    @Test
    void shouldKeepABlockGroupWhileAChildBlockRemains()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("b0.r0", PAGE, block("b0", ""));
        f.put("b0.r1", PAGE, block("b0", ""));
        f.clock.advanceMillis(1);
        f.put("b1.r0", PAGE, block("b1", "b0.r0"));
        f.put("b1.r1", PAGE, block("b1", "b0.r1"));
        f.clock.advanceMillis(1);
        f.put("solo", PAGE);

        assertThat(f.childRefs("b0.r1")).isEqualTo(2); // both children count on group b0
        assertThat(f.childRefs("b1.r0")).isZero();
        // Oldest is b0, but b1 names it: b1 goes first, whole, then b0, then solo.
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(2);
        assertThat(f.present("b1.r0") || f.present("b1.r1")).isFalse();
        assertThat(f.present("b0.r0") && f.present("b0.r1")).isTrue();
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(2);
        assertThat(f.present("b0.r0") || f.present("b0.r1")).isFalse();
        assertThat(f.present("solo")).isTrue();
    }

    @Test
    void shouldNotLinkAMemberOfTheSameGroupAsParent()
    {
        f.put("b0.l0", PAGE, block("b0", ""));
        f.put("b0.l1", PAGE, block("b0", "b0.l0"));

        assertThat(f.childRefs("b0.l0")).isZero();
        assertThat(f.store.parentLinks()).isZero();
    }

    @Test
    void shouldFallBackToAParentWhenOnlyBlocksWithChildrenRemainAndCountTheBreak()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("p", PAGE);
        f.put("c", PAGE, PutOptions.newBuilder().setParentKey("p").setHardPin(true).build());

        final Evictor.Result r = evictor.evict(PAGE);

        assertThat(r.totalObjects()).isEqualTo(1);
        assertThat(f.present("p")).isFalse();
        assertThat(f.present("c")).isTrue();
        assertThat(evictor.prefixBreaks()).isEqualTo(1);
    }

    @Test
    void shouldNotFailAnAllocationWhenOnlyParentsOfLeasedBlocksAreEvictable()
    {
        f.evictor(0.99, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        for (int i = 0; i < 32; i++)
        {
            f.put("p" + i, PAGE);
            f.put("c" + i, PAGE, parent("p" + i));
            assertThat(f.store.exists(T, "c" + i, true)).isEqualTo(1); // every leaf leased, parents not
            f.clock.advanceMillis(1);
        }

        f.put("new", PAGE); // the pool is full: only a parent can make room

        assertThat(f.present("new")).isTrue();
        assertThat(f.present("p0")).isFalse();
        assertThat(f.present("c0")).isTrue();
    }

    @Test
    void shouldKeepAnUnpinnedParentOfSoftPinnedBlocksUntilPassTwo()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("old", PAGE);
        f.clock.advanceMillis(1);
        f.put("p", PAGE);
        f.clock.advanceMillis(1);
        f.put("c", PAGE, PutOptions.newBuilder().setParentKey("p")
            .setSoftPin(SoftPinAction.SOFT_PIN_ENABLE).setSoftPinTtlMs(3_600_000).build());

        // Pass 1 has one unpinned leaf: old. Then pass 2 takes the soft-pinned leaf c, and then its parent p.
        assertThat(evictor.evict(1).objects[0]).isEqualTo(1);
        assertThat(f.present("old")).isFalse();
        final Evictor.Result r = evictor.evict(2 * PAGE);
        assertThat(r.objects[1]).isEqualTo(1);
        assertThat(r.objects[0]).isEqualTo(1);
        assertThat(f.present("c") || f.present("p")).isFalse();
        assertThat(evictor.prefixBreaks()).isZero();
    }

    @Test
    void shouldBreakAChainRatherThanEvictSoftPinnedBlocksWhenPassTwoIsNotAllowed()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, false, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("p", PAGE);
        f.put("c", PAGE, PutOptions.newBuilder().setParentKey("p")
            .setSoftPin(SoftPinAction.SOFT_PIN_ENABLE).setSoftPinTtlMs(3_600_000).build());

        assertThat(evictor.evict(PAGE).totalObjects()).isEqualTo(1);

        assertThat(f.present("p")).isFalse();
        assertThat(f.present("c")).isTrue();
        assertThat(evictor.prefixBreaks()).isEqualTo(1);
    }

    @Test
    void shouldStoreAnObjectWhoseParentDoesNotExistAsALeaf()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("orphan", PAGE, parent("never-stored"));

        assertThat(f.store.parentsMissing()).isEqualTo(1);
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
        assertThat(f.present("orphan")).isFalse();
    }

    @Test
    void shouldKeepWorkingWhenAParentIsRemovedAndStoredAgain()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("p", PAGE);
        f.clock.advanceMillis(1);
        f.put("c", PAGE, parent("p"));
        assertThat(f.store.remove(T, "p", false)).isEqualTo(OK_VALUE);
        f.clock.advanceMillis(1);
        f.put("p", PAGE); // a new object: the old link does not carry over

        assertThat(f.childRefs("p")).isZero();
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
        assertThat(f.present("c")).isFalse(); // the oldest leaf
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
        assertThat(f.present("p")).isFalse();
        assertThat(evictor.prefixBreaks()).isZero();
    }

    @Test
    void shouldReleaseTheLinkWhenAChildIsRevokedRemovedOrRefused()
    {
        f.put("p", PAGE);
        assertThat(f.store.putStart(T, CLIENT, "c", PAGE, parent("p"), new ArrayList<>())).isEqualTo(OK_VALUE);
        assertThat(f.childRefs("p")).isEqualTo(1); // an unfinished child already counts
        assertThat(f.store.putRevoke(T, CLIENT, "c")).isEqualTo(OK_VALUE);
        assertThat(f.childRefs("p")).isZero();

        f.put("c", PAGE, parent("p"));
        assertThat(f.putCode(T, "c", PAGE, parent("p"))).isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(f.childRefs("p")).isEqualTo(1); // the refused second put did not count
        assertThat(f.store.remove(T, "c", false)).isEqualTo(OK_VALUE);
        assertThat(f.childRefs("p")).isZero();

        assertThat(f.putCode(T, "too-big", 128L << 20, parent("p"))).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(f.childRefs("p")).isZero();
    }

    @Test
    void shouldReleaseTheLinkWhenTheChildsSegmentIsLost()
    {
        final MetadataFixture two = new MetadataFixture(64).mount("n1", 64L << 20).mount("n2", 64L << 20);
        two.put("p", PAGE, PutOptions.newBuilder().setPreferredSegment("n1/seg0").build());
        two.put("c", PAGE, PutOptions.newBuilder().setParentKey("p").setPreferredSegment("n2/seg0").build());
        assertThat(two.childRefs("p")).isEqualTo(1);

        java.util.Arrays.stream(two.registry.liveSegments()).filter(s -> s.name().equals("n2/seg0")).findFirst()
            .ifPresent(s -> two.store.purgeSegments(java.util.Set.of(s)));

        assertThat(two.present("c")).isFalse();
        assertThat(two.childRefs("p")).isZero();
    }

    @Test
    void shouldRefuseAMalformedParentKey()
    {
        assertThat(f.putCode(T, "k", PAGE, parent("bad\u0000key"))).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(f.putCode(T, "k", PAGE, parent("x".repeat(5000)))).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(f.present("k")).isFalse();
    }

    @Test
    void shouldIgnoreAnObjectNamingItselfAsParent()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.put("self", PAGE, parent("self"));

        assertThat(f.childRefs("self")).isZero();
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
    }
}
