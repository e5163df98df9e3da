package io.granary.master.events;

import io.granary.common.ManualClock;
import io.granary.master.MasterServer;
import io.granary.proto.EventBatch;
import io.granary.proto.EventBatchKind;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.KeyRequest;
import io.granary.proto.KvEvent;
import io.granary.proto.KvEventReason;
import io.granary.proto.KvEventType;
import io.granary.proto.LedgerEntry;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.ReplicaStatus;
import io.granary.proto.ReportLedgerRequest;
import io.granary.proto.SegmentInfo;
import io.granary.proto.SubscribeEventsRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;

import static io.granary.proto.ErrorCode.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

/**
 * KV events end to end over gRPC: a real master (manual clock, no housekeeping thread), real streams, and the
 * present keys as ListKeys reports them to compare the subscribers' views with.
 */
class EventStreamTest
{
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final long MIB = 1 << 20;

    private final ManualClock clock = new ManualClock();
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    private void start(final UnaryOperator<MasterServer.Context> settings)
    {
        master = MasterServer.launch(settings.apply(new MasterServer.Context()
            .port(0).lookupPort(-1).adminPort(-1).clock(clock).housekeeping(false).metadataShards(16)
            .dataTokens(false)));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        if (channel != null)
        {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (master != null)
        {
            master.close();
        }
    }

    private void mount(final String node, final long sizeBytes, final boolean ledgerFollows)
    {
        assertThat(stub.mountSegment(MountSegmentRequest.newBuilder().setNodeId(node).setNodeName(node)
            .setEndpoint("127.0.0.1:7001").setLedgerFollows(ledgerFollows)
            .setSegment(SegmentInfo.newBuilder().setSegmentId(1).setName(node + "/seg0").setSizeBytes(sizeBytes))
            .build()).getCode()).isEqualTo(OK_VALUE);
    }

    private void putStart(final String tenant, final String key, final long length, final PutOptions options)
    {
        assertThat(stub.putStart(PutStartRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key)
            .setValueLength(length).setOptions(options).build()).getCode()).as("PutStart " + key).isEqualTo(OK_VALUE);
    }

    private void putEnd(final String tenant, final String key)
    {
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key).build())
            .getCode()).as("PutEnd " + key).isEqualTo(OK_VALUE);
    }

    private void put(final String tenant, final String key, final long length)
    {
        putStart(tenant, key, length, PutOptions.getDefaultInstance());
        putEnd(tenant, key);
    }

    private int remove(final String tenant, final String key)
    {
        return stub.remove(RemoveRequest.newBuilder().setTenant(tenant).setKey(key).build()).getCode();
    }

    /** The readable keys of a tenant as ListKeys reports them, as "tenant/key". */
    private Set<String> present(final String tenant)
    {
        final List<KeyInfo> keys = stub.listKeys(ListKeysRequest.newBuilder().setTenant(tenant).build()).getKeysList();
        return keys.stream().filter(k -> k.getStatus() == ReplicaStatus.REPLICA_STATUS_COMPLETE)
            .map(k -> tenant + "/" + k.getKey()).collect(Collectors.toSet());
    }

    private static SubscribeEventsRequest.Builder everyTenant()
    {
        return SubscribeEventsRequest.newBuilder().setAllTenants(true);
    }

    private EventStreamRecorder subscribeFromStart()
    {
        return EventStreamRecorder.subscribe(channel, everyTenant().setFromSequence(0).build());
    }

    // ------------------------------------------------------------------------------------------- what fires when

    @Test
    void shouldOpenTheEpochWithClearedAndPublishStoredWhenAPutBecomesReadable() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        events.awaitSequence(1);

        putStart("default", "k1", 1000, PutOptions.getDefaultInstance());
        assertThat(master.eventJournal().nextSequence()).as("PutStart alone publishes nothing").isEqualTo(1);
        putEnd("default", "k1");
        putEnd("default", "k1"); // a repeated PutEnd changes nothing and publishes nothing
        events.awaitSequence(2);

        final List<KvEvent> live = events.liveEvents();
        assertThat(live).hasSize(2);
        assertThat(live.get(0).getSequence()).isZero();
        assertThat(live.get(0).getType()).isEqualTo(KvEventType.KV_EVENT_CLEARED);
        assertThat(live.get(0).getReason()).isEqualTo(KvEventReason.KV_REASON_MASTER_START);
        assertThat(live.get(0).getTenant()).isEmpty();
        final KvEvent stored = live.get(1);
        assertThat(stored.getSequence()).isEqualTo(1);
        assertThat(stored.getType()).isEqualTo(KvEventType.KV_EVENT_STORED);
        assertThat(stored.getTenant()).isEqualTo("default");
        assertThat(stored.getKey()).isEqualTo("k1");
        assertThat(stored.getMedium()).isEqualTo("CPU");
        assertThat(stored.getValueLength()).isEqualTo(1000);
        assertThat(stored.getGroupId()).isEmpty();
        for (final EventBatch b : events.batches())
        {
            assertThat(b.getEpoch()).isEqualTo(master.epoch());
            assertThat(b.getMasterId()).isEqualTo(master.masterId());
        }
        assertThat(events.problems()).isEmpty();
        assertThat(events.view()).isEqualTo(present("default"));
    }

    @Test
    void shouldPublishRemovedForRemoveRegexEvictionAndNodeLossWithTheReason() throws Exception
    {
        start(c -> c.evictionHighWatermark(0.9).evictionRatio(0.25));
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        for (int i = 0; i < 6; i++)
        {
            put("default", "a" + i, 64 * 1024);
        }
        assertThat(remove("default", "a0")).isEqualTo(OK_VALUE);
        assertThat(stub.removeByRegex(RemoveByRegexRequest.newBuilder().setRegex("a[12]").build()).getCount())
            .isEqualTo(2);
        // Fill the segment: the put that finds no room evicts the oldest unleased objects.
        for (int i = 0; i < 16; i++)
        {
            put("default", "b" + i, 64 * 1024);
        }
        long next = master.eventJournal().nextSequence();
        events.awaitSequence(next);
        final List<KvEvent> removed = events.liveEvents().stream()
            .filter(e -> e.getType() == KvEventType.KV_EVENT_REMOVED).collect(Collectors.toList());
        assertThat(removed.stream().filter(e -> e.getReason() == KvEventReason.KV_REASON_REMOVED)
            .map(KvEvent::getKey)).containsExactlyInAnyOrder("a0", "a1", "a2");
        assertThat(removed.stream().filter(e -> e.getReason() == KvEventReason.KV_REASON_EVICTED))
            .as("evictions").isNotEmpty();
        assertThat(events.view()).isEqualTo(present("default"));

        // Node loss: the only node stops heartbeating; every object loses its last replica.
        final int before = present("default").size();
        clock.advance(master.context().nodeTtl().plusSeconds(1));
        master.housekeep();
        next = master.eventJournal().nextSequence();
        events.awaitSequence(next);
        assertThat(events.liveEvents().stream().filter(e -> e.getReason() == KvEventReason.KV_REASON_NODE_LOST))
            .hasSize(before);
        assertThat(present("default")).isEmpty();
        assertThat(events.view()).isEmpty();
        assertThat(events.problems()).isEmpty();
    }

    @Test
    void shouldMarkTheStoredEventThatCompletesAGroup() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        final PutOptions grouped = PutOptions.newBuilder().setGroupId("block-7").build();
        putStart("default", "block-7/rank0", 100, grouped);
        putStart("default", "block-7/rank1", 100, grouped);
        putEnd("default", "block-7/rank0");
        putEnd("default", "block-7/rank1");
        events.awaitSequence(3);

        final List<KvEvent> live = events.liveEvents();
        assertThat(live.get(1).getKey()).isEqualTo("block-7/rank0");
        assertThat(live.get(1).getGroupId()).isEqualTo("block-7");
        assertThat(live.get(1).getGroupComplete()).as("rank1 still being written").isFalse();
        assertThat(live.get(2).getKey()).isEqualTo("block-7/rank1");
        assertThat(live.get(2).getGroupComplete()).isTrue();
    }

    @Test
    void shouldNameTheParentOfAStoredObjectLiveAndInSnapshots() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        put("default", "block-0", 100);
        putStart("default", "block-1", 100, PutOptions.newBuilder().setParentKey("block-0").build());
        putEnd("default", "block-1");
        putStart("default", "orphan", 100, PutOptions.newBuilder().setParentKey("never-stored").build());
        putEnd("default", "orphan");
        events.awaitSequence(4);

        final List<KvEvent> live = events.liveEvents();
        assertThat(live.get(1).getParentKey()).as("block-0 has no parent").isEmpty();
        assertThat(live.get(2).getKey()).isEqualTo("block-1");
        assertThat(live.get(2).getParentKey()).isEqualTo("block-0");
        assertThat(live.get(3).getParentKey()).as("a parent that did not exist is not named").isEmpty();

        final EventStreamRecorder fresh = EventStreamRecorder.subscribe(channel,
            everyTenant().setFromSequence(0).setSnapshot(true).build());
        fresh.await("the snapshot", () -> fresh.snapshots() == 1, WAIT);
        final List<KvEvent> snapshot = fresh.batches().stream().filter(b -> b.getKind() == EventBatchKind.EVENT_BATCH_SNAPSHOT)
            .flatMap(b -> b.getEventsList().stream()).collect(Collectors.toList());
        assertThat(snapshot).extracting(KvEvent::getKey, KvEvent::getParentKey).containsExactlyInAnyOrder(
            tuple("block-0", ""), tuple("block-1", "block-0"),
            tuple("orphan", ""));
    }

    @Test
    void shouldAnnounceAGroupCompletedByTheRevokeOfItsLastUnfinishedMember() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        final PutOptions grouped = PutOptions.newBuilder().setGroupId("block-9").build();
        putStart("default", "block-9/rank0", 100, grouped);
        putStart("default", "block-9/rank1", 100, grouped);
        putStart("default", "block-9/rank2", 100, grouped);
        putEnd("default", "block-9/rank0");
        putEnd("default", "block-9/rank1");
        events.awaitSequence(3);
        assertThat(events.liveEvents().subList(1, 3)).extracting(KvEvent::getGroupComplete).containsExactly(false,
            false);

        // rank2 is revoked: the two members left are readable, so the group is now complete.
        assertThat(stub.putRevoke(PutRevokeRequest.newBuilder().setTenant("default").setClientId("c")
            .setKey("block-9/rank2").build()).getCode()).isZero();
        events.awaitSequence(4);
        final KvEvent completed = events.liveEvents().get(3);
        assertThat(completed.getType()).isEqualTo(KvEventType.KV_EVENT_STORED);
        assertThat(completed.getKey()).as("the member announced last, again").isEqualTo("block-9/rank1");
        assertThat(completed.getGroupId()).isEqualTo("block-9");
        assertThat(completed.getGroupComplete()).isTrue();
        assertThat(events.view()).isEqualTo(present("default"));

        // A group whose unfinished member is revoked while another is still unfinished stays silent.
        putStart("default", "block-10/rank0", 100, PutOptions.newBuilder().setGroupId("block-10").build());
        putStart("default", "block-10/rank1", 100, PutOptions.newBuilder().setGroupId("block-10").build());
        assertThat(stub.putRevoke(PutRevokeRequest.newBuilder().setTenant("default").setClientId("c")
            .setKey("block-10/rank0").build()).getCode()).isZero();
        putEnd("default", "block-10/rank1");
        events.awaitSequence(5);
        final KvEvent only = events.liveEvents().get(4);
        assertThat(only.getKey()).isEqualTo("block-10/rank1");
        assertThat(only.getGroupComplete()).isTrue();
        assertThat(master.eventJournal().nextSequence()).as("nothing else was published").isEqualTo(5);
    }

    @Test
    void shouldClearATenantOnRemoveAllAndAnnounceTheLeasedSurvivorsAgain() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder events = subscribeFromStart();
        for (int i = 0; i < 5; i++)
        {
            put("t1", "k" + i, 100);
        }
        put("t2", "other", 100);
        final ExistKeyResponse leased = stub.existKey(KeyRequest.newBuilder().setTenant("t1").setKey("k3").build());
        assertThat(leased.getExists()).isTrue();

        assertThat(stub.removeAll(RemoveAllRequest.newBuilder().setTenant("t1").build()).getCount()).isEqualTo(4);
        final long next = master.eventJournal().nextSequence();
        events.awaitSequence(next);

        final List<KvEvent> live = events.liveEvents();
        final List<KvEvent> afterClear = live.subList(7, live.size()); // CLEARED(epoch), 5 + 1 STORED
        assertThat(afterClear.get(0).getType()).isEqualTo(KvEventType.KV_EVENT_CLEARED);
        assertThat(afterClear.get(0).getTenant()).isEqualTo("t1");
        assertThat(afterClear.get(0).getReason()).isEqualTo(KvEventReason.KV_REASON_REMOVE_ALL);
        assertThat(afterClear.subList(1, afterClear.size())).as("one STORED for the leased survivor, nothing else")
            .singleElement().satisfies(e ->
            {
                assertThat(e.getType()).isEqualTo(KvEventType.KV_EVENT_STORED);
                assertThat(e.getKey()).isEqualTo("k3");
            });
        final Set<String> expected = new HashSet<>(present("t1"));
        expected.addAll(present("t2"));
        assertThat(events.view()).containsExactlyInAnyOrderElementsOf(expected).contains("t1/k3", "t2/other");
    }

    @Test
    void shouldPublishStoredForObjectsRebuiltFromALedgerAndRemovedWhenANewerVersionReplacesOne() throws Exception
    {
        start(c -> c);
        final EventStreamRecorder events = subscribeFromStart();
        mount("n1", MIB, true);
        assertThat(stub.reportLedger(ReportLedgerRequest.newBuilder().setNodeId("n1").setSegmentId(1).setLast(false)
            .addEntries(LedgerEntry.newBuilder().setTenant("default").setKey("x").setOffset(0).setValueLength(100)
                .setVersion(5))
            .addEntries(LedgerEntry.newBuilder().setTenant("default").setKey("y").setOffset(4096).setValueLength(100)
                .setVersion(6).setGroupId("g").setParentKey("x"))
            .addEntries(LedgerEntry.newBuilder().setTenant("default").setKey("z").setOffset(12288).setValueLength(100)
                .setVersion(7).setParentKey("not-reported"))
            .build()).getAdopted()).isEqualTo(3);
        assertThat(stub.reportLedger(ReportLedgerRequest.newBuilder().setNodeId("n1").setSegmentId(1).setLast(true)
            .addEntries(LedgerEntry.newBuilder().setTenant("default").setKey("x").setOffset(8192).setValueLength(100)
                .setVersion(9))
            .build()).getAdopted()).isEqualTo(1);
        events.awaitSequence(master.eventJournal().nextSequence());

        final List<String> seen = events.liveEvents().stream().skip(1)
            .map(e -> e.getType().name() + ":" + e.getKey() + ":" + e.getReason().name()).collect(Collectors.toList());
        assertThat(seen).containsExactly(
            "KV_EVENT_STORED:x:KV_REASON_NONE", "KV_EVENT_STORED:y:KV_REASON_NONE", "KV_EVENT_STORED:z:KV_REASON_NONE",
            "KV_EVENT_REMOVED:x:KV_REASON_REPLACED", "KV_EVENT_STORED:x:KV_REASON_NONE");
        assertThat(events.liveEvents().get(2).getGroupComplete()).isTrue();
        // The parent each entry's put named: held (y's, linked) or not (z's, waiting for it); x names none.
        assertThat(events.liveEvents().get(1).getParentKey()).isEmpty();
        assertThat(events.liveEvents().get(2).getParentKey()).isEqualTo("x");
        assertThat(events.liveEvents().get(3).getParentKey()).isEqualTo("not-reported");
        assertThat(events.view()).isEqualTo(present("default"));
    }

    // ------------------------------------------------------------------------------------------- scope and resume

    @Test
    void shouldShowATenantOnlyItsOwnKeysAndTheMasterWideClear() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder t1 = EventStreamRecorder.subscribe(channel,
            SubscribeEventsRequest.newBuilder().setTenant("t1").setFromSequence(0).build());
        for (int i = 0; i < 20; i++)
        {
            put(i % 2 == 0 ? "t1" : "t2", "k" + i, 100);
        }
        put("t2", "last", 100);
        final long next = master.eventJournal().nextSequence();
        clock.advance(Duration.ofSeconds(2)); // lets the stream report progress past t2's last event
        t1.awaitSequence(next);

        assertThat(t1.liveEvents()).allSatisfy(e -> assertThat(e.getTenant()).isIn("", "t1"));
        assertThat(t1.liveEvents()).hasSize(11);
        assertThat(t1.view()).isEqualTo(present("t1"));
        assertThat(t1.problems()).isEmpty();
    }

    @Test
    void shouldReplayFromTheBufferWhenAConsumerResumesWithinIt() throws Exception
    {
        start(c -> c.eventsBuffer(1024).eventsSubscriberQueue(1024));
        mount("n1", MIB, false);
        final EventStreamRecorder first = subscribeFromStart();
        for (int i = 0; i < 10; i++)
        {
            put("default", "k" + i, 100);
        }
        first.awaitSequence(master.eventJournal().nextSequence());
        first.cancel();
        for (int i = 0; i < 10; i++)
        {
            assertThat(remove("default", "k" + i)).isEqualTo(i % 3 == 0 ? OK_VALUE : OK_VALUE);
            put("default", "n" + i, 100);
        }
        final EventStreamRecorder resumed = EventStreamRecorder.resume(channel, first, everyTenant());
        resumed.awaitSequence(master.eventJournal().nextSequence());

        assertThat(resumed.snapshots()).as("the buffer still held the resume point").isZero();
        assertThat(resumed.batches().get(0).getFirstSequence()).isEqualTo(first.nextSequence());
        assertThat(resumed.view()).isEqualTo(present("default"));
        assertThat(resumed.problems()).isEmpty();
    }

    /** The acceptance test: more changes than the buffer holds while away, then exactly the present keys. */
    @Test
    void shouldEndWithExactlyThePresentKeysAfterReconnectingPastTheBuffer() throws Exception
    {
        start(c -> c.eventsBuffer(64).eventsSubscriberQueue(64).evictionHighWatermark(0.9).evictionRatio(0.2));
        mount("n1", 4 * MIB, false);
        final EventStreamRecorder first = subscribeFromStart();
        for (int i = 0; i < 30; i++)
        {
            put("default", "early" + i, 1000);
        }
        first.awaitSequence(master.eventJournal().nextSequence());
        first.cancel();
        final long leftAt = first.nextSequence();

        // Away: puts, removes, a RemoveByRegex and evictions, far more than the 64 events the buffer holds.
        for (int i = 0; i < 300; i++)
        {
            put("default", "k" + i, 32 * 1024); // 4 MiB / 32 KiB: evictions start near the 115th
            if (i % 7 == 0)
            {
                remove("default", "k" + (i / 2));
            }
        }
        stub.removeByRegex(RemoveByRegexRequest.newBuilder().setRegex("early1.*").build());
        put("other", "x", 100);
        assertThat(master.eventJournal().nextSequence() - leftAt).isGreaterThan(64 * 4);
        assertThat(master.eventJournal().read(leftAt)).isSameAs(EventJournal.OVERWRITTEN);
        assertThat(master.evictor().evictedObjects(0) + master.evictor().evictedObjects(1)).isPositive();

        final EventStreamRecorder resumed = EventStreamRecorder.resume(channel, first, everyTenant());
        resumed.await("the snapshot and what followed", () -> resumed.snapshots() == 1 &&
            resumed.nextSequence() >= master.eventJournal().nextSequence(), WAIT);
        // Changes while the snapshot streams: the live events after it must bring the view up to date.
        put("default", "after", 100);
        remove("default", "k299");
        resumed.awaitSequence(master.eventJournal().nextSequence());

        final Set<String> expected = new HashSet<>(present("default"));
        expected.addAll(present("other"));
        assertThat(expected).hasSizeGreaterThan(50);
        assertThat(resumed.view()).isEqualTo(expected);
        assertThat(resumed.batches().get(0).getKind()).isEqualTo(EventBatchKind.EVENT_BATCH_SNAPSHOT);
        assertThat(resumed.problems()).isEmpty();
    }

    @Test
    void shouldCutOffASubscriberThatStopsReadingAndLetItResumeExactly() throws Exception
    {
        start(c -> c.eventsBuffer(8192).eventsSubscriberQueue(256));
        mount("n1", 64 * MIB, false);
        final EventStreamRecorder slow = EventStreamRecorder.subscribe(channel,
            everyTenant().setFromSequence(0).build(), false);
        slow.request(1);
        slow.awaitSequence(1);
        // Long keys fill the HTTP/2 windows quickly; the master must stop sending and then cut the stream off.
        final String pad = "x".repeat(1000);
        int i = 0;
        while (master.eventDispatcher().cutOffs() == 0)
        {
            put("default", pad + i++, 100);
            assertThat(i).as("cut off before 20000 events").isLessThan(20_000);
            if (i % 512 == 0)
            {
                Thread.sleep(5); // give the dispatcher thread its turn on a busy machine
            }
        }
        slow.request(Integer.MAX_VALUE);
        slow.await("the cut-off status", () -> slow.closedWith() != null, WAIT);
        assertThat(slow.closedWith().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
        assertThat(slow.closedWith().getDescription()).contains("--events-subscriber-queue")
            .contains("resubscribe from sequence " + slow.nextSequence());

        final EventStreamRecorder resumed = EventStreamRecorder.resume(channel, slow, everyTenant());
        resumed.awaitSequence(master.eventJournal().nextSequence());
        assertThat(resumed.view()).isEqualTo(present("default"));
        assertThat(resumed.problems()).isEmpty();
        assertThat(slow.problems()).isEmpty();
    }

    @Test
    void shouldStartFromTheNewEpochAfterAMasterRestart() throws Exception
    {
        start(c -> c);
        mount("n1", MIB, false);
        final EventStreamRecorder before = subscribeFromStart();
        put("default", "k", 100);
        before.awaitSequence(2);
        final long oldEpoch = master.epoch();
        master.close();
        before.await("the stream to end with the master", () -> before.closedWith() != null, WAIT);
        assertThat(before.closedWith().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);

        start(c -> c);
        assertThat(master.epoch()).isNotEqualTo(oldEpoch);
        final EventStreamRecorder after = EventStreamRecorder.resume(channel, before, everyTenant());
        after.await("a batch of the new epoch", () -> !after.batches().isEmpty(), WAIT);
        final EventBatch first = after.batches().get(0);
        assertThat(first.getEpoch()).isEqualTo(master.epoch());
        assertThat(first.getFirstSequence()).isZero();
        assertThat(first.getEvents(0).getType()).isEqualTo(KvEventType.KV_EVENT_CLEARED);
        assertThat(after.view()).as("the new master holds nothing yet").isEmpty();
    }

    // ------------------------------------------------------------------------------------------- validation

    @Test
    void shouldRefuseBadSubscriptionsWithAStatusAndKeepServing() throws Exception
    {
        start(c -> c);
        final EventStreamRecorder negative = EventStreamRecorder.subscribe(channel,
            everyTenant().setFromSequence(-5).build());
        final EventStreamRecorder badTenant = EventStreamRecorder.subscribe(channel,
            SubscribeEventsRequest.newBuilder().setTenant("bad tenant!").build());
        final EventStreamRecorder ahead = EventStreamRecorder.subscribe(channel,
            everyTenant().setEpoch(master.epoch()).setFromSequence(1_000_000).build());
        final EventStreamRecorder unknownEpochAhead = EventStreamRecorder.subscribe(channel,
            everyTenant().setFromSequence(1_000_000).build());
        for (final EventStreamRecorder r : List.of(negative, badTenant, ahead))
        {
            r.await("a refusal", () -> r.closedWith() != null, WAIT);
        }
        assertThat(negative.closedWith().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(badTenant.closedWith().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(ahead.closedWith().getCode()).isEqualTo(Status.Code.OUT_OF_RANGE);
        unknownEpochAhead.await("a snapshot instead", () -> unknownEpochAhead.snapshots() == 1, WAIT);
        assertThat(master.eventDispatcher().subscriberCount()).isEqualTo(1);
    }

    @Test
    void shouldRefuseSubscriptionsWhenEventsAreOffOrTooManyAreOpen() throws Exception
    {
        start(c -> c.eventsMaxSubscribers(1));
        final EventStreamRecorder one = subscribeFromStart();
        one.awaitSequence(1);
        final EventStreamRecorder two = subscribeFromStart();
        two.await("a refusal", () -> two.closedWith() != null, WAIT);
        assertThat(two.closedWith().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
        assertThat(two.closedWith().getDescription()).contains("--events-max-subscribers");
        stop();

        start(c -> c.events(false));
        mount("n1", MIB, false);
        put("default", "k", 100);
        assertThat(master.eventJournal()).isNull();
        final EventStreamRecorder off = subscribeFromStart();
        off.await("a refusal", () -> off.closedWith() != null, WAIT);
        assertThat(off.closedWith().getCode()).isEqualTo(Status.Code.FAILED_PRECONDITION);
    }
}
