package io.granary.node;

import io.granary.common.ManualClock;
import io.granary.node.master.FakeMaster;
import io.granary.node.segment.Segment;
import io.granary.proto.ErrorCode;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.UnmountSegmentRequest;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** A whole storage node against a recording master on a real gRPC server. */
class StorageNodeTest
{
    private static final long MIB = 1 << 20;
    private final List<AutoCloseable> resources = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
    }

    private <T extends AutoCloseable> T track(final T resource)
    {
        resources.add(resource);
        return resource;
    }

    private static StorageNode.Context context(final String masterAddress)
    {
        return new StorageNode.Context()
            .masterAddress(masterAddress)
            .segmentSizeBytes(MIB)
            .segmentCount(3)
            .heartbeatIntervalMs(50)
            .masterRpcTimeoutMs(2_000)
            .ioThreads(1);
    }

    private static int freePort() throws Exception
    {
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            return probe.getLocalPort();
        }
    }

    @Test
    void shouldMountEverySegmentWithTheRightFields() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = track(StorageNode.launch(context(master.address()).name("alpha")));

        Await.until("three mounts", () -> master.mounts.size() >= 3);
        Await.until("registered", () -> node.masterLink().isRegistered());

        assertThat(node.name()).isEqualTo("alpha");
        assertThat(node.endpoint()).isEqualTo("127.0.0.1:" + node.transferPort());
        assertThat(node.segments()).hasSize(3);
        assertThat(master.mounts).hasSize(3).allSatisfy(m ->
        {
            assertThat(m.getNodeId()).isEqualTo(node.nodeId());
            assertThat(m.getNodeName()).isEqualTo("alpha");
            assertThat(m.getEndpoint()).isEqualTo(node.endpoint());
        });
        for (int i = 0; i < 3; i++)
        {
            final Segment segment = node.segments().get(i);
            final MountSegmentRequest mount = master.mounts.get(i);
            assertThat(segment.name()).isEqualTo("alpha/seg" + i);
            assertThat(mount.getSegment().getSegmentId()).isEqualTo(segment.id());
            assertThat(mount.getSegment().getName()).isEqualTo(segment.name());
            assertThat(mount.getSegment().getSizeBytes()).isEqualTo(MIB);
        }
    }

    @Test
    void shouldNameTheNodeAfterItsTransferPortByDefault() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = track(StorageNode.launch(context(master.address()).segmentCount(1)));

        assertThat(node.name()).isEqualTo("node-" + node.transferPort());
        assertThat(node.segments().get(0).name()).isEqualTo(node.name() + "/seg0");
        assertThat(node.nodeId()).hasSize(36);
    }

    @Test
    void shouldHeartbeatAfterMounting() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = track(StorageNode.launch(context(master.address())));

        Await.until("three heartbeats", () -> master.heartbeatsFrom(node.nodeId()) >= 3);
        assertThat(master.mounts).hasSize(3);
        Await.until("the node counted the answers", () -> node.masterLink().heartbeats() >= 3);
    }

    @Test
    void shouldMountAgainWhenTheMasterForgetsTheNode() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = track(StorageNode.launch(context(master.address())));
        Await.until("first heartbeat", () -> master.heartbeatsFrom(node.nodeId()) >= 1);

        master.forgetNodes();

        Await.until("segments mounted again", () -> master.mounts.size() >= 6);
        assertThat(master.mounts.subList(3, 6)).extracting(m -> m.getSegment().getSegmentId())
            .containsExactlyElementsOf(node.segments().stream().map(Segment::id).collect(Collectors.toList()));
        final int heartbeatsAfterRemount = master.heartbeats.size();
        Await.until("heartbeats resume", () -> master.heartbeats.size() > heartbeatsAfterRemount + 1);
        assertThat(node.masterLink().isRegistered()).isTrue();
    }

    @Test
    void shouldUnmountEverySegmentOnClose() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = StorageNode.launch(context(master.address()));
        Await.until("registered", () -> node.masterLink().isRegistered());
        final List<Segment> segments = node.segments();

        node.close();
        node.close();

        assertThat(master.unmounts).hasSize(3).allSatisfy(u -> assertThat(u.getNodeId()).isEqualTo(node.nodeId()));
        assertThat(master.unmounts).extracting(UnmountSegmentRequest::getSegmentId)
            .containsExactlyElementsOf(segments.stream().map(Segment::id).collect(Collectors.toList()));
        assertThat(segments).allMatch(Segment::isClosed);
        assertThat(node.transferServer().isTerminated()).isTrue();
        final int heartbeatsAtClose = master.heartbeats.size();
        assertThat(master.heartbeats).hasSize(heartbeatsAtClose);
    }

    @Test
    void shouldStopWhenTheMasterNeverAnswersTheUnmount() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = StorageNode.launch(context(master.address()));
        Await.until("registered", () -> node.masterLink().isRegistered());
        master.silentUnmounts();

        final CompletableFuture<Void> closed = CompletableFuture.runAsync(node::close);

        // The unmount gets its share of a 2 s budget and no more: the node stops, its segments closed.
        closed.get(30, TimeUnit.SECONDS);
        assertThat(master.unmounts).hasSize(1);
        assertThat(node.segments()).allMatch(Segment::isClosed);
        assertThat(node.transferServer().isTerminated()).isTrue();
    }

    @Test
    void shouldServeTransfersAndRegisterOnceTheMasterComesUp() throws Exception
    {
        final int masterPort = freePort();
        final StorageNode node = track(StorageNode.launch(context("127.0.0.1:" + masterPort).clock(new ManualClock())));
        assertThat(node.masterLink().isRegistered()).isFalse();

        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig()));
        final Segment segment = node.segments().get(1);
        final ByteBuffer data = ByteBuffer.wrap(new byte[] {1, 2, 3, 4});
        assertThat(engine.submit(TransferRequest.write(node.endpoint(), segment.id(), 100, data, 4))
            .get(10, TimeUnit.SECONDS)).isZero();
        final ByteBuffer back = ByteBuffer.allocate(4);
        assertThat(engine.submit(TransferRequest.read(node.endpoint(), segment.id(), 100, back, 4))
            .get(10, TimeUnit.SECONDS)).isZero();
        assertThat(back.array()).containsExactly(1, 2, 3, 4);

        final FakeMaster master = track(FakeMaster.start(masterPort));
        Await.until("mounted after the master came up", () -> master.mounts.size() >= 3);
        Await.until("registered", () -> node.masterLink().isRegistered());
        Await.until("heartbeating", () -> master.heartbeatsFrom(node.nodeId()) >= 1);
    }

    @Test
    void shouldRegisterAgainWithARestartedMaster() throws Exception
    {
        final FakeMaster first = FakeMaster.start(0);
        final int port = first.port();
        final StorageNode node = track(StorageNode.launch(context(first.address())));
        Await.until("registered", () -> node.masterLink().isRegistered());

        first.close();
        Await.until("noticed the master is gone", () -> !node.masterLink().isRegistered());
        final FakeMaster second = track(FakeMaster.start(port));

        Await.until("mounted at the restarted master", () -> second.mounts.size() >= 3);
        assertThat(second.mounts).allSatisfy(m -> assertThat(m.getNodeId()).isEqualTo(node.nodeId()));
        Await.until("registered again", () -> node.masterLink().isRegistered());
    }

    @Test
    void shouldKeepRetryingWhileTheMasterRefusesMounts() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        master.mountCode(ErrorCode.INTERNAL_ERROR_VALUE);
        final StorageNode node = track(StorageNode.launch(context(master.address())));

        Await.until("retried", () -> master.mounts.size() >= 3);
        assertThat(node.masterLink().isRegistered()).isFalse();

        master.mountCode(ErrorCode.OK_VALUE);
        Await.until("registered", () -> node.masterLink().isRegistered());
    }

    @Test
    void shouldRefuseToLaunchOnAPortInUse() throws Exception
    {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            assertThatThrownBy(() -> StorageNode.launch(context("127.0.0.1:1").transferPort(taken.getLocalPort())))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("cannot bind");
        }
    }
}
