package io.granary.master.events.zmq;

import io.granary.master.MasterServer;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.ReplicaStatus;
import io.granary.proto.SegmentInfo;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.Value;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The vLLM-framed ZeroMQ publisher through real JeroMQ sockets on 127.0.0.1: a SUB socket sees topic / 8-byte
 * big-endian sequence / msgpack batch, and a replay request over a DEALER socket returns the buffered batches from
 * a start sequence, then the end marker. The decoded events must add up to the master's present keys.
 */
class ZmqEventPublisherTest
{
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stubWithoutDeadline;
    private ZContext zmq;
    private final VllmEventCodec codec = new VllmEventCodec();

    @BeforeEach
    void start()
    {
        master = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(-1).adminPort(-1)
            .housekeeping(false).dataTokens(false).metadataShards(8)
            .eventsZmqEndpoint("tcp://127.0.0.1:*").eventsZmqReplayEndpoint("tcp://127.0.0.1:*")
            .eventsZmqTopic("kv-events"));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stubWithoutDeadline = MasterServiceGrpc.newBlockingStub(channel);
        stub().mountSegment(MountSegmentRequest.newBuilder().setNodeId("n").setNodeName("n").setEndpoint("127.0.0.1:1")
            .setSegment(SegmentInfo.newBuilder().setSegmentId(1).setName("n/seg0").setSizeBytes(1 << 20)).build());
        zmq = new ZContext();
    }

    /** A stub whose deadline starts now (a deadline set once would run out over the whole test). */
    private MasterServiceGrpc.MasterServiceBlockingStub stub()
    {
        return stubWithoutDeadline.withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        zmq.close();
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    private void put(final String tenant, final String key, final String group)
    {
        put(tenant, key, group, "");
    }

    private void put(final String tenant, final String key, final String group, final String parent)
    {
        assertThat(stub().putStart(PutStartRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key)
            .setValueLength(100).setOptions(PutOptions.newBuilder().setGroupId(group).setParentKey(parent)).build())
            .getCode()).isZero();
        assertThat(stub().putEnd(PutEndRequest.newBuilder().setTenant(tenant).setClientId("c").setKey(key).build())
            .getCode()).isZero();
    }

    /** Block hashes of the master's readable keys of a tenant. */
    private Set<Long> presentHashes(final String tenant)
    {
        final Set<Long> hashes = new HashSet<>();
        stub().listKeys(ListKeysRequest.newBuilder().setTenant(tenant).build()).getKeysList().stream()
            .filter(k -> k.getStatus() == ReplicaStatus.REPLICA_STATUS_COMPLETE)
            .forEach(k -> hashes.add(codec.blockHash(tenant, k.getKey().getBytes(StandardCharsets.UTF_8))));
        return hashes;
    }

    /** One decoded batch: its sequence and events (each a msgpack array starting with its tag). */
    private record Batch(long sequence, double ts, List<ArrayValue> events)
    {
    }

    private static Batch decode(final long sequence, final byte[] payload) throws Exception
    {
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload))
        {
            final ArrayValue batch = u.unpackValue().asArrayValue();
            assertThat(batch.size()).as("[ts, events, data_parallel_rank]").isEqualTo(3);
            assertThat(batch.get(2).isNilValue()).isTrue();
            assertThat(u.hasNext()).as("nothing after the batch").isFalse();
            final List<ArrayValue> events = new ArrayList<>();
            for (final Value e : batch.get(1).asArrayValue())
            {
                events.add(e.asArrayValue());
            }
            return new Batch(sequence, batch.get(0).asFloatValue().toDouble(), events);
        }
    }

    private static long sequenceOf(final byte[] frame)
    {
        assertThat(frame).hasSize(8);
        return ByteBuffer.wrap(frame).getLong(); // big-endian
    }

    /** Applies BlockStored / BlockRemoved / AllBlocksCleared to a set of block hashes, as a router does. */
    private static void apply(final Set<Long> view, final Batch batch)
    {
        for (final ArrayValue e : batch.events())
        {
            final String tag = e.get(0).asStringValue().asString();
            if ("AllBlocksCleared".equals(tag))
            {
                view.clear();
            }
            else if ("BlockStored".equals(tag))
            {
                e.get(1).asArrayValue().forEach(h -> view.add(h.asIntegerValue().toLong()));
            }
            else
            {
                assertThat(tag).isEqualTo("BlockRemoved");
                e.get(1).asArrayValue().forEach(h -> view.remove(h.asIntegerValue().toLong()));
            }
        }
    }

    /**
     * Asks the replay socket for every batch from {@code start}; returns them in order (end marker checked). Like a
     * real consumer, it asks again on a fresh socket when no answer comes within 2 s: on this loaded build machine
     * about one answer in five runs of this class never arrived although the publisher had sent it (its debug log
     * says so), cause not found.
     */
    private List<Batch> replayFrom(final long start) throws Exception
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true)
        {
            final List<Batch> batches = tryReplayFrom(start);
            if (batches != null)
            {
                return batches;
            }
            assertThat(System.nanoTime() - deadline).as("a replay answer within 20 s").isNegative();
        }
    }

    /** One replay request on a fresh DEALER socket; null when the answer did not come within 2 s. */
    private List<Batch> tryReplayFrom(final long start) throws Exception
    {
        final ZMQ.Socket dealer = zmq.createSocket(SocketType.DEALER);
        try
        {
            dealer.setReceiveTimeOut(2_000);
            dealer.setRcvHWM(0); // take the whole answer, however many batches
            dealer.connect(master.zmqEventPublisher().replayEndpoint());
            dealer.sendMore(new byte[0]); // the empty delimiter a REQ socket would add
            dealer.send(ByteBuffer.allocate(8).putLong(start).array());
            final List<Batch> batches = new ArrayList<>();
            while (true)
            {
                final byte[] delimiter = dealer.recv();
                if (delimiter == null)
                {
                    return null;
                }
                assertThat(delimiter).isEmpty();
                final long sequence = sequenceOf(dealer.recv());
                final byte[] payload = dealer.recv();
                assertThat(dealer.hasReceiveMore()).isFalse();
                if (sequence == -1)
                {
                    assertThat(payload).as("the end marker has an empty payload").isEmpty();
                    return batches;
                }
                batches.add(decode(sequence, payload));
            }
        }
        finally
        {
            zmq.destroySocket(dealer);
        }
    }

    @Test
    void shouldPublishVllmFramedBatchesOnPubAndReplayThemFromASequence() throws Exception
    {
        // PUB drops what it sends before the subscription arrives: put until the SUB socket hears something. A SUB
        // socket that hears nothing for 5 s while the publisher keeps sending is replaced, as a consumer would
        // reconnect (seen once on this build machine: a SUB that never heard a publisher that sent 300 batches).
        ZMQ.Socket sub = subscriber();
        byte[] topic = null;
        int puts = 0;
        final long hearDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        long subscribedAt = System.nanoTime();
        long batchesAtSubscribe = master.zmqEventPublisher().batches();
        while (topic == null)
        {
            assertThat(System.nanoTime() - hearDeadline).as("the SUB socket heard nothing in 60 s (%d puts)", puts)
                .isNegative();
            put("default", "warm" + puts++, "");
            topic = sub.recv();
            if (topic == null && System.nanoTime() - subscribedAt > TimeUnit.SECONDS.toNanos(5))
            {
                assertThat(master.zmqEventPublisher().batches()).as("the publisher kept publishing")
                    .isGreaterThan(batchesAtSubscribe);
                System.out.printf("ZmqEventPublisherTest: SUB heard nothing in 5 s (%d puts); replaced%n", puts);
                zmq.destroySocket(sub);
                sub = subscriber();
                subscribedAt = System.nanoTime();
                batchesAtSubscribe = master.zmqEventPublisher().batches();
            }
        }
        assertThat(new String(topic, StandardCharsets.UTF_8)).isEqualTo("kv-events");
        assertThat(sub.hasReceiveMore()).isTrue();
        final long firstSeen = sequenceOf(sub.recv());
        final Batch live = decode(firstSeen, sub.recv());
        assertThat(sub.hasReceiveMore()).isFalse();
        assertThat(live.events()).isNotEmpty();
        assertThat(live.ts()).isGreaterThan(1.0e9); // seconds since the epoch

        // The REMOVED is journaled before the CLEARED of RemoveAll, so it is always published as such before the
        // resync; a resync publishes the present keys, which may come last (the publisher may read the CLEARED late).
        put("t2", "grouped", "g1");
        put("t2", "child", "", "grouped");
        assertThat(stub().remove(RemoveRequest.newBuilder().setKey("warm0").build()).getCode()).isZero();
        assertThat(stub().removeAll(RemoveAllRequest.newBuilder().setTenant("nobody").build()).getCount()).isZero();
        final long hashOfGrouped = codec.blockHash("t2", "grouped".getBytes(StandardCharsets.UTF_8));
        final Set<Long> expected = presentHashes("default");
        expected.addAll(presentHashes("t2"));

        // Everything since sequence 0 from the replay socket: gapless, and it adds up to what the master holds.
        final List<Batch> replayed = awaitReplayedView(expected);
        assertThat(replayed.get(0).sequence()).isZero();
        for (int i = 0; i < replayed.size(); i++)
        {
            assertThat(replayed.get(i).sequence()).as("gapless batch sequences").isEqualTo(i);
        }
        assertThat(replayed.get(0).events().get(0).get(0).asStringValue().asString())
            .as("the epoch opens with a clear").isEqualTo("AllBlocksCleared");
        final Set<Long> view = new HashSet<>();
        replayed.forEach(b -> apply(view, b));
        assertThat(view).isEqualTo(expected).contains(hashOfGrouped)
            .doesNotContain(codec.blockHash("default", "warm0".getBytes(StandardCharsets.UTF_8)));

        // One BlockStored in full: vLLM's positional layout with Granary's identity in extra_keys.
        final ArrayValue stored = replayed.stream().flatMap(b -> b.events().stream())
            .filter(e -> e.get(0).asStringValue().asString().equals("BlockStored") &&
                e.get(1).asArrayValue().get(0).asIntegerValue().toLong() == hashOfGrouped)
            .findFirst().orElseThrow();
        assertThat(stored.size()).isEqualTo(9);
        assertThat(stored.get(2).isNilValue()).as("parent_block_hash").isTrue();
        assertThat(stored.get(3).asArrayValue().size()).as("token_ids").isZero();
        assertThat(stored.get(6).asStringValue().asString()).as("medium").isEqualTo("CPU");
        final ArrayValue identity = stored.get(8).asArrayValue().get(0).asArrayValue();
        assertThat(identity.get(0).asStringValue().asString()).isEqualTo("t2");
        assertThat(identity.get(1).asStringValue().asString()).isEqualTo("grouped");
        assertThat(identity.get(2).asStringValue().asString()).isEqualTo("g1");
        final long hashOfChild = codec.blockHash("t2", "child".getBytes(StandardCharsets.UTF_8));
        final ArrayValue child = replayed.stream().flatMap(b -> b.events().stream())
            .filter(e -> e.get(0).asStringValue().asString().equals("BlockStored") &&
                e.get(1).asArrayValue().get(0).asIntegerValue().toLong() == hashOfChild)
            .findFirst().orElseThrow();
        assertThat(child.get(2).asIntegerValue().toLong()).as("parent_block_hash: the parent key's block hash")
            .isEqualTo(hashOfGrouped);
        final ArrayValue removed = replayed.stream().flatMap(b -> b.events().stream())
            .filter(e -> e.get(0).asStringValue().asString().equals("BlockRemoved")).findFirst().orElseThrow();
        assertThat(removed.size()).isEqualTo(3);
        assertThat(removed.get(2).asStringValue().asString()).isEqualTo("CPU");

        // A replay from the middle starts exactly there.
        final List<Batch> tail = replayFrom(firstSeen);
        assertThat(tail.get(0).sequence()).isEqualTo(firstSeen);
        assertThat(master.zmqEventPublisher().replays()).as("replay requests answered").isGreaterThanOrEqualTo(2);
        assertThat(master.zmqEventPublisher().resyncs()).as("RemoveAll of a tenant resyncs").isEqualTo(1);
        assertThat(master.scrapeMetrics()).contains("granary_master_events_zmq_batches_total");
    }

    private ZMQ.Socket subscriber()
    {
        final ZMQ.Socket sub = zmq.createSocket(SocketType.SUB);
        sub.setReceiveTimeOut(100);
        sub.connect(master.zmqEventPublisher().endpoint());
        sub.subscribe("kv-events".getBytes(StandardCharsets.UTF_8));
        return sub;
    }

    /**
     * Replays from 0 until the publisher has done its resync (RemoveAll) and the replayed view equals the master's
     * present keys (the publisher polls the journal every millisecond; it serves replays on the same thread, so a
     * request sent after the resync counter moved is answered after the whole resync went out).
     */
    private List<Batch> awaitReplayedView(final Set<Long> expected) throws Exception
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Set<Long> view = Set.of();
        while (true)
        {
            if (master.zmqEventPublisher().resyncs() > 0)
            {
                final List<Batch> batches = replayFrom(0);
                view = new HashSet<>();
                for (final Batch b : batches)
                {
                    apply(view, b);
                }
                if (view.equals(expected))
                {
                    return batches;
                }
            }
            assertThat(System.nanoTime() - deadline).as("the replay never added up to the master's keys: %s vs %s",
                view, expected).isNegative();
            Thread.sleep(20);
        }
    }

    @Test
    void shouldRefuseBadOrTakenEndpointsAtStart()
    {
        assertThatThrownBy(() -> new MasterServer.Context().eventsZmqEndpoint("udp://127.0.0.1:5557").conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--events-zmq-endpoint");
        assertThatThrownBy(() -> new MasterServer.Context().eventsZmqEndpoint("tcp://127.0.0.1:70000").conclude())
            .hasMessageContaining("--events-zmq-endpoint");
        assertThatThrownBy(() -> new MasterServer.Context().eventsZmqReplayEndpoint("tcp://127.0.0.1:5558")
            .conclude()).hasMessageContaining("needs --events-zmq-endpoint");
        assertThatThrownBy(() -> new MasterServer.Context().events(false).eventsZmqEndpoint("tcp://127.0.0.1:5557")
            .conclude()).hasMessageContaining("--events=true");

        final String taken = master.zmqEventPublisher().endpoint();
        assertThatThrownBy(() -> MasterServer.launch(new MasterServer.Context().port(0).lookupPort(-1).adminPort(-1)
            .eventsZmqEndpoint(taken))).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("cannot bind the ZeroMQ event publisher");
    }
}
