package io.granary.master.meta;

import io.granary.master.evict.Evictor;
import io.granary.proto.LeaseMode;
import io.granary.proto.PutOptions;
import io.granary.proto.SoftPinAction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.*;
import static io.granary.proto.LeaseMode.*;
import static org.assertj.core.api.Assertions.assertThat;

/** The metadata semantics of DESIGN.md, scenario by scenario, on a manual clock. */
class SemanticsScenarioTest
{
    static final long PAGE = 1 << 20;

    final MetadataFixture f = new MetadataFixture(64).mount("n1", 64L << 20);

    static PutOptions softPin(final SoftPinAction action, final Long ttlMs)
    {
        final PutOptions.Builder b = PutOptions.newBuilder().setSoftPin(action);
        if (ttlMs != null)
        {
            b.setSoftPinTtlMs(ttlMs);
        }
        return b.build();
    }

    static PutOptions group(final String groupId)
    {
        return PutOptions.newBuilder().setGroupId(groupId).build();
    }

    // ------------------------------------------------------------------------------------ BatchProbeKey

    @Test
    void shouldSelectTheRfcCheckpointExample()
    {
        // KV through 384; checkpoints 128 (r0 ok, r1 ok), 256 (r0 missing, r1 ok), 384 (r0 ok, r1 missing).
        f.put("kda128.r0", 100);
        f.put("kda128.r1", 100);
        f.put("kda256.r1", 100);
        f.put("kda384.r0", 100);
        final boolean[] mask = f.probe(LEASE_MODE_LAST_HIT_ONLY, 2, OK_VALUE,
            "kda128.r0", "kda128.r1", "kda256.r0", "kda256.r1", "kda384.r0", "kda384.r1");
        assertThat(mask).containsExactly(true, true, false, false, false, false);
        assertThat(f.leased("kda128.r0")).isTrue();
        assertThat(f.leased("kda128.r1")).isTrue();
        assertThat(f.leased("kda256.r1")).isFalse();
        assertThat(f.leased("kda384.r0")).isFalse();
    }

    @Test
    void shouldReturnAllFalseAndLeaseNothingWhenNoCandidateIsComplete()
    {
        f.put("a0", 100);
        f.put("b1", 100);
        final boolean[] mask = f.probe(LEASE_MODE_LAST_HIT_ONLY, 2, OK_VALUE, "a0", "a1", "b0", "b1");
        assertThat(mask).containsExactly(false, false, false, false);
        assertThat(f.leased("a0")).isFalse();
        assertThat(f.leased("b1")).isFalse();
    }

    @Test
    void shouldSelectOnlyTheLastOfSeveralCompleteCandidates()
    {
        for (final String k : new String[]{"c0", "c1", "d0", "d1", "e0", "e1"})
        {
            f.put(k, 100);
        }
        final boolean[] mask = f.probe(LEASE_MODE_LAST_HIT_ONLY, 2, OK_VALUE, "c0", "c1", "d0", "d1", "e0", "e1");
        assertThat(mask).containsExactly(false, false, false, false, true, true);
        assertThat(f.leased("c0")).isFalse();
        assertThat(f.leased("d1")).isFalse();
        assertThat(f.leased("e0")).isTrue();
        assertThat(f.leased("e1")).isTrue();
    }

    @ParameterizedTest
    @CsvSource({"0", "-1", "4", "5"})
    void shouldRefuseBadCandidateSizesWithoutLeasing(final int n)
    {
        for (final String k : new String[]{"a", "b", "c", "d", "e", "f"})
        {
            f.put(k, 100);
        }
        f.probe(LEASE_MODE_LAST_HIT_ONLY, n, INVALID_PARAMS_VALUE, "a", "b", "c", "d", "e", "f");
        f.probe(LEASE_MODE_LONGEST_PREFIX, n, INVALID_PARAMS_VALUE, "a", "b", "c", "d", "e", "f");
        f.probe(LEASE_MODE_LONGEST_PREFIX_LAST_ONLY, n, INVALID_PARAMS_VALUE, "a", "b", "c", "d", "e", "f");
        for (final String k : new String[]{"a", "b", "c", "d", "e", "f"})
        {
            assertThat(f.leased(k)).as(k).isFalse();
        }
    }

    @Test
    void shouldAnswerAnEmptyRequestWithAnEmptyResult()
    {
        assertThat(f.probe(LEASE_MODE_LAST_HIT_ONLY, 0, OK_VALUE)).isEmpty();
        assertThat(f.probe(LEASE_MODE_LONGEST_PREFIX, 3, OK_VALUE)).isEmpty();
    }

    @Test
    void shouldRefuseAnUnknownMode()
    {
        final boolean[] mask = new boolean[1];
        assertThat(f.probe.probe(T, LeaseMode.UNRECOGNIZED, 1, List.of("a"), mask, new int[1]))
            .isEqualTo(INVALID_PARAMS_VALUE);
    }

    @Test
    void shouldLeaseADuplicatedKeyOnce()
    {
        f.put("x", 100);
        final long before = f.store.leaseGrants();
        final boolean[] mask = f.probe(LEASE_MODE_LAST_HIT_ONLY, 2, OK_VALUE, "x", "x");
        assertThat(mask).containsExactly(true, true);
        assertThat(f.store.leaseGrants() - before).isEqualTo(1);
    }

    @Test
    void shouldNeitherGrantNorExtendLeasesInModeNone()
    {
        f.put("a", 100);
        f.put("b", 100);
        f.store.exists(T, "a", true);
        final long deadline = f.leaseDeadline("a");
        f.clock.advance(Duration.ofSeconds(3));
        final boolean[] mask = f.probe(LEASE_MODE_NONE, 0, OK_VALUE, "a", "b", "missing");
        assertThat(mask).containsExactly(true, true, false);
        assertThat(f.leaseDeadline("a")).isEqualTo(deadline);
        assertThat(f.leased("b")).isFalse();
    }

    @Test
    void shouldReportPerKeyErrorsWithoutLeasing()
    {
        f.put("a", 100);
        final boolean[] mask = new boolean[2];
        final int[] codes = new int[2];
        assertThat(f.probe.probe(T, LEASE_MODE_LAST_HIT_ONLY, 1, List.of("a", ""), mask, codes)).isEqualTo(OK_VALUE);
        assertThat(codes).containsExactly(OK_VALUE, INVALID_KEY_VALUE);
        assertThat(mask).containsExactly(false, false);
        assertThat(f.leased("a")).isFalse();
    }

    @Test
    void shouldStopLongestPrefixAtTheFirstIncompleteCandidate()
    {
        for (final String k : new String[]{"p0", "p1", "q0", "q1", "s0", "s1"})
        {
            f.put(k, 100);
        }
        // Candidate r is incomplete: s is complete but comes after the gap.
        f.put("r0", 100);
        final String[] keys = {"p0", "p1", "q0", "q1", "r0", "r1", "s0", "s1"};
        assertThat(f.probe(LEASE_MODE_LONGEST_PREFIX, 2, OK_VALUE, keys))
            .containsExactly(true, true, true, true, false, false, false, false);
        assertThat(f.leased("p0")).isTrue();
        assertThat(f.leased("q1")).isTrue();
        assertThat(f.leased("r0")).isFalse();
        assertThat(f.leased("s0")).isFalse();
    }

    @Test
    void shouldLeaseOnlyTheLastCandidateOfThePrefixInLastOnlyMode()
    {
        for (final String k : new String[]{"p0", "p1", "q0", "q1", "s0", "s1"})
        {
            f.put(k, 100);
        }
        final String[] keys = {"p0", "p1", "q0", "q1", "r0", "r1", "s0", "s1"};
        assertThat(f.probe(LEASE_MODE_LONGEST_PREFIX_LAST_ONLY, 2, OK_VALUE, keys))
            .containsExactly(false, false, true, true, false, false, false, false);
        assertThat(f.leased("p0")).isFalse();
        assertThat(f.leased("q0")).isTrue();
        assertThat(f.leased("q1")).isTrue();
        assertThat(f.leased("s0")).isFalse();
        assertThat(f.probe(LEASE_MODE_LONGEST_PREFIX, 2, OK_VALUE, "r0", "r1", "p0", "p1"))
            .containsExactly(false, false, false, false);
    }

    @ParameterizedTest
    @CsvSource({"LEASE_MODE_LAST_HIT_ONLY, 6, 8", "LEASE_MODE_LONGEST_PREFIX, 0, 4",
        "LEASE_MODE_LONGEST_PREFIX_LAST_ONLY, 2, 4"})
    void shouldAnswerTheReplicaListsOfExactlyTheKeysAProbeLeases(final LeaseMode mode, final int from, final int to)
    {
        // Candidates p, q complete, r missing a member, s complete: each mode leases [from, to) of the keys.
        for (final String k : new String[]{"p0", "p1", "q0", "q1", "r0", "s0", "s1"})
        {
            f.put(k, 100 + k.hashCode() % 50);
        }
        final List<String> keys = List.of("p0", "p1", "q0", "q1", "r0", "r1", "s0", "s1");
        final boolean[] mask = new boolean[keys.size()];
        // Lists are asked for the second member of every candidate only (entries left null are not filled).
        final MetadataStore.Lookup[] located = new MetadataStore.Lookup[keys.size()];
        for (int i = 1; i < keys.size(); i += 2)
        {
            located[i] = new MetadataStore.Lookup();
        }
        assertThat(f.probe.probe(T, mode, 2, KeyBatch.of(keys), mask, new int[keys.size()], located, null))
            .isEqualTo(OK_VALUE);
        for (int i = 0; i < keys.size(); i++)
        {
            final boolean selected = i >= from && i < to;
            assertThat(mask[i]).as(keys.get(i)).isEqualTo(selected);
            assertThat(f.leased(keys.get(i))).as(keys.get(i)).isEqualTo(selected);
            if (i % 2 == 0)
            {
                assertThat(located[i]).as(keys.get(i)).isNull();
                continue;
            }
            if (!selected)
            {
                assertThat(located[i].replicas).as(keys.get(i)).isNull();
                continue;
            }
            final MetadataStore.Lookup direct = new MetadataStore.Lookup();
            f.store.getReplicaList(T, keys.get(i), direct);
            assertThat(located[i].code).isEqualTo(OK_VALUE);
            assertThat(located[i].sizeBytes).isEqualTo(direct.sizeBytes).isEqualTo(100 + keys.get(i).hashCode() % 50);
            assertThat(located[i].replicas).isEqualTo(direct.replicas).hasSize(1);
        }
    }

    @Test
    void shouldLeaveReplicaListsUnfilledWhenAProbeSelectsNothing()
    {
        f.put("a0", 100);
        final MetadataStore.Lookup[] located = {new MetadataStore.Lookup(), new MetadataStore.Lookup()};
        final boolean[] mask = new boolean[2];
        f.probe.probe(
            T, LEASE_MODE_LONGEST_PREFIX, 2, KeyBatch.of(List.of("a0", "a1")), mask, new int[2], located, null);
        assertThat(mask).containsExactly(false, false);
        assertThat(located).allSatisfy(l -> assertThat(l.replicas).isNull());
        assertThat(f.leased("a0")).isFalse();
    }

    // ------------------------------------------------------------------------------------ leases and removal

    @Test
    void shouldExpireLeasesAndRefuseRemoveUntilThen()
    {
        f.put("k", 100);
        f.store.exists(T, "k", true);
        assertThat(f.store.remove(T, "k", false)).isEqualTo(OBJECT_HAS_LEASE_VALUE);
        f.clock.advance(Duration.ofSeconds(10).plusNanos(1));
        assertThat(f.leased("k")).isFalse();
        assertThat(f.store.remove(T, "k", false)).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldRemoveAllButLeasedKeysAndCountThem()
    {
        f.put("a", 100);
        f.put("b", 100);
        f.put("c", 100);
        f.store.exists(T, "b", true);
        assertThat(f.store.removeMatching(T, null, false)).isEqualTo(2);
        assertThat(f.present("b")).isTrue();
    }

    // ------------------------------------------------------------------------------------ soft and hard pins

    @ParameterizedTest
    @CsvSource({
        "SOFT_PIN_PRESERVE, , OK",
        "SOFT_PIN_PRESERVE, 1000, INVALID_PARAMS",
        "SOFT_PIN_DISABLE, , OK",
        "SOFT_PIN_DISABLE, 1000, INVALID_PARAMS",
        "SOFT_PIN_ENABLE, , OK",
        "SOFT_PIN_ENABLE, 0, OK",
        "SOFT_PIN_ENABLE, 86400000, OK",
        "SOFT_PIN_ENABLE, 86400001, INVALID_PARAMS",
    })
    void shouldValidateSoftPinOptions(final SoftPinAction action, final Long ttlMs, final String expected)
    {
        assertThat(io.granary.proto.ErrorCode.forNumber(f.putCode(T, "k", 100, softPin(action, ttlMs))).name())
            .isEqualTo(expected);
    }

    @Test
    void shouldPinFromFirstReadabilityAndNeverExtendOnReads()
    {
        f.start("k", 100);
        f.clock.advance(Duration.ofMinutes(5));
        // A put in flight: PutStart above carried no pin; start a pinned one.
        f.put("pinned", 100, softPin(SoftPinAction.SOFT_PIN_ENABLE, Duration.ofMinutes(1).toMillis()));
        assertThat(f.store.softPinnedCount()).isEqualTo(1);
        f.clock.advance(Duration.ofSeconds(50));
        f.store.exists(T, "pinned", true); // reads never extend the pin
        f.clock.advance(Duration.ofSeconds(11));
        assertThat(f.store.expireSoftPins()).isEqualTo(1);
        assertThat(f.store.softPinnedCount()).isZero();
    }

    @Test
    void shouldUseTheDefaultSoftPinTtlWhenEnableHasNone()
    {
        f.put("k", 100, softPin(SoftPinAction.SOFT_PIN_ENABLE, null));
        f.clock.advance(Duration.ofMinutes(29));
        assertThat(f.store.expireSoftPins()).isZero();
        f.clock.advance(Duration.ofMinutes(1));
        assertThat(f.store.expireSoftPins()).isEqualTo(1);
    }

    @Test
    void shouldStoreOrdinaryCacheForEnableWithTtlZero()
    {
        f.put("k", 100, softPin(SoftPinAction.SOFT_PIN_ENABLE, 0L));
        assertThat(f.store.softPinnedCount()).isZero();
    }

    @Test
    void shouldApplyPinActionsWhenAnExistingObjectIsPutAgain()
    {
        f.put("k", 100);
        assertThat(f.putCode(T, "k", 100, softPin(SoftPinAction.SOFT_PIN_ENABLE, 60_000L)))
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(f.store.softPinnedCount()).isEqualTo(1);
        assertThat(f.putCode(T, "k", 100, softPin(SoftPinAction.SOFT_PIN_PRESERVE, null)))
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(f.store.softPinnedCount()).isEqualTo(1);
        assertThat(f.putCode(T, "k", 100, softPin(SoftPinAction.SOFT_PIN_DISABLE, null)))
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(f.store.softPinnedCount()).isZero();
    }

    /** Fills 64 MiB with 1 MiB pages, some soft pinned, then forces room for more. */
    private void fillWithSomePinned(final int pinnedEvery)
    {
        for (int i = 0; i < 64; i++)
        {
            final PutOptions o = i % pinnedEvery == 0 ?
                softPin(SoftPinAction.SOFT_PIN_ENABLE, Duration.ofHours(1).toMillis()) : PutOptions.getDefaultInstance();
            f.put("page-" + i, PAGE, o);
            f.clock.advanceMillis(1);
        }
    }

    @Test
    void shouldKeepSoftPinnedObjectsThroughAFillThatEvictsOrdinaryOnes()
    {
        f.evictor(0.9, 0.25, true);
        fillWithSomePinned(4);
        for (int i = 0; i < 16; i++)
        {
            f.put("more-" + i, PAGE);
        }
        for (int i = 0; i < 64; i += 4)
        {
            assertThat(f.present("page-" + i)).as("pinned page-" + i).isTrue();
        }
        assertThat(f.present("page-1")).isFalse();
    }

    @Test
    void shouldEvictSoftPinnedObjectsOnlyInPassTwoAndOnlyIfAllowed()
    {
        final Evictor allowed = f.evictor(0.9, 0.05, true);
        fillWithSomePinned(2);
        final Evictor.Result r = allowed.evict(48 * PAGE);
        assertThat(r.objects[0]).isEqualTo(32);
        assertThat(r.objects[1]).isEqualTo(16);
        assertThat(f.present("page-0")).isFalse();
        assertThat(f.present("page-62")).isTrue();
    }

    @Test
    void shouldKeepEverySoftPinnedObjectWhenEvictingThemIsNotAllowed()
    {
        final Evictor strict = f.evictor(0.9, 0.05, false);
        fillWithSomePinned(2);
        final Evictor.Result r = strict.evict(64 * PAGE);
        assertThat(r.objects[0]).isEqualTo(32);
        assertThat(r.objects[1]).isZero();
        for (int i = 0; i < 64; i += 2)
        {
            assertThat(f.present("page-" + i)).isTrue();
        }
        assertThat(f.putCode(T, "one-more-than-fits", 33 * PAGE, PutOptions.getDefaultInstance()))
            .isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
    }

    @Test
    void shouldNeverEvictHardPinnedObjectsButLetThemBeRemoved()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        f.put("hard", PAGE, PutOptions.newBuilder().setHardPin(true).build());
        f.put("soft", PAGE);
        assertThat(evictor.evict(64 * PAGE).totalObjects()).isEqualTo(1);
        assertThat(f.present("hard")).isTrue();
        assertThat(f.store.remove(T, "hard", false)).isEqualTo(OK_VALUE);
    }

    // ------------------------------------------------------------------------------------ eviction order

    @Test
    void shouldEvictExactlyOldestLeaseFirst()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        for (int i = 0; i < 10; i++)
        {
            f.put("k" + i, PAGE);
            f.clock.advanceMillis(10);
        }
        // Read k0, k1, k2 (in that order): their age becomes their lease deadline, later than any put.
        f.store.exists(T, "k2", true);
        f.clock.advanceMillis(10);
        f.store.exists(T, "k0", true);
        f.clock.advanceMillis(10);
        f.store.exists(T, "k1", true);
        f.clock.advance(Duration.ofSeconds(11)); // all leases expired
        final List<String> order = new ArrayList<>();
        for (int round = 0; round < 10; round++)
        {
            assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
            for (int i = 0; i < 10; i++)
            {
                if (!order.contains("k" + i) && !f.present("k" + i))
                {
                    order.add("k" + i);
                }
            }
        }
        assertThat(order).containsExactly("k3", "k4", "k5", "k6", "k7", "k8", "k9", "k2", "k0", "k1");
    }

    @Test
    void shouldNeverEvictLeasedOrIncompleteObjects()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        f.put("leased", PAGE);
        f.store.exists(T, "leased", true);
        f.start("incomplete", PAGE);
        f.put("plain", PAGE);
        assertThat(evictor.evict(64 * PAGE).totalObjects()).isEqualTo(1);
        assertThat(f.present("leased")).isTrue();
        assertThat(f.present("plain")).isFalse();
        assertThat(f.store.putEnd(T, CLIENT, "incomplete")).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldEvictOnDemandWhenAnAllocationFails()
    {
        f.evictor(0.99, 0.05, true);
        for (int i = 0; i < 64; i++)
        {
            f.put("k" + i, PAGE);
            f.clock.advanceMillis(1);
        }
        f.put("new", PAGE);
        assertThat(f.present("k0")).isFalse();
        assertThat(f.present("k63")).isTrue();
        assertThat(f.present("new")).isTrue();
    }

    @Test
    void shouldEvictDownFromTheHighWatermarkInTheBackgroundCheck()
    {
        final Evictor evictor = f.evictor(0.5, 0.25, true);
        for (int i = 0; i < 40; i++)
        {
            f.put("k" + i, PAGE);
        }
        assertThat(evictor.maybeEvict()).isNotNull();
        // 40 MiB of 64 MiB used: above 0.5, evicted down to 0.25 = 16 MiB.
        assertThat(f.allocatedBytes()).isLessThanOrEqualTo(16 * PAGE);
        assertThat(evictor.maybeEvict()).isNull();
    }

    // ------------------------------------------------------------------------------------ groups

    @Test
    void shouldRefreshTheWholeGroupWhenOneMemberIsLeased()
    {
        f.put("b1.l0", 100, group("block-1"));
        f.put("b1.l1", 100, group("block-1"));
        f.put("b2.l0", 100, group("block-2"));
        f.store.exists(T, "b1.l0", true);
        assertThat(f.leased("b1.l1")).isTrue();
        assertThat(f.leased("b2.l0")).isFalse();
        assertThat(f.store.remove(T, "b1.l1", false)).isEqualTo(OBJECT_HAS_LEASE_VALUE);
    }

    @Test
    void shouldEvictAGroupAsAWholeAndSkipItWhileAMemberIsLeased()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        f.put("g1.a", PAGE, group("g1"));
        f.put("g1.b", PAGE, group("g1"));
        f.put("g1.c", PAGE, group("g1"));
        f.clock.advanceMillis(5);
        f.put("g2.a", PAGE, group("g2"));
        f.put("g2.b", PAGE, group("g2"));
        f.clock.advanceMillis(5);
        f.put("solo", PAGE);

        // The oldest unit is g1: one round evicting one byte takes all three members.
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(3);
        assertThat(f.present("g1.a") || f.present("g1.b") || f.present("g1.c")).isFalse();

        f.store.exists(T, "g2.b", true);
        assertThat(evictor.evict(1).totalObjects()).isEqualTo(1);
        assertThat(f.present("solo")).isFalse();
        assertThat(f.present("g2.a")).isTrue();
        assertThat(f.present("g2.b")).isTrue();
    }

    @Test
    void shouldSkipHardPinnedGroupMembersIndividually()
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        f.put("g.a", PAGE, group("g"));
        f.put("g.b", PAGE, PutOptions.newBuilder().setGroupId("g").setHardPin(true).build());
        assertThat(evictor.evict(64 * PAGE).totalObjects()).isEqualTo(1);
        assertThat(f.present("g.b")).isTrue();
    }

    @Test
    void shouldKeepGroupMembershipImmutableAndCleanItUpOnRemove()
    {
        f.put("m", 100, group("g"));
        assertThat(f.putCode(T, "m", 100, group("other"))).isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        final int groupShard = f.store.groupShard(T, "g");
        assertThat(f.store.shard(groupShard).group(T, "g")).isNotNull();
        assertThat(f.store.remove(T, "m", false)).isEqualTo(OK_VALUE);
        assertThat(f.store.shard(groupShard).group(T, "g")).isNull();
        assertThat(f.store.shard(groupShard).groupsByTenant).isEmpty();
        assertThat(f.store.shard(f.store.homeShard(T, "m")).keys.size()).isZero();
    }

    @Test
    void shouldProbeGroupedKeysLivingInTheirGroupShard()
    {
        f.put("blk.r0", 100, group("blk"));
        f.put("blk.r1", 100, group("blk"));
        assertThat(f.probe(LEASE_MODE_LAST_HIT_ONLY, 2, OK_VALUE, "blk.r0", "blk.r1")).containsExactly(true, true);
        assertThat(f.leased("blk.r0")).isTrue();
    }

    // ------------------------------------------------------------------------------------ tenants and nodes

    @Test
    void shouldIsolateTenantsInEveryCall()
    {
        assertThat(f.putCode("t1", "k", 100, PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
        assertThat(f.putCode("t2", "k", 200, PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
        assertThat(f.store.objectCount()).isEqualTo(2);
        assertThat(f.store.removeMatching("t1", key -> key.equals("k"), false)).isEqualTo(1);
        assertThat(f.store.exists("t2", "k", false)).isEqualTo(1);
        assertThat(f.store.exists("t1", "k", false)).isZero();
        final boolean[] mask = new boolean[1];
        f.probe.probe("t3", LEASE_MODE_LAST_HIT_ONLY, 1, List.of("k"), mask, new int[1]);
        assertThat(mask).containsExactly(false);
    }

    @Test
    void shouldEraseObjectsWhoseOnlyReplicaWasOnADeadNode()
    {
        f.mount("n2", 64L << 20);
        f.put("on-n2", 100, PutOptions.newBuilder().setPreferredSegment("n2/seg0").build());
        f.put("on-n1", 100, PutOptions.newBuilder().setPreferredSegment("n1/seg0").build());
        f.put("grouped-on-n2", 100, PutOptions.newBuilder().setPreferredSegment("n2/seg0").setGroupId("g").build());
        f.clock.advance(Duration.ofSeconds(6));
        f.registry.heartbeat("n1");
        f.clock.advance(Duration.ofSeconds(6));
        f.store.purgeSegments(new java.util.HashSet<>(f.registry.expire(Duration.ofSeconds(10).toNanos())));
        assertThat(f.present("on-n2")).isFalse();
        assertThat(f.present("grouped-on-n2")).isFalse();
        assertThat(f.present("on-n1")).isTrue();
        assertThat(f.store.objectCount()).isEqualTo(1);
    }
}
