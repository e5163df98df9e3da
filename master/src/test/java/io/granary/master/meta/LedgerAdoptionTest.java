package io.granary.master.meta;

import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.NodeRecord;
import io.granary.proto.FreedExtent;
import io.granary.proto.LedgerEntry;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;
import io.granary.protocol.CommitRecord;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.master.meta.MetadataStore.Adoption.*;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** Rebuilding metadata from the ledgers storage nodes report to a restarted master. */
class LedgerAdoptionTest
{
    private static final long MIB = 1 << 20;
    private final MetadataFixture f = new MetadataFixture(16);

    private MountedSegment mount(final String node, final int segmentId, final boolean ledgerFollows)
    {
        assertThat(f.registry.mount(node, node, "127.0.0.1:" + (7000 + segmentId), segmentId, node + "/seg0", MIB,
            ledgerFollows).code).isEqualTo(OK_VALUE);
        return f.registry.segment(node, segmentId);
    }

    private static LedgerEntry entry(final String key, final long offset, final long length, final long version)
    {
        return LedgerEntry.newBuilder().setTenant(T).setKey(key).setOffset(offset).setValueLength(length)
            .setVersion(version).build();
    }

    private List<Replica> replicas(final String key)
    {
        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        f.store.getReplicaList(T, key, out);
        assertThat(out.code).as("lookup of " + key).isEqualTo(OK_VALUE);
        return out.replicas;
    }

    private List<FreedExtent> freed(final String node)
    {
        final NodeRecord record = f.registry.node(node);
        return record.freed().drain(1000);
    }

    @Test
    void shouldRebuildAReadableObjectAndTakeItsExtentInTheAllocator()
    {
        final MountedSegment seg = mount("a", 11, true);
        assertThat(f.registry.liveSegments()).as("no placement before the report ends").isEmpty();

        assertThat(f.store.adopt(seg, entry("k", 4096, 1000, 77))).isEqualTo(OBJECT);
        f.registry.markPlaceable(seg);

        assertThat(f.present("k")).isTrue();
        assertThat(replicas("k")).singleElement().satisfies(r ->
        {
            assertThat(r.getSegmentId()).isEqualTo(11);
            assertThat(r.getOffset()).isEqualTo(4096);
            assertThat(r.getLength()).isEqualTo(1000);
        });
        assertThat(seg.stats().allocationCount()).isEqualTo(1);
        assertThat(f.registry.liveSegments()).containsExactly(seg);
        // New puts fill around the rebuilt extent, never over it.
        for (int i = 0; i < 200; i++)
        {
            final List<Replica> placed = new ArrayList<>();
            if (f.store.putStart(T, CLIENT, "new-" + i, 4000, PutOptions.getDefaultInstance(), placed) != OK_VALUE)
            {
                break;
            }
            final long off = placed.get(0).getOffset();
            assertThat(off + 4000 <= 4096 || off >= 4096 + 1024).as("new extent at %d", off).isTrue();
        }
        assertThat(f.store.rebuildCounters().objects()).isEqualTo(1);
    }

    @Test
    void shouldDropNewObjectsBeyondTheObjectBudgetButTakeReplicasAndNewerVersionsOfKnownOnes()
    {
        final MetadataFixture small = new MetadataFixture(16, 0, 2);
        assertThat(small.registry.mount("a", "a", "127.0.0.1:7011", 11, "a/seg0", MIB, true).code).isEqualTo(OK_VALUE);
        assertThat(small.registry.mount("b", "b", "127.0.0.1:7012", 12, "b/seg0", MIB, true).code).isEqualTo(OK_VALUE);
        final MountedSegment a = small.registry.segment("a", 11);
        final MountedSegment b = small.registry.segment("b", 12);

        assertThat(small.store.adopt(a, entry("k0", 0, 500, 5))).isEqualTo(OBJECT);
        assertThat(small.store.adopt(a, entry("k1", 1024, 500, 6))).isEqualTo(OBJECT);
        assertThat(small.store.adopt(a, entry("k2", 2048, 500, 7))).isEqualTo(REJECTED_BUDGET);
        assertThat(REJECTED_BUDGET.rejected()).as("the node is told to drop it").isTrue();
        assertThat(small.store.adopt(b, entry("k0", 0, 500, 5))).as("a replica adds no object").isEqualTo(REPLICA);
        assertThat(small.store.adopt(b, entry("k1", 4096, 500, 9))).as("a newer version replaces the object")
            .isEqualTo(OBJECT);

        assertThat(small.store.objectCount()).isEqualTo(2);
        assertThat(small.present("k2")).isFalse();
        assertThat(a.stats().allocationCount()).as("k2's extent stays free on this master").isEqualTo(1);
        assertThat(small.store.rebuildCounters().rejectedBudget()).isEqualTo(1);
        assertThat(small.store.rebuildCounters().objects()).isEqualTo(3);
    }

    @Test
    void shouldTreatEqualVersionsOnTwoNodesAsReplicasAndRepeatedReportsAsDuplicates()
    {
        final MountedSegment a = mount("a", 11, true);
        final MountedSegment b = mount("b", 12, true);

        assertThat(f.store.adopt(a, entry("k", 0, 500, 5))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(b, entry("k", 640, 500, 5))).isEqualTo(REPLICA);
        assertThat(f.store.adopt(b, entry("k", 640, 500, 5))).isEqualTo(DUPLICATE);

        assertThat(replicas("k")).extracting(Replica::getSegmentId).containsExactly(11, 12);
        assertThat(f.store.rebuildCounters().replicas()).isEqualTo(2);
        assertThat(f.store.objectCount()).isEqualTo(1);
    }

    @Test
    void shouldKeepTheReportedChecksumAndRefuseAReplicaWhoseChecksumDiffers()
    {
        final MountedSegment a = mount("a", 11, true);
        final MountedSegment b = mount("b", 12, true);
        final MountedSegment c = mount("c", 13, true);

        assertThat(f.store.adopt(a, entry("k", 0, 500, 5).toBuilder().setCrc32C(0xCAFEBABE).build())).isEqualTo(OBJECT);
        assertThat(f.store.adopt(b, entry("k", 640, 500, 5).toBuilder().setCrc32C(0x12345678).build()))
            .as("same version, other bytes").isEqualTo(REJECTED_INVALID);
        assertThat(f.store.adopt(c, entry("k", 640, 500, 5).toBuilder().setCrc32C(0xCAFEBABE).build()))
            .isEqualTo(REPLICA);

        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        f.store.getReplicaList(T, "k", out);
        assertThat(out.code).isEqualTo(OK_VALUE);
        assertThat(out.hasCrc).as("a rebuilt object is checked on get like any other").isTrue();
        assertThat(out.crc32c).isEqualTo(0xCAFEBABE);
        assertThat(out.replicas).extracting(Replica::getSegmentId).containsExactly(11, 13);

        // An object first reported without a checksum takes one from a later replica's report.
        assertThat(f.store.adopt(a, entry("plain", 4096, 100, 9))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(b, entry("plain", 4096, 100, 9).toBuilder().setCrc32C(7).build())).isEqualTo(REPLICA);
        f.store.getReplicaList(T, "plain", out);
        assertThat(out.hasCrc).isTrue();
        assertThat(out.crc32c).isEqualTo(7);
    }

    @Test
    void shouldTellTheNodeTheVersionOfEveryPutReplicaItGivesBack()
    {
        final MountedSegment a = mount("a", 11, true);
        f.registry.markPlaceable(a);
        final PutOptions one = PutOptions.newBuilder().setReplicas(1).build();
        final long[] removedVersion = new long[1];
        final List<Replica> removedAt = new ArrayList<>();
        assertThat(f.store.putStart(T, CLIENT, "removed", 4096, one, Set.of(), removedAt, removedVersion))
            .isEqualTo(OK_VALUE);
        assertThat(f.store.putEnd(T, CLIENT, "removed")).isEqualTo(OK_VALUE);
        final long[] revokedVersion = new long[1];
        final List<Replica> revokedAt = new ArrayList<>();
        assertThat(f.store.putStart(T, CLIENT, "revoked", 4096, one, Set.of(), revokedAt, revokedVersion))
            .isEqualTo(OK_VALUE);
        assertThat(removedVersion[0]).isPositive();
        assertThat(revokedVersion[0]).isGreaterThan(removedVersion[0]);
        assertThat(freed("a")).isEmpty();

        // Removed without a lease: its extent goes back at once, and the node forgets exactly that version there.
        assertThat(f.store.remove(T, "removed", false)).isEqualTo(OK_VALUE);
        assertThat(freed("a")).singleElement().satisfies(x ->
        {
            assertThat(x.getOffset()).isEqualTo(removedAt.get(0).getOffset());
            assertThat(x.getVersion()).isEqualTo(removedVersion[0]);
        });

        // Revoked: held back for the discard timeout (a write may still land), then given back with its version.
        assertThat(f.store.putRevoke(T, CLIENT, "revoked")).isEqualTo(OK_VALUE);
        assertThat(freed("a")).isEmpty();
        f.clock.advanceMillis(31_000);
        f.store.reclaimAbandonedPuts();
        assertThat(freed("a")).singleElement().satisfies(x ->
        {
            assertThat(x.getOffset()).isEqualTo(revokedAt.get(0).getOffset());
            assertThat(x.getVersion()).isEqualTo(revokedVersion[0]);
        });

        // Abandoned (never ended nor revoked): reclaimed after the release timeout, with its version.
        final long[] abandonedVersion = new long[1];
        final List<Replica> abandonedAt = new ArrayList<>();
        assertThat(f.store.putStart(T, CLIENT, "abandoned", 4096, one, Set.of(), abandonedAt, abandonedVersion))
            .isEqualTo(OK_VALUE);
        f.clock.advanceMillis(601_000);
        assertThat(f.store.reclaimAbandonedPuts()).isEqualTo(1);
        assertThat(freed("a")).singleElement().satisfies(x ->
        {
            assertThat(x.getOffset()).isEqualTo(abandonedAt.get(0).getOffset());
            assertThat(x.getVersion()).isEqualTo(abandonedVersion[0]);
        });
    }

    @Test
    void shouldKeepTheNewestVersionWhicheverNodeReportsFirst()
    {
        final MountedSegment a = mount("a", 11, true);
        final MountedSegment b = mount("b", 12, true);
        assertThat(f.store.adopt(a, entry("old-first", 0, 100, 1))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(b, entry("old-first", 0, 100, 2))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(b, entry("new-first", 4096, 100, 4))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, entry("new-first", 4096, 100, 3))).isEqualTo(REJECTED_STALE);

        assertThat(replicas("old-first")).extracting(Replica::getSegmentId).containsExactly(12);
        assertThat(replicas("new-first")).extracting(Replica::getSegmentId).containsExactly(12);
        assertThat(a.stats().allocationCount()).as("the older extent went back").isZero();
        assertThat(freed("a")).as("node a is told to forget the replaced version")
            .singleElement().satisfies(x ->
            {
                assertThat(x.getOffset()).isZero();
                assertThat(x.getVersion()).isEqualTo(1);
            });
        assertThat(f.store.rebuildCounters().replacedOlder()).isEqualTo(1);
    }

    @Test
    void shouldNeverDisplaceAnObjectPutOnThisMasterAndIssueLargerVersionsThanAnyReported()
    {
        final MountedSegment a = mount("a", 11, false);
        final long reported = f.store.nextVersion() + 1_000_000_000L;
        final MountedSegment b = mount("b", 12, true);
        assertThat(f.store.adopt(b, entry("seen", 0, 64, reported))).isEqualTo(OBJECT);

        final long[] version = new long[1];
        assertThat(f.store.putStart(T, CLIENT, "fresh", 64, PutOptions.getDefaultInstance(), Set.of(),
            new ArrayList<>(), version)).isEqualTo(OK_VALUE);
        assertThat(version[0]).isGreaterThan(reported);
        assertThat(f.store.adopt(b, entry("fresh", 4096, 64, version[0] + 5))).as("a put of this master")
            .isEqualTo(REJECTED_STALE);
        assertThat(a.isPlaceable()).isTrue();
    }

    @Test
    void shouldRefuseOverlappingAndInvalidEntries()
    {
        final MountedSegment a = mount("a", 11, true);
        assertThat(f.store.adopt(a, entry("k1", 0, 1000, 1))).isEqualTo(OBJECT);

        assertThat(f.store.adopt(a, entry("k2", 512, 100, 1))).isEqualTo(REJECTED_OVERLAP);
        assertThat(f.store.adopt(a, entry("", 4096, 10, 1))).as("empty key").isEqualTo(REJECTED_INVALID);
        assertThat(f.store.adopt(a, entry("k3", 4096, 10, 0))).as("version 0").isEqualTo(REJECTED_INVALID);
        assertThat(f.store.adopt(a, entry("k4", MIB - 64, 128, 1))).as("past the end").isEqualTo(REJECTED_INVALID);
        assertThat(f.store.adopt(a, entry("k5", 100, 10, 1))).as("misaligned").isEqualTo(REJECTED_OVERLAP);
        assertThat(f.store.adopt(a, entry("k6", 8192, 10, 1).toBuilder().setTenant("-bad").build()))
            .as("bad tenant").isEqualTo(REJECTED_INVALID);
        final MountedSegment b = mount("b", 12, true);
        assertThat(f.store.adopt(b, entry("k1", 0, 999, 1))).as("same version, other length")
            .isEqualTo(REJECTED_INVALID);

        assertThat(f.store.objectCount()).isEqualTo(1);
        assertThat(a.stats().allocationCount()).isEqualTo(1);
        assertThat(b.stats().allocationCount()).isZero();
    }

    @Test
    void shouldNotBringBackARebuiltObjectRemovedBeforeItsOtherReplicaWasReported()
    {
        final MountedSegment a = mount("a", 11, true);
        final MountedSegment b = mount("b", 12, true);
        assertThat(f.store.adopt(a, entry("gone", 0, 100, 9))).isEqualTo(OBJECT);

        assertThat(f.store.remove(T, "gone", false)).isEqualTo(OK_VALUE);

        assertThat(f.store.adopt(b, entry("gone", 0, 100, 9))).isEqualTo(REJECTED_REMOVED);
        assertThat(f.present("gone")).isFalse();
        assertThat(freed("a")).extracting(FreedExtent::getVersion).containsExactly(9L);
        assertThat(f.store.adopt(b, entry("gone", 0, 100, 10))).as("a newer version is another object")
            .isEqualTo(OBJECT);
    }

    @Test
    void shouldKeepPinsGroupsAndWhatIsLeftOfASoftPin()
    {
        final MountedSegment a = mount("a", 11, true);
        final LedgerEntry soft = entry("soft", 0, 100, 1).toBuilder()
            .setFlags(CommitRecord.FLAG_SOFT_PIN).setSoftPinTtlMs(60_000).setAgeMs(20_000).build();
        final LedgerEntry hard = entry("hard", 4096, 100, 1).toBuilder()
            .setFlags(CommitRecord.FLAG_HARD_PIN).setGroupId("blk-1").build();

        assertThat(f.store.adopt(a, soft)).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, hard)).isEqualTo(OBJECT);

        final ObjectMeta s = f.store.lockForKey(T, "soft");
        try
        {
            assertThat(s.isSoftPinned(f.clock.nanoTime())).isTrue();
            assertThat(s.softPinDeadlineNs() - f.clock.nanoTime()).isEqualTo(TimeUnit.SECONDS.toNanos(40));
            assertThat(s.isAdopted()).isTrue();
        }
        finally
        {
            f.store.unlockOwner(s);
        }
        final ObjectMeta h = f.store.lockForKey(T, "hard");
        try
        {
            assertThat(h.isHardPinned()).isTrue();
            assertThat(h.group().groupId()).isEqualTo("blk-1");
        }
        finally
        {
            f.store.unlockOwner(h);
        }
    }

    @Test
    void shouldAgeRebuiltObjectsFromTheirCommitsSoEvictionTakesTheFirstStored()
    {
        final MountedSegment a = mount("a", 11, true);
        final io.granary.master.evict.Evictor evictor = f.evictor(1.0, 0.1, false);
        // Reported newest first: the order of the report must not become the order of eviction.
        assertThat(f.store.adopt(a, entry("new", 0, 100, 1).toBuilder().setAgeMs(1_000).build())).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, entry("mid", 4096, 100, 2).toBuilder().setAgeMs(3_000).build())).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, entry("old", 8192, 100, 3).toBuilder().setAgeMs(5_000).build())).isEqualTo(OBJECT);
        // A malformed age (a uint64 beyond 2^63 - 1) is the oldest there is, never an age in the future.
        assertThat(f.store.adopt(a, entry("odd", 12288, 100, 4).toBuilder().setAgeMs(-1).build())).isEqualTo(OBJECT);
        assertThat(f.leaseDeadline("odd")).isEqualTo(f.clock.nanoTime() - MetadataStore.MAX_REPORTED_AGE_NS);
        assertThat(f.leaseDeadline("new") - f.clock.nanoTime()).isEqualTo(-TimeUnit.SECONDS.toNanos(1));

        evictor.evict(200); // two objects' worth: the two committed first
        assertThat(f.present("odd")).isFalse();
        assertThat(f.present("old")).isFalse();
        assertThat(f.present("mid")).isTrue();
        assertThat(f.present("new")).isTrue();
    }

    /** An entry naming {@code parent} as its parent ("" none), committed {@code ageMs} before the report. */
    private static LedgerEntry child(
        final String key, final String parent, final long offset, final long version, final long ageMs)
    {
        return entry(key, offset, 100, version).toBuilder().setParentKey(parent).setAgeMs(ageMs).build();
    }

    @Test
    void shouldLinkRebuiltChildrenToTheirParentsWhateverOrderTheyAreReportedInSoLeafFirstKeepsTheChain()
    {
        final MountedSegment a = mount("a", 11, true);
        final MountedSegment b = mount("b", 12, true);
        final io.granary.master.evict.Evictor evictor =
            f.evictor(1.0, 0.1, false, io.granary.master.evict.EvictionPolicy.PREFIX_LEAF_FIRST);
        // c0 <- c1 <- c2 <- c3, committed in chain order (c0 first, the oldest), on two nodes, children reported
        // before their parents; x is unrelated and the youngest.
        assertThat(f.store.adopt(b, child("c2", "c1", 0, 3, 7_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("c3", "c2", 0, 4, 6_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("c0", "", 4096, 1, 9_000))).isEqualTo(OBJECT);
        assertThat(f.store.rebuiltAwaitingParents()).as("c2 waits for c1").isEqualTo(1);
        assertThat(f.store.adopt(b, child("c1", "c0", 4096, 2, 8_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("x", "", 8192, 5, 1_000))).isEqualTo(OBJECT);

        assertThat(f.store.rebuiltAwaitingParents()).isZero();
        assertThat(f.store.rebuildCounters().parentsLinked()).isEqualTo(3);
        assertThat(f.childRefs("c0")).isEqualTo(1);
        assertThat(f.childRefs("c1")).isEqualTo(1);
        assertThat(f.childRefs("c2")).isEqualTo(1);
        assertThat(f.childRefs("c3")).isZero();

        // Oldest lease first would take c0 first (a hole in front of three blocks). Leaf first takes the oldest leaf:
        // c3 (older than x), then c2, a leaf now and still older than x, and so on: the chain from its end.
        final List<String> order = new ArrayList<>();
        for (int round = 0; round < 5; round++)
        {
            assertThat(evictor.evict(1).totalObjects()).as("round %d", round).isPositive();
            for (final String k : List.of("c0", "c1", "c2", "c3", "x"))
            {
                if (!order.contains(k) && !f.present(k))
                {
                    order.add(k);
                }
            }
        }
        assertThat(order).containsExactly("c3", "c2", "c1", "c0", "x");
    }

    @Test
    void shouldLetAChildWaitForAParentNotHeldAndLinkItToTheNextObjectOfThatKey()
    {
        final MountedSegment a = mount("a", 11, true);
        assertThat(f.store.adopt(a, child("c1", "c0", 0, 2, 5_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("orphan", "lost", 4096, 3, 5_000))).isEqualTo(OBJECT);
        assertThat(f.store.rebuiltAwaitingParents()).isEqualTo(2);

        // The parent was lost with a node; an engine puts it again: the waiting child is its child from then on.
        f.registry.markPlaceable(a); // the report ended
        f.put("c0", 100);
        assertThat(f.childRefs("c0")).isEqualTo(1);
        assertThat(f.store.rebuiltAwaitingParents()).isEqualTo(1);
        assertThat(f.store.remove(T, "c1", true)).isEqualTo(OK_VALUE);
        assertThat(f.childRefs("c0")).as("the child's removal gives the count back").isZero();

        // A child that leaves while still waiting leaves nothing behind, and a later parent counts no child.
        assertThat(f.store.remove(T, "orphan", true)).isEqualTo(OK_VALUE);
        assertThat(f.store.rebuiltAwaitingParents()).isZero();
        f.put("lost", 100);
        assertThat(f.childRefs("lost")).isZero();
        assertThat(f.store.rebuildCounters().parentsLinked()).isEqualTo(1);
    }

    @Test
    void shouldNotLinkAnObjectToItselfToAMemberOfItsOwnGroupOrToAMalformedKey()
    {
        final MountedSegment a = mount("a", 11, true);
        assertThat(f.store.adopt(a, child("self", "self", 0, 1, 1_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("g-1", "g-0", 4096, 2, 1_000).toBuilder().setGroupId("g").build()))
            .isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("bad", "nul\u0000key", 8192, 3, 1_000))).as("adopted without the parent")
            .isEqualTo(OBJECT);
        assertThat(f.store.rebuiltAwaitingParents()).as("g-1 waits: g-0 is not known yet").isEqualTo(1);
        assertThat(f.store.adopt(a, child("g-0", "", 12288, 4, 1_000).toBuilder().setGroupId("g").build()))
            .isEqualTo(OBJECT);

        assertThat(f.store.rebuiltAwaitingParents()).isZero();
        assertThat(f.store.rebuildCounters().parentsLinked()).isZero();
        assertThat(f.childRefs("self")).isZero();
        assertThat(f.childRefs("g-0")).as("the group's own count").isZero();
    }

    /**
     * Chains reported by four threads in a random order, on two segments: every child ends linked to its parent
     * exactly once, whichever of a child's adoption and its parent's came first or whether they overlapped.
     */
    @Test
    void shouldLinkEveryChildExactlyOnceWhenReportsOfAChainRace() throws Exception
    {
        final int chains = 24;
        final int length = 10;
        for (int round = 0; round < 20; round++)
        {
            final MetadataFixture store = new MetadataFixture(16);
            assertThat(store.registry.mount("a", "a", "127.0.0.1:7011", 11, "a/seg0", MIB, true).code)
                .isEqualTo(OK_VALUE);
            assertThat(store.registry.mount("b", "b", "127.0.0.1:7012", 12, "b/seg0", MIB, true).code)
                .isEqualTo(OK_VALUE);
            final MountedSegment[] segments = {store.registry.segment("a", 11), store.registry.segment("b", 12)};
            final List<LedgerEntry> entries = new ArrayList<>();
            for (int c = 0; c < chains; c++)
            {
                for (int i = 0; i < length; i++)
                {
                    final int n = c * length + i;
                    entries.add(child("ch" + c + "-" + i, i == 0 ? "" : "ch" + c + "-" + (i - 1), (n / 2) * 4096L,
                        n + 1, 1_000));
                }
            }
            final List<Integer> order = new ArrayList<>();
            for (int n = 0; n < entries.size(); n++)
            {
                order.add(n);
            }
            java.util.Collections.shuffle(order, new java.util.Random(round));
            final java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(4);
            final List<Thread> threads = new ArrayList<>();
            final List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
            for (int t = 0; t < 4; t++)
            {
                final int first = t;
                final Thread thread = new Thread(() ->
                {
                    try
                    {
                        start.await();
                        for (int i = first; i < order.size(); i += 4)
                        {
                            final int n = order.get(i);
                            assertThat(store.store.adopt(segments[n % 2], entries.get(n))).isEqualTo(OBJECT);
                        }
                    }
                    catch (final Throwable ex)
                    {
                        failures.add(ex);
                    }
                });
                thread.start();
                threads.add(thread);
            }
            for (final Thread thread : threads)
            {
                thread.join(30_000);
            }
            assertThat(failures).isEmpty();
            assertThat(store.store.rebuiltAwaitingParents()).as("round %d", round).isZero();
            assertThat(store.store.rebuildCounters().parentsLinked()).isEqualTo(chains * (length - 1));
            for (int c = 0; c < chains; c++)
            {
                for (int i = 0; i < length; i++)
                {
                    assertThat(store.childRefs("ch" + c + "-" + i)).as("round %d, ch%d-%d", round, c, i)
                        .isEqualTo(i == length - 1 ? 0 : 1);
                }
            }
        }
    }

    /** The side that loses a race to link a child (see the next test) gives its count back. */
    @Test
    void shouldGiveBackTheCountOfALinkThatLostItsRace()
    {
        final MountedSegment a = mount("a", 11, true);
        assertThat(f.store.adopt(a, child("p", "", 0, 1, 1_000))).isEqualTo(OBJECT);
        assertThat(f.store.adopt(a, child("c", "p", 4096, 2, 1_000))).isEqualTo(OBJECT);
        final ObjectMeta linked = f.store.lockForKey(T, "c");
        f.store.unlockOwner(linked);
        f.store.linkAwaiting(linked); // as the parent's look for waiting children would, after the child linked itself
        assertThat(f.childRefs("p")).isEqualTo(1);

        assertThat(f.store.adopt(a, child("orphan", "q", 8192, 3, 1_000))).isEqualTo(OBJECT);
        final ObjectMeta gone = f.store.lockForKey(T, "orphan");
        f.store.unlockOwner(gone);
        assertThat(f.store.remove(T, "orphan", true)).isEqualTo(OK_VALUE);
        assertThat(f.store.adopt(a, child("q", "", 12288, 4, 1_000))).isEqualTo(OBJECT);
        gone.parentKeyBytes = "q".getBytes(java.nio.charset.StandardCharsets.UTF_8); // as read before its removal
        f.store.linkAwaiting(gone); // a child removed between the two locks
        assertThat(f.childRefs("q")).isZero();
        assertThat(f.store.rebuildCounters().parentsLinked()).isEqualTo(1);
    }

    /**
     * A child and its parent adopted at the same moment by two threads, many times: both the child's second look for
     * its parent and the parent's look for waiting children may find the other and link; the link must count once.
     */
    @Test
    void shouldCountAChildOnceWhenItAndItsParentAreAdoptedAtTheSameMoment() throws Exception
    {
        final int pairs = 1_000;
        final MetadataFixture store = new MetadataFixture(16);
        assertThat(store.registry.mount("a", "a", "127.0.0.1:7011", 11, "a/seg0", 64 * MIB, true).code)
            .isEqualTo(OK_VALUE);
        final MountedSegment segment = store.registry.segment("a", 11);
        final java.util.concurrent.CyclicBarrier together = new java.util.concurrent.CyclicBarrier(2);
        final List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        final Thread[] threads = new Thread[2];
        for (int t = 0; t < 2; t++)
        {
            final boolean parents = t == 0;
            threads[t] = new Thread(() ->
            {
                try
                {
                    for (int p = 0; p < pairs; p++)
                    {
                        together.await(10, TimeUnit.SECONDS);
                        final LedgerEntry e = parents ? child("parent-" + p, "", p * 8192L, 2L * p + 1, 1_000) :
                            child("child-" + p, "parent-" + p, p * 8192L + 4096, 2L * p + 2, 1_000);
                        assertThat(store.store.adopt(segment, e)).isEqualTo(OBJECT);
                    }
                }
                catch (final Throwable ex)
                {
                    failures.add(ex);
                    together.reset();
                }
            });
            threads[t].start();
        }
        for (final Thread thread : threads)
        {
            thread.join(60_000);
        }
        assertThat(failures).isEmpty();
        assertThat(store.store.rebuiltAwaitingParents()).isZero();
        assertThat(store.store.rebuildCounters().parentsLinked()).isEqualTo(pairs);
        for (int p = 0; p < pairs; p++)
        {
            assertThat(store.childRefs("parent-" + p)).as("parent-%d", p).isEqualTo(1);
        }
    }

    @Test
    void shouldTellNodesAboutEveryFreedVersionedExtent()
    {
        final MountedSegment a = mount("a", 11, false);
        final List<Replica> placed = new ArrayList<>();
        final long[] version = new long[1];
        assertThat(f.store.putStart(T, CLIENT, "k", 100, PutOptions.getDefaultInstance(), Set.of(), placed, version))
            .isEqualTo(OK_VALUE);
        assertThat(f.store.putEnd(T, CLIENT, "k")).isEqualTo(OK_VALUE);
        assertThat(freed("a")).isEmpty();

        assertThat(f.store.remove(T, "k", false)).isEqualTo(OK_VALUE);

        assertThat(freed("a")).singleElement().satisfies(x ->
        {
            assertThat(x.getSegmentId()).isEqualTo(11);
            assertThat(x.getOffset()).isEqualTo(placed.get(0).getOffset());
            assertThat(x.getVersion()).isEqualTo(version[0]);
        });
        assertThat(a.stats().allocationCount()).isZero();
    }

    @Test
    void shouldPlaceRetriesAwayFromTheNodesToAvoid()
    {
        mount("a", 11, false);
        mount("b", 12, false);
        mount("c", 13, false);
        for (int i = 0; i < 20; i++)
        {
            final List<Replica> placed = new ArrayList<>();
            assertThat(f.store.putStart(T, CLIENT, "k" + i, 100, PutOptions.newBuilder().setReplicas(2).build(),
                Set.of("b"), placed, null)).isEqualTo(OK_VALUE);
            assertThat(placed).extracting(Replica::getNodeId).containsExactlyInAnyOrder("a", "c");
        }
        final List<Replica> three = new ArrayList<>();
        assertThat(f.store.putStart(T, CLIENT, "three", 100, PutOptions.newBuilder().setReplicas(3).build(),
            Set.of("b"), three, null)).isEqualTo(OK_VALUE);
        assertThat(three).as("the avoided node when nothing else is left").hasSize(3);
    }
}
