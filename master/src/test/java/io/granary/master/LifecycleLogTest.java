package io.granary.master;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.granary.common.ManualClock;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.KeyRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.SegmentInfo;
import io.granary.proto.UnmountSegmentRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** The master logs one INFO line per lifecycle event and nothing per request. */
class LifecycleLogTest
{
    private final ListAppender<ILoggingEvent> events = new ListAppender<>();
    private Logger root;
    private Level rootLevel;
    private ManualClock clock;
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    @BeforeEach
    void start()
    {
        root = ((LoggerContext)LoggerFactory.getILoggerFactory()).getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        rootLevel = root.getLevel();
        root.setLevel(Level.INFO);
        events.start();
        root.addAppender(events);
        clock = new ManualClock();
        master = MasterServer.launch(new MasterServer.Context()
            .port(0).lookupPort(-1).adminPort(-1).clock(clock).housekeeping(false).metadataShards(16));
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
        root.detachAppender(events);
        root.setLevel(rootLevel);
    }

    private List<String> infoFromGranary()
    {
        synchronized (events)
        {
            return events.list.stream()
                .filter(e -> e.getLevel().isGreaterOrEqual(Level.INFO) && e.getLoggerName().startsWith("io.granary"))
                .map(ILoggingEvent::getFormattedMessage)
                .collect(Collectors.toList());
        }
    }

    private void mount(final String nodeId, final int segmentId, final long size)
    {
        assertThat(stub.mountSegment(MountSegmentRequest.newBuilder()
            .setNodeId(nodeId).setNodeName(nodeId).setEndpoint("127.0.0.1:" + (7000 + segmentId))
            .setSegment(SegmentInfo.newBuilder().setSegmentId(segmentId).setName(nodeId + "/seg0").setSizeBytes(size))
            .build()).getCode()).isEqualTo(OK_VALUE);
    }

    private int put(final String key, final long size)
    {
        final int code = stub.putStart(PutStartRequest.newBuilder().setClientId("c").setKey(key).setValueLength(size)
            .setOptions(PutOptions.newBuilder().setReplicas(1)).build()).getCode();
        if (code == OK_VALUE)
        {
            assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey(key).build()).getCode())
                .isEqualTo(OK_VALUE);
        }
        return code;
    }

    @Test
    void shouldLogOneInfoLinePerLifecycleEventAndNothingPerRequest()
    {
        assertThat(infoFromGranary()).anyMatch(line -> line.startsWith("master ready: grpc=127.0.0.1:"));

        mount("node-a", 1, 1 << 20);
        mount("node-b", 2, 1 << 20);
        assertThat(infoFromGranary())
            .anyMatch(line -> line.startsWith("node joined: node-a id=node-a endpoint=127.0.0.1:7001"))
            .anyMatch(line -> line.startsWith("segment mounted: node-a/seg0@127.0.0.1:7001"));

        // Requests: puts, lookups and batch lookups log nothing at INFO.
        final int before = infoFromGranary().size();
        for (int i = 0; i < 50; i++)
        {
            assertThat(put("k" + i, 1000)).isEqualTo(OK_VALUE);
            assertThat(stub.getReplicaList(KeyRequest.newBuilder().setKey("k" + i).build()).getCode())
                .isEqualTo(OK_VALUE);
        }
        assertThat(stub.batchExistKey(BatchKeysRequest.newBuilder().addKeys("k1").addKeys("nope").build())
            .getExistsList()).containsExactly(true, false);
        assertThat(infoFromGranary()).as("INFO lines while serving requests").hasSize(before);

        // Eviction: an allocation that finds no room evicts (the first round is summed up at once).
        clock.advance(Duration.ofSeconds(11)); // the reads' leases lapse
        for (int i = 0; i < 3; i++)
        {
            assertThat(put("big" + i, 700_000)).isEqualTo(OK_VALUE);
        }
        assertThat(master.evictor().logSummaryIfDue(clock.nanoTime(), Duration.ofSeconds(10).toNanos())).isTrue();
        assertThat(infoFromGranary()).anyMatch(line -> line.matches(
            "eviction: \\d+ objects \\(\\d+ bytes\\) in \\d+ round\\(s\\) \\(\\d+ on demand\\): pass 1 .*"));
        assertThat(master.evictor().logSummaryIfDue(clock.nanoTime(), Duration.ofSeconds(10).toNanos()))
            .as("nothing new to sum up").isFalse();

        // A clean unmount, then a node that stops heartbeating.
        assertThat(stub.unmountSegment(UnmountSegmentRequest.newBuilder().setNodeId("node-b").setSegmentId(2).build())
            .getCode()).isEqualTo(OK_VALUE);
        assertThat(infoFromGranary()).anyMatch(line -> line.startsWith("segment unmounted: node-b/seg0"));
        clock.advance(Duration.ofSeconds(11));
        master.housekeep();
        synchronized (events)
        {
            assertThat(events.list).anyMatch(e -> e.getLevel() == Level.WARN &&
                e.getFormattedMessage().startsWith("node expired: node-a id=node-a"));
        }
    }
}
