package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.KeyInfo;
import io.granary.client.PutOptions;
import io.granary.client.events.KvEvent;
import io.granary.client.events.KvEventListener;
import io.granary.client.events.KvEventSubscriber;
import io.granary.client.events.PresentKeys;
import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.SegmentInfo;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The client's event subscriber against real masters and storage nodes: it follows the stream into an exact view,
 * survives being cut off, and starts over when the master restarts.
 */
class KvEventSubscriberTest
{
    private static void await(final String what, final BooleanSupplier condition) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean())
        {
            assertThat(System.nanoTime() - deadline).as("timed out waiting for " + what).isNegative();
            Thread.sleep(10);
        }
    }

    private static Set<String> present(final GranaryClient client)
    {
        return client.listKeys(null, 10_000).stream().filter(k -> "COMPLETE".equals(k.status().name()))
            .map(KeyInfo::key).collect(Collectors.toSet());
    }

    @Test
    void shouldKeepAnExactViewThroughPutsRemovesGroupsAndANodeLeaving() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(8L << 20).start();
             GranaryClient client = cluster.newClient())
        {
            client.put("before", new byte[100]);
            final PresentKeys view = new PresentKeys();
            final List<KvEvent> seen = new CopyOnWriteArrayList<>();
            try (KvEventSubscriber subscriber = KvEventSubscriber.start(cluster.clientConfig().build(),
                new KvEventSubscriber.Options(), new KvEventListener()
                {
                    @Override
                    public void onEvent(final KvEvent event)
                    {
                        seen.add(event);
                        view.onEvent(event);
                    }

                    @Override
                    public void onReset(final ResetCause cause, final long epoch)
                    {
                        view.onReset(cause, epoch);
                    }

                    @Override
                    public void onSynced(final long epoch, final long nextSequence)
                    {
                        view.onSynced(epoch, nextSequence);
                    }
                }))
            {
                await("in sync", () -> view.isSynced() && view.contains("default", "before"));
                for (int i = 0; i < 40; i++)
                {
                    client.put("k" + i, ByteBuffer.wrap(new byte[1000]),
                        PutOptions.builder().replicas(i % 2 == 0 ? 1 : 2).groupId(i < 4 ? "g" : null).build());
                }
                client.remove("k3");
                assertThat(client.removeByRegex("k1[0-9]")).isEqualTo(10);
                await("the puts and removes", () -> view.keys("default").equals(present(client)));
                assertThat(subscriber.epoch()).isEqualTo(cluster.master().epoch());
                assertThat(seen.stream().filter(e -> e.key().equals("k2")).findFirst().orElseThrow().groupId())
                    .isEqualTo("g");

                // A node leaves: objects whose only replica was there are gone, the others stay.
                final StorageNode node = cluster.nodes().get(0);
                cluster.stopNode(node);
                await("the node's objects to go", () -> view.keys("default").equals(present(client)));
                assertThat(seen.stream().anyMatch(e -> e.reason() == KvEvent.Reason.NODE_LOST)).isTrue();
                assertThat(view.keys("default")).isNotEmpty();
                assertThat(subscriber.gaps()).isZero();
                assertThat(subscriber.connections()).isEqualTo(1);
            }
        }
    }

    @Test
    void shouldReconnectAfterBeingCutOffAndEndExact() throws Exception
    {
        final MasterServer.Context master = LocalCluster.defaultMasterContext().eventsBuffer(4096)
            .eventsSubscriberQueue(64);
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(16L << 20)
            .masterContext(master).start();
             GranaryClient client = cluster.newClient())
        {
            final PresentKeys view = new PresentKeys();
            final CountDownLatch release = new CountDownLatch(1);
            final KvEventListener slow = new KvEventListener()
            {
                @Override
                public void onEvent(final KvEvent event)
                {
                    try
                    {
                        release.await(); // a router stuck for a while
                    }
                    catch (final InterruptedException ex)
                    {
                        Thread.currentThread().interrupt();
                    }
                    view.onEvent(event);
                }

                @Override
                public void onReset(final ResetCause cause, final long epoch)
                {
                    view.onReset(cause, epoch);
                }

                @Override
                public void onSynced(final long epoch, final long nextSequence)
                {
                    view.onSynced(epoch, nextSequence);
                }
            };
            try (KvEventSubscriber subscriber = KvEventSubscriber.start(cluster.clientConfig().build(),
                new KvEventSubscriber.Options(), slow))
            {
                final String pad = "p".repeat(2000);
                int i = 0;
                while (cluster.master().eventDispatcher().cutOffs() == 0)
                {
                    client.put(pad + i++, new byte[8]);
                    assertThat(i).as("cut off before 3000 puts").isLessThan(3000);
                }
                release.countDown();
                await("the view to catch up", () -> subscriber.connections() >= 2 &&
                    view.keys("default").equals(present(client)) &&
                    subscriber.nextSequence() == cluster.master().eventJournal().nextSequence());
                assertThat(subscriber.gaps()).isZero();
            }
        }
    }

    @Test
    void shouldStartOverWhenTheMasterRestartsWithANewEpoch() throws Exception
    {
        final int port;
        try (ServerSocket s = new ServerSocket(0))
        {
            port = s.getLocalPort();
        }
        final MasterServer.Context ctx = new MasterServer.Context().port(port).lookupPort(-1).adminPort(-1)
            .dataTokens(false);
        MasterServer master = MasterServer.launch(ctx);
        final PresentKeys view = new PresentKeys();
        final List<String> resets = new CopyOnWriteArrayList<>();
        final ClientConfig config = ClientConfig.builder().masterAddress("127.0.0.1:" + port)
            .reconnectBackoff(Duration.ofMillis(20)).reconnectBackoffMax(Duration.ofMillis(200)).build();
        try (KvEventSubscriber subscriber = KvEventSubscriber.start(config, new KvEventSubscriber.Options(),
            new KvEventListener()
            {
                @Override
                public void onEvent(final KvEvent event)
                {
                    view.onEvent(event);
                }

                @Override
                public void onReset(final ResetCause cause, final long epoch)
                {
                    resets.add(cause.name());
                    view.onReset(cause, epoch);
                }

                @Override
                public void onSynced(final long epoch, final long nextSequence)
                {
                    view.onSynced(epoch, nextSequence);
                }
            }))
        {
            putWithoutData(port, "old");
            await("the first key", () -> view.contains("default", "old"));
            final long firstEpoch = subscriber.epoch();
            master.close();
            master = MasterServer.launch(ctx);
            putWithoutData(port, "new");
            final long secondEpoch = master.epoch();
            await("the new epoch", () -> subscriber.epoch() == secondEpoch && view.contains("default", "new"));
            assertThat(secondEpoch).isNotEqualTo(firstEpoch);
            assertThat(resets).contains("EPOCH_CHANGED");
            assertThat(view.keys("default")).containsExactly("new");
            assertThat(subscriber.connections()).isGreaterThanOrEqualTo(2);
        }
        finally
        {
            master.close();
        }
    }

    /** A put through the control plane only (a mounted segment without a node behind it): enough for events. */
    private static void putWithoutData(final int port, final String key) throws InterruptedException
    {
        final ManagedChannel channel = ManagedChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build();
        try
        {
            final MasterServiceGrpc.MasterServiceBlockingStub stub =
                MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
            stub.mountSegment(MountSegmentRequest.newBuilder().setNodeId("n").setNodeName("n")
                .setEndpoint("127.0.0.1:1").setSegment(SegmentInfo.newBuilder().setSegmentId(1).setName("n/seg0")
                    .setSizeBytes(1 << 20)).build());
            assertThat(stub.putStart(PutStartRequest.newBuilder().setClientId("c").setKey(key).setValueLength(10)
                .build()).getCode()).isZero();
            assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey(key).build()).getCode())
                .isZero();
        }
        finally
        {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void shouldPrintEventsFromTheCommandLine() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.start(1, 4L << 20);
             GranaryClient client = cluster.newClient())
        {
            client.put("cli/a", new byte[10]);
            client.put("cli/b", ByteBuffer.wrap(new byte[20]), PutOptions.builder().groupId("grp").build());
            client.remove("cli/a");
            client.put("cli/c", ByteBuffer.wrap(new byte[30]), PutOptions.builder().parent("cli/b").build());
            final CliRun run = CliRun.run("events", "--master", cluster.masterAddress(), "--from", "0",
                "--count", "5", "--duration", "20s");
            assertThat(run.exitCode()).as(run.toString()).isZero();
            final List<String> lines = run.out().lines().filter(l -> !l.startsWith("--")).collect(Collectors.toList());
            assertThat(lines).containsExactly(
                "#0 CLEARED MASTER_START *",
                "#1 STORED default cli/a 10B CPU",
                "#2 STORED default cli/b 20B CPU group=grp (group complete)",
                "#3 REMOVED REMOVED default cli/a 10B CPU",
                "#4 STORED default cli/c 30B CPU parent=cli/b");
            assertThat(run.out()).contains("-- in sync at sequence");

            final CliRun snapshot = CliRun.run("events", "--master", cluster.masterAddress(), "--snapshot", "--from",
                "0", "--count", "1", "--json", "--duration", "20s");
            assertThat(snapshot.exitCode()).as(snapshot.toString()).isZero();
            assertThat(snapshot.out().strip()).startsWith("{\"sequence\":0,\"type\":\"STORED\"")
                .contains("\"key\":\"cli/b\"").contains("\"snapshot\":true");

            final CliRun bad = CliRun.run("events", "--master", cluster.masterAddress(), "--tenant", "bad tenant!");
            assertThat(bad.exitCode()).as(bad.toString()).isEqualTo(Granary.EXIT_BAD_INPUT);
        }
    }
}
