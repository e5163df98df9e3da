package io.granary.master.meta;

import io.granary.common.ManualClock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.ErrorCode;
import io.granary.proto.KeyInfo;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;
import io.granary.proto.SoftPinAction;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.Opcode;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;

class MetadataStoreTest
{
    static final String T = "default";
    static final String CLIENT = "client-a";
    static final long SEGMENT_BYTES = 64L << 20;

    ManualClock clock;
    SegmentRegistry registry;
    MetadataStore store;

    @BeforeEach
    void setUp()
    {
        clock = new ManualClock();
        registry = new SegmentRegistry(clock, (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        store = new MetadataStore(new MetadataStore.Settings(), clock, registry);
        mount("node-1", "127.0.0.1:7001", 11);
    }

    void mount(final String node, final String endpoint, final int segmentId)
    {
        final SegmentRegistry.MountResult r =
            registry.mount(node, node, endpoint, segmentId, node + "/seg0", SEGMENT_BYTES);
        assertThat(r.code).isEqualTo(OK_VALUE);
    }

    static PutOptions replicas(final int n)
    {
        return PutOptions.newBuilder().setReplicas(n).build();
    }

    List<Replica> start(final String key, final long length, final PutOptions options, final int expectedCode)
    {
        final List<Replica> replicas = new ArrayList<>();
        assertThat(ErrorCode.forNumber(store.putStart(T, CLIENT, key, length, options, replicas)))
            .isEqualTo(ErrorCode.forNumber(expectedCode));
        return replicas;
    }

    void put(final String key, final long length)
    {
        start(key, length, replicas(1), OK_VALUE);
        assertThat(store.putEnd(T, CLIENT, key)).isEqualTo(OK_VALUE);
    }

    MetadataStore.Lookup lookup(final String key)
    {
        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        store.getReplicaList(T, key, out);
        return out;
    }

    long leaseDeadline(final String tenant, final String key)
    {
        final ObjectMeta m = store.lockForKey(tenant, key);
        assertThat(m).isNotNull();
        try
        {
            return m.leaseDeadlineNs();
        }
        finally
        {
            store.unlockOwner(m);
        }
    }

    long allocatedBytes()
    {
        long total = 0;
        for (final MountedSegment s : registry.liveSegments())
        {
            total += s.allocatedBytes();
        }
        return total;
    }

    @Test
    void shouldMakeObjectReadableOnlyAfterPutEnd()
    {
        final List<Replica> replicas = start("k", 4096, replicas(1), OK_VALUE);
        assertThat(replicas).hasSize(1);
        assertThat(replicas.get(0).getLength()).isEqualTo(4096);
        assertThat(replicas.get(0).getEndpoint()).isEqualTo("127.0.0.1:7001");

        assertThat(lookup("k").code).isEqualTo(REPLICA_IS_NOT_READY_VALUE);
        assertThat(store.exists(T, "k", true)).isZero();

        assertThat(store.putEnd(T, CLIENT, "k")).isEqualTo(OK_VALUE);
        final MetadataStore.Lookup out = lookup("k");
        assertThat(out.code).isEqualTo(OK_VALUE);
        assertThat(out.sizeBytes).isEqualTo(4096);
        assertThat(out.replicas).hasSize(1);
        assertThat(out.replicas.get(0).getOffset()).isEqualTo(replicas.get(0).getOffset());
        assertThat(store.exists(T, "k", true)).isEqualTo(1);
    }

    @Test
    void shouldAnswerObjectAlreadyExistsForCompleteOrInFlightKey()
    {
        put("k", 100);
        start("k", 100, replicas(1), OBJECT_ALREADY_EXISTS_VALUE);
        start("p", 100, replicas(1), OK_VALUE);
        final List<Replica> other = new ArrayList<>();
        assertThat(store.putStart(T, "another-client", "p", 100, replicas(1), other))
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(other).isEmpty();
    }

    @Test
    void shouldAnswerARetriedPutStartWithTheSameExtents()
    {
        final List<Replica> first = start("p", 4096, replicas(1), OK_VALUE);
        final long used = allocatedBytes();
        final List<Replica> again = start("p", 4096, replicas(1), OK_VALUE);
        assertThat(again).isEqualTo(first);
        assertThat(allocatedBytes()).as("no second allocation").isEqualTo(used);
        start("p", 8192, replicas(1), OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(store.putEnd(T, CLIENT, "p")).isEqualTo(OK_VALUE);
        start("p", 4096, replicas(1), OBJECT_ALREADY_EXISTS_VALUE);
    }

    @Test
    void shouldRefusePutEndAndRevokeFromAnotherClient()
    {
        start("k", 100, replicas(1), OK_VALUE);
        assertThat(store.putEnd(T, "intruder", "k")).isEqualTo(ILLEGAL_CLIENT_VALUE);
        assertThat(store.putRevoke(T, "intruder", "k")).isEqualTo(ILLEGAL_CLIENT_VALUE);
        assertThat(store.putEnd(T, CLIENT, "k")).isEqualTo(OK_VALUE);
        assertThat(store.putEnd(T, CLIENT, "k")).isEqualTo(OK_VALUE); // idempotent retry
        assertThat(store.putRevoke(T, CLIENT, "k")).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(store.putEnd(T, CLIENT, "missing")).isEqualTo(OBJECT_NOT_FOUND_VALUE);
    }

    @Test
    void shouldPlaceReplicasOnDistinctSegmentsAndNodes()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        mount("node-3", "127.0.0.1:7003", 31);
        for (int i = 0; i < 50; i++)
        {
            final List<Replica> replicas = start("k" + i, 1000, replicas(3), OK_VALUE);
            assertThat(replicas).hasSize(3);
            final Set<String> nodes = new HashSet<>();
            for (final Replica r : replicas)
            {
                nodes.add(r.getNodeId());
            }
            assertThat(nodes).hasSize(3);
        }
    }

    @Test
    void shouldAllocateFewerReplicasThanAskedWhenSegmentsAreMissing()
    {
        final List<Replica> replicas = start("k", 1000, replicas(2), OK_VALUE);
        assertThat(replicas).hasSize(1);
        assertThat(store.partialAllocations()).isEqualTo(1);
    }

    @Test
    void shouldPreferTheNamedSegment()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        for (int i = 0; i < 20; i++)
        {
            final List<Replica> replicas =
                start("k" + i, 1000, PutOptions.newBuilder().setPreferredSegment("node-2/seg0").build(), OK_VALUE);
            assertThat(replicas.get(0).getSegmentName()).isEqualTo("node-2/seg0");
        }
    }

    @Test
    void shouldFailWithNoAvailableHandleWhenNothingFits()
    {
        start("big", SEGMENT_BYTES + 1, replicas(1), NO_AVAILABLE_HANDLE_VALUE);
        assertThat(store.allocationFailures()).isEqualTo(1);
        assertThat(allocatedBytes()).isZero();
    }

    @Test
    void shouldValidateKeysLengthsAndOptions()
    {
        start("", 10, replicas(1), INVALID_KEY_VALUE);
        start("x".repeat(5000), 10, replicas(1), INVALID_KEY_VALUE);
        start("k", -1, replicas(1), INVALID_PARAMS_VALUE);
        start("k", 10, replicas(17), INVALID_PARAMS_VALUE);
        start("k", 10, PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_PRESERVE).setSoftPinTtlMs(5).build(),
            INVALID_PARAMS_VALUE);
        start("k", 10, PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_DISABLE).setSoftPinTtlMs(5).build(),
            INVALID_PARAMS_VALUE);
        start("k", 10, PutOptions.newBuilder().setSoftPin(SoftPinAction.SOFT_PIN_ENABLE)
            .setSoftPinTtlMs(Duration.ofHours(25).toMillis()).build(), INVALID_PARAMS_VALUE);
        start("k", 10, PutOptions.newBuilder().setSoftPinValue(7).build(), INVALID_PARAMS_VALUE);
        final List<Replica> none = new ArrayList<>();
        assertThat(store.putStart(T, "", "k", 10, replicas(1), none)).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(allocatedBytes()).isZero();
        assertThat(store.objectCount()).isZero();
    }

    @Test
    void shouldStoreEmptyValues()
    {
        put("empty", 0);
        final MetadataStore.Lookup out = lookup("empty");
        assertThat(out.code).isEqualTo(OK_VALUE);
        assertThat(out.sizeBytes).isZero();
        assertThat(out.replicas.get(0).getLength()).isZero();
    }

    @Test
    void shouldGrantNoLeaseOnPutEnd()
    {
        put("k", 100);
        assertThat(store.remove(T, "k", false)).isEqualTo(OK_VALUE);
        assertThat(allocatedBytes()).isZero();
    }

    @Test
    void shouldRefuseRemoveWhileLeasedUnlessForced()
    {
        put("k", 100);
        assertThat(store.exists(T, "k", true)).isEqualTo(1);
        assertThat(store.remove(T, "k", false)).isEqualTo(OBJECT_HAS_LEASE_VALUE);
        clock.advance(Duration.ofSeconds(9));
        assertThat(store.remove(T, "k", false)).isEqualTo(OBJECT_HAS_LEASE_VALUE);
        clock.advance(Duration.ofSeconds(1).plusNanos(1));
        assertThat(store.remove(T, "k", false)).isEqualTo(OK_VALUE);
        assertThat(store.remove(T, "k", false)).isEqualTo(OBJECT_NOT_FOUND_VALUE);

        put("f", 100);
        assertThat(lookup("f").code).isEqualTo(OK_VALUE);
        assertThat(store.remove(T, "f", true)).isEqualTo(OK_VALUE);
        assertThat(store.objectCount()).isZero();
    }

    @Test
    void shouldExtendLeaseToMaxOfOldAndNowPlusTtl()
    {
        put("k", 100);
        final long t0 = clock.nanoTime();
        store.exists(T, "k", true);
        assertThat(leaseDeadline(T, "k")).isEqualTo(t0 + Duration.ofSeconds(10).toNanos());
        clock.advance(Duration.ofSeconds(4));
        lookup("k");
        assertThat(leaseDeadline(T, "k")).isEqualTo(t0 + Duration.ofSeconds(14).toNanos());
        // A lookup that does not grant leases leaves the deadline alone.
        clock.advance(Duration.ofSeconds(1));
        assertThat(store.exists(T, "k", false)).isEqualTo(1);
        assertThat(leaseDeadline(T, "k")).isEqualTo(t0 + Duration.ofSeconds(14).toNanos());
    }

    @Test
    void shouldRefuseRemovingIncompleteObjects()
    {
        start("k", 100, replicas(1), OK_VALUE);
        assertThat(store.remove(T, "k", true)).isEqualTo(REPLICA_IS_NOT_READY_VALUE);
    }

    @Test
    void shouldRemoveAllSkippingLeasedAndIncompleteObjects()
    {
        for (int i = 0; i < 10; i++)
        {
            put("k" + i, 100);
        }
        start("incomplete", 100, replicas(1), OK_VALUE);
        store.exists(T, "k3", true);
        store.exists(T, "k7", true);
        assertThat(store.removeMatching(T, null, false)).isEqualTo(8);
        assertThat(store.objectCount()).isEqualTo(3);
        assertThat(store.exists(T, "k3", false)).isEqualTo(1);
        assertThat(store.removeMatching(T, null, true)).isEqualTo(2);
        assertThat(store.objectCount()).isEqualTo(1);
    }

    @Test
    void shouldRemoveByPredicateOnlyMatchingKeys()
    {
        put("model-a/1", 10);
        put("model-a/2", 10);
        put("model-b/1", 10);
        assertThat(store.removeMatching(T, key -> key.startsWith("model-a/"), false)).isEqualTo(2);
        assertThat(store.exists(T, "model-b/1", false)).isEqualTo(1);
    }

    @Test
    void shouldKeepTenantsApart()
    {
        final List<Replica> a = new ArrayList<>();
        final List<Replica> b = new ArrayList<>();
        assertThat(store.putStart("alpha", CLIENT, "same", 10, replicas(1), a)).isEqualTo(OK_VALUE);
        assertThat(store.putStart("beta", CLIENT, "same", 20, replicas(1), b)).isEqualTo(OK_VALUE);
        assertThat(store.putEnd("alpha", CLIENT, "same")).isEqualTo(OK_VALUE);
        assertThat(store.exists("beta", "same", true)).isZero();
        assertThat(store.exists("gamma", "same", true)).isZero();
        assertThat(store.putEnd("beta", CLIENT, "same")).isEqualTo(OK_VALUE);
        final MetadataStore.Lookup out = new MetadataStore.Lookup();
        store.getReplicaList("beta", "same", out);
        assertThat(out.sizeBytes).isEqualTo(20);
        assertThat(store.removeMatching("alpha", null, false)).isEqualTo(1);
        assertThat(store.exists("beta", "same", false)).isEqualTo(1);
        final boolean[] truncated = new boolean[1];
        assertThat(store.listKeys("alpha", null, 10, truncated)).isEmpty();
        assertThat(store.listKeys("beta", null, 10, truncated)).extracting(KeyInfo::getKey).containsExactly("same");
    }

    @Test
    void shouldListKeysSortedAndBounded()
    {
        for (int i = 0; i < 30; i++)
        {
            put(String.format("key-%02d", i), 10);
        }
        final boolean[] truncated = new boolean[1];
        final List<KeyInfo> all = store.listKeys(T, null, 100, truncated);
        assertThat(all).hasSize(30);
        assertThat(truncated[0]).isFalse();
        assertThat(all.get(0).getKey()).isEqualTo("key-00");
        assertThat(all.get(29).getKey()).isEqualTo("key-29");
        final List<KeyInfo> some = store.listKeys(T, null, 5, truncated);
        assertThat(some).hasSize(5);
        assertThat(truncated[0]).isTrue();
    }

    @Test
    void shouldLetAStalePutBePreemptedAndFreeItsExtentsAfterTheReleaseTimeout()
    {
        // A client that crashed after PutStart.
        assertThat(store.putStart(T, "crashed-client", "k", 4096, replicas(1), new ArrayList<>())).isEqualTo(OK_VALUE);
        final long used = allocatedBytes();
        clock.advance(Duration.ofSeconds(29));
        start("k", 4096, replicas(1), OBJECT_ALREADY_EXISTS_VALUE);
        clock.advance(Duration.ofSeconds(2));
        start("k", 4096, replicas(1), OK_VALUE);
        assertThat(store.discardedPuts()).isEqualTo(1);
        // The old writer may still be writing: its extent stays reserved.
        assertThat(allocatedBytes()).isEqualTo(2 * used);
        assertThat(store.putEnd(T, CLIENT, "k")).isEqualTo(OK_VALUE);

        clock.advance(Duration.ofMinutes(9));
        store.reclaimAbandonedPuts();
        assertThat(allocatedBytes()).isEqualTo(2 * used);
        clock.advance(Duration.ofMinutes(1));
        store.reclaimAbandonedPuts();
        assertThat(allocatedBytes()).isEqualTo(used);
        assertThat(store.exists(T, "k", false)).isEqualTo(1);
    }

    @Test
    void shouldReclaimAPutAbandonedForTheReleaseTimeout()
    {
        start("k", 4096, replicas(1), OK_VALUE);
        put("done", 4096);
        clock.advance(Duration.ofMinutes(10));
        assertThat(store.reclaimAbandonedPuts()).isZero();
        clock.advance(Duration.ofMillis(1));
        assertThat(store.reclaimAbandonedPuts()).isEqualTo(1);
        assertThat(store.objectCount()).isEqualTo(1);
        assertThat(store.putEnd(T, CLIENT, "k")).isEqualTo(OBJECT_NOT_FOUND_VALUE);
        start("k", 4096, replicas(1), OK_VALUE);
    }

    @Test
    void shouldHoldOnlyUnfinishedPutsWhileAnOlderOneIsAbandoned()
    {
        // A client that crashed after PutStart; the puts after it finish, or are revoked, and their objects go.
        start("abandoned", 4096, replicas(1), OK_VALUE);
        for (int i = 0; i < 1000; i++)
        {
            put("k" + i, 4096);
            assertThat(store.remove(T, "k" + i, false)).isEqualTo(OK_VALUE);
        }
        start("revoked", 4096, replicas(1), OK_VALUE);
        assertThat(store.putRevoke(T, CLIENT, "revoked")).isEqualTo(OK_VALUE);
        start("open", 4096, replicas(1), OK_VALUE);
        put("kept", 4096);

        // Only the two unfinished puts are tracked: nothing finished or removed waits behind the abandoned one.
        assertThat(store.processingPuts()).isEqualTo(2);
        // A stored object keeps none of its put's state; an unfinished one keeps when it started.
        final ObjectMeta kept = store.lockForKey(T, "kept");
        final ObjectMeta open = store.lockForKey(T, "open");
        try
        {
            assertThat(kept.pending).isNull();
            assertThat(open.pending).isNotNull();
            assertThat(open.pending.startNs).isEqualTo(clock.nanoTime());
        }
        finally
        {
            store.unlockOwner(open);
            store.unlockOwner(kept);
        }
        clock.advance(Duration.ofMinutes(10).plusMillis(1));
        assertThat(store.reclaimAbandonedPuts()).isEqualTo(2);
        assertThat(store.processingPuts()).isZero();
        assertThat(store.objectCount()).isEqualTo(1);
        assertThat(store.exists(T, "kept", false)).isEqualTo(1);
        assertThat(store.putEnd(T, CLIENT, "open")).isEqualTo(OBJECT_NOT_FOUND_VALUE);
        assertThat(store.reclaimAbandonedPuts()).isZero();
    }

    @Test
    void shouldQuarantineRevokedExtentsForTheDiscardTimeout()
    {
        start("k", 4096, replicas(1), OK_VALUE);
        final long used = allocatedBytes();
        assertThat(store.putRevoke(T, CLIENT, "k")).isEqualTo(OK_VALUE);
        assertThat(store.exists(T, "k", false)).isZero();
        assertThat(allocatedBytes()).isEqualTo(used);
        start("k", 4096, replicas(1), OK_VALUE); // the key is free at once
        clock.advance(Duration.ofSeconds(31));
        store.reclaimAbandonedPuts();
        assertThat(allocatedBytes()).isEqualTo(used);
    }

    @Test
    void shouldGiveAPutTheExtentsOfAForceRemovedObjectOnceItsLeaseEndedWithoutWaitingForTheHousekeeper()
    {
        put("old", 48L << 20);
        assertThat(lookup("old").code).isEqualTo(OK_VALUE); // a reader leases it
        assertThat(store.remove(T, "old", true)).isEqualTo(OK_VALUE);
        start("new", 48L << 20, replicas(1), NO_AVAILABLE_HANDLE_VALUE); // its readers may still hold tokens

        clock.advance(Duration.ofNanos(store.settings().leaseTtlNs + 1));
        // No housekeeping pass ran: the put itself frees what has become due.
        start("new", 48L << 20, replicas(1), OK_VALUE);
        assertThat(store.pendingReleaseCount()).isZero();
    }

    @Test
    void shouldPlaceEveryReplicaAskedForWhenRoomDueForReleaseMakesItFit()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        final List<Replica> first = start("old", 48L << 20,
            PutOptions.newBuilder().setPreferredSegment("node-2/seg0").build(), OK_VALUE);
        assertThat(first.get(0).getNodeId()).isEqualTo("node-2");
        assertThat(store.putEnd(T, CLIENT, "old")).isEqualTo(OK_VALUE);
        assertThat(lookup("old").code).isEqualTo(OK_VALUE);
        assertThat(store.remove(T, "old", true)).isEqualTo(OK_VALUE);
        // While the lease lasts, node-2 has no room: two replicas asked, one placed.
        final List<Replica> partial = start("partial", 48L << 20, replicas(2), OK_VALUE);
        assertThat(partial).extracting(Replica::getNodeId).containsExactly("node-1");
        assertThat(store.partialAllocations()).isEqualTo(1);
        assertThat(store.putRevoke(T, CLIENT, "partial", List.of(settled(partial.get(0).getNodeId(),
            partial.get(0).getSegmentId(), partial.get(0).getOffset())))).isEqualTo(OK_VALUE);

        clock.advance(Duration.ofNanos(store.settings().leaseTtlNs + 1));
        // The lease ended but no housekeeping pass ran: the put frees node-2's extent and gets both replicas
        // (node-2 has 16 MiB free before that).
        assertThat(start("full", 32L << 20, replicas(2), OK_VALUE)).extracting(Replica::getNodeId)
            .containsExactlyInAnyOrder("node-1", "node-2");
        assertThat(store.partialAllocations()).isEqualTo(1);
    }

    @Test
    void shouldFreeTheSettledReplicasOfARevokedPutAtOnceAndHoldTheOthersForTheDiscardTimeout()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        final long before = allocatedBytes();
        final List<Replica> replicas = start("k", 4096, replicas(2), OK_VALUE);
        assertThat(replicas).hasSize(2);
        final long oneExtent = (allocatedBytes() - before) / 2;
        final Replica written = replicas.get(0);
        final Replica unknown = replicas.get(1);
        final List<io.granary.proto.SettledReplica> settled = List.of(
            settled(written.getNodeId(), written.getSegmentId(), written.getOffset()),
            // Entries naming no replica of this put change nothing: another offset, another node's segment id.
            settled(unknown.getNodeId(), unknown.getSegmentId(), unknown.getOffset() + 4096),
            settled("node-9", unknown.getSegmentId(), unknown.getOffset()));

        assertThat(store.putRevoke(T, CLIENT, "k", settled)).isEqualTo(OK_VALUE);

        assertThat(store.exists(T, "k", false)).isZero();
        assertThat(store.revokedExtentsReleased()).isEqualTo(1);
        assertThat(allocatedBytes() - before).isEqualTo(oneExtent); // the settled extent is free at once
        assertThat(segment(unknown.getNodeId()).allocatedBytes()).isEqualTo(oneExtent);
        assertThat(segment(written.getNodeId()).allocatedBytes()).isZero();
        clock.advance(Duration.ofSeconds(29));
        store.reclaimAbandonedPuts();
        assertThat(allocatedBytes() - before).isEqualTo(oneExtent);
        clock.advance(Duration.ofSeconds(2)); // past the 30 s discard timeout
        store.reclaimAbandonedPuts();
        assertThat(allocatedBytes()).isEqualTo(before);
    }

    @Test
    void shouldFreeEveryReplicaOfARevokedPutWhenAllAreSettled()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        final List<Replica> replicas = start("k", 100_000, replicas(2), OK_VALUE);
        final List<io.granary.proto.SettledReplica> settled = new ArrayList<>();
        for (final Replica r : replicas)
        {
            settled.add(settled(r.getNodeId(), r.getSegmentId(), r.getOffset()));
        }
        assertThat(store.putRevoke(T, CLIENT, "k", settled)).isEqualTo(OK_VALUE);
        assertThat(allocatedBytes()).isZero();
        assertThat(store.pendingReleaseCount()).isZero();
        assertThat(store.revokedExtentsReleased()).isEqualTo(2);
        // A revoke from another client frees nothing, settled or not.
        final List<Replica> again = start("k", 100_000, replicas(1), OK_VALUE);
        assertThat(store.putRevoke(T, "intruder", "k",
            List.of(settled(again.get(0).getNodeId(), again.get(0).getSegmentId(), again.get(0).getOffset()))))
            .isEqualTo(ILLEGAL_CLIENT_VALUE);
        assertThat(allocatedBytes()).isEqualTo(100_032); // rounded up to the 64-byte granularity
    }

    static io.granary.proto.SettledReplica settled(final String nodeId, final int segmentId, final long offset)
    {
        return io.granary.proto.SettledReplica.newBuilder().setNodeId(nodeId).setSegmentId(segmentId)
            .setOffset(offset).build();
    }

    MountedSegment segment(final String nodeId)
    {
        for (final MountedSegment s : registry.liveSegments())
        {
            if (s.nodeId().equals(nodeId))
            {
                return s;
            }
        }
        throw new AssertionError("no segment of " + nodeId);
    }

    @Test
    void shouldDropADeadNodesReplicasAndEraseObjectsLeftWithout()
    {
        mount("node-2", "127.0.0.1:7002", 21);
        start("both", 100, replicas(2), OK_VALUE);
        store.putEnd(T, CLIENT, "both");
        final List<Replica> only = start("only-2", 100,
            PutOptions.newBuilder().setPreferredSegment("node-2/seg0").build(), OK_VALUE);
        assertThat(only.get(0).getNodeId()).isEqualTo("node-2");
        store.putEnd(T, CLIENT, "only-2");

        clock.advance(Duration.ofSeconds(5));
        assertThat(registry.heartbeat("node-1")).isTrue();
        clock.advance(Duration.ofSeconds(6));
        final List<MountedSegment> expired = registry.expire(Duration.ofSeconds(10).toNanos());
        assertThat(expired).extracting(MountedSegment::nodeId).containsExactly("node-2");
        assertThat(store.purgeSegments(new HashSet<>(expired))).isEqualTo(1);

        assertThat(store.exists(T, "only-2", true)).isZero();
        final MetadataStore.Lookup out = lookup("both");
        assertThat(out.code).isEqualTo(OK_VALUE);
        assertThat(out.replicas).extracting(Replica::getNodeId).containsExactly("node-1");
        assertThat(store.lostObjects()).isEqualTo(1);
        assertThat(registry.heartbeat("node-2")).isFalse();
    }

    @Test
    void shouldTreatANewNodeIdOnTheSameEndpointAsARestart()
    {
        put("k", 100);
        final SegmentRegistry.MountResult r =
            registry.mount("node-1-reborn", "node-1", "127.0.0.1:7001", 12, "node-1/seg0", SEGMENT_BYTES);
        assertThat(r.code).isEqualTo(OK_VALUE);
        assertThat(r.replaced).hasSize(1);
        store.purgeSegments(new HashSet<>(r.replaced));
        assertThat(store.exists(T, "k", false)).isZero();
        assertThat(registry.liveSegments()).hasSize(1);
    }

    @Test
    void shouldSignAReadTokenOncePerSecondOfExpiryAndNeverChangeAnAnswerAlreadyGiven()
    {
        final AccessTokenCodec codec = new AccessTokenCodec(AccessTokenCodec.newRandomKey());
        final int[] signed = {0};
        store.replicaTokens((segment, grantOffset, grantLength, opcode, expirySec) ->
        {
            signed[0]++;
            return codec.sign(opcode, segment.segmentId(), grantOffset, grantLength, expirySec);
        });
        put("k", 1000);
        final int afterPut = signed[0];

        final Replica first = lookup("k").replicas.get(0);
        final byte[] firstToken = first.getAccessToken().toByteArray();
        clock.advanceMillis(100); // same second of expiry: the token is reused
        final Replica again = lookup("k").replicas.get(0);
        assertThat(signed[0] - afterPut).isEqualTo(1);
        assertThat(again.getAccessToken().toByteArray()).isEqualTo(firstToken);

        clock.advanceMillis(1_000); // the next second: signed again, in the replica's kept array
        final Replica later = lookup("k").replicas.get(0);
        assertThat(signed[0] - afterPut).isEqualTo(2);
        assertThat(later.getAccessToken().toByteArray()).isNotEqualTo(firstToken);
        assertThat(first.getAccessToken().toByteArray()).as("an answer already given keeps its token")
            .isEqualTo(firstToken);
        assertThat(grants(codec, first)).isTrue();
        assertThat(grants(codec, later)).isTrue();
        assertThat(expirySec(later)).isEqualTo(expirySec(first) + 1);
    }

    /** The token's expiry: its first four bytes, big-endian. */
    private static long expirySec(final Replica replica)
    {
        return ByteBuffer.wrap(replica.getAccessToken().toByteArray()).getInt() & 0xFFFFFFFFL;
    }

    private static boolean grants(final AccessTokenCodec codec, final Replica replica)
    {
        final byte[] token = replica.getAccessToken().toByteArray();
        return codec.verify(Opcode.READ, replica.getSegmentId(), replica.getOffset(), replica.getLength(),
            expirySec(replica), Arrays.copyOfRange(token, 4, token.length));
    }
}
