package io.granary.node;

import io.granary.node.master.FakeMaster;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.proto.LedgerEntry;
import io.granary.proto.ReportLedgerRequest;
import io.granary.protocol.CommitRecord;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** The node's ledger and its registration: reports, re-keying, frees and discards against a recording master. */
class StorageNodeLedgerTest
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

    private StorageNode node(final FakeMaster master)
    {
        final StorageNode node = track(StorageNode.launch(new StorageNode.Context()
            .masterAddress(master.address())
            .segmentSizeBytes(MIB)
            .segmentCount(2)
            .heartbeatIntervalMs(50)
            .masterRpcTimeoutMs(2_000)
            .reconnectBackoffMs(10)
            .reconnectBackoffMaxMs(50)
            .ioThreads(1)));
        Await.until("registered", () -> node.masterLink().isRegistered());
        return node;
    }

    private int commit(final StorageNode node, final int segmentId, final long offset, final String key,
        final long version) throws Exception
    {
        return commit(node, segmentId, offset, key, "", version);
    }

    private int commit(final StorageNode node, final int segmentId, final long offset, final String key,
        final String parentKey, final long version) throws Exception
    {
        final NettyTransferEngine engine = track(new NettyTransferEngine(new TransferConfig()));
        final CommitRecord record = new CommitRecord(
            CommitRecord.FLAG_SOFT_PIN, "default", key, "", parentKey, 512, version, 60_000, 0);
        return engine.submit(new TransferRequest(TransferRequest.Op.WRITE, node.endpoint(), segmentId, offset,
            ByteBuffer.allocate(512), 512, null, record.encode())).get(10, TimeUnit.SECONDS);
    }

    private static List<ReportLedgerRequest> reportsAfter(final FakeMaster master, final int from)
    {
        return master.reports.subList(from, master.reports.size());
    }

    @Test
    void shouldMountWithLedgerFollowingAndReportEverySegmentOnce() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = node(master);

        assertThat(master.mounts).hasSize(2).allMatch(m -> m.getLedgerFollows());
        assertThat(master.reports).hasSize(2).allSatisfy(r ->
        {
            assertThat(r.getNodeId()).isEqualTo(node.nodeId());
            assertThat(r.getPreviousMasterId()).isEmpty();
            assertThat(r.getEntriesList()).isEmpty();
            assertThat(r.getLast()).isTrue();
        });
        assertThat(master.reports).extracting(ReportLedgerRequest::getSegmentId)
            .containsExactlyElementsOf(node.segments().stream().map(Segment::id).collect(Collectors.toList()));
        assertThat(node.masterLink().masterId()).isEqualTo(master.masterId);
        assertThat(node.masterLink().rekeys()).isZero();
    }

    @Test
    void shouldRekeyAndReportItsLedgerWhenTheMasterForgetsIt() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = node(master);
        final Segment segment = node.segments().get(0);
        final int oldId = segment.id();
        assertThat(commit(node, oldId, 4096, "page-1", 77)).isZero();
        assertThat(commit(node, oldId, 8192, "page-2", "page-1", 78)).isZero();
        final int reportsBefore = master.reports.size();

        master.forgetNodes();

        Await.until("registered again", () -> node.masterLink().registrations() >= 2);
        assertThat(segment.id()).as("fresh id after the master forgot the node").isNotEqualTo(oldId);
        final List<ReportLedgerRequest> again = reportsAfter(master, reportsBefore);
        assertThat(again).extracting(ReportLedgerRequest::getPreviousMasterId).containsOnly(master.masterId);
        final ReportLedgerRequest report = again.stream()
            .filter(r -> r.getSegmentId() == segment.id()).findFirst().orElseThrow();
        assertThat(report.getEntriesList()).hasSize(2);
        assertThat(report.getEntries(0)).satisfies(e ->
        {
            assertThat(e.getKey()).isEqualTo("page-1");
            assertThat(e.getOffset()).isEqualTo(4096);
            assertThat(e.getValueLength()).isEqualTo(512);
            assertThat(e.getVersion()).isEqualTo(77);
            assertThat(e.getFlags()).isEqualTo(CommitRecord.FLAG_SOFT_PIN);
            assertThat(e.getSoftPinTtlMs()).isEqualTo(60_000);
            assertThat(e.getSequence()).isEqualTo(1);
            assertThat(e.hasCrc32C()).isFalse();
            assertThat(e.getParentKey()).isEmpty();
        });
        assertThat(report.getEntries(1)).as("the parent key its COMMIT named").satisfies(e ->
        {
            assertThat(e.getKey()).isEqualTo("page-2");
            assertThat(e.getParentKey()).isEqualTo("page-1");
            assertThat(e.getFlags()).isEqualTo(CommitRecord.FLAG_SOFT_PIN | CommitRecord.FLAG_PARENT);
            assertThat(e.getSequence()).isEqualTo(2);
        });
        assertThat(master.mounts.subList(2, master.mounts.size()))
            .extracting(m -> m.getSegment().getSegmentId()).doesNotContain(oldId);
        assertThat(commit(node, oldId, 12288, "stale-writer", 79)).as("extents of the forgotten registration")
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
    }

    @Test
    void shouldDropWhatTheMasterRejectsAndWhatItFrees() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = node(master);
        final Segment segment = node.segments().get(1);
        assertThat(commit(node, segment.id(), 0, "kept", 1)).isZero();
        assertThat(commit(node, segment.id(), 1024, "rejected", 2)).isZero();
        assertThat(commit(node, segment.id(), 2048, "freed", 3)).isZero();
        master.rejectOffset(1024);

        master.forgetNodes();
        Await.until("registered again", () -> node.masterLink().registrations() >= 2);
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("kept", "freed");
        assertThat(node.masterLink().entriesRejected()).isEqualTo(1);

        master.free(segment.id(), 2048, 99);  // another version: stays
        master.free(segment.id(), 2048, 3);
        Await.until("frees delivered", () -> !master.pendingFrees() && node.masterLink().freesApplied() == 1);
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("kept");
    }

    @Test
    void shouldRekeyForAnotherMasterOnlyWhenAnEarlierOneMayHaveHandedOutItsSegments() throws Exception
    {
        final FakeMaster first = FakeMaster.start(0);
        final int port = first.port();
        final StorageNode node = track(StorageNode.launch(new StorageNode.Context()
            .masterAddress(first.address()).segmentSizeBytes(MIB).segmentCount(2).heartbeatIntervalMs(50)
            .masterRpcTimeoutMs(2_000).reconnectBackoffMs(10).reconnectBackoffMaxMs(50).ioThreads(1)));
        final List<Integer> ids = node.segments().stream().map(Segment::id).collect(Collectors.toList());
        // The first master takes seg0's report (seg0 may now get extents from it) and keeps refusing seg1's.
        first.refuseReportsOf(ids.get(1));
        Await.until("seg1's report refused twice", () -> first.reports.stream()
            .filter(r -> r.getSegmentId() == ids.get(1)).count() >= 2);
        assertThat(node.masterLink().isRegistered()).isFalse();
        first.close();

        final FakeMaster second = track(FakeMaster.start(port));
        Await.until("registered with the second master", () -> node.masterLink().isRegistered());

        assertThat(node.masterLink().rekeys()).isEqualTo(1);
        assertThat(node.segments()).extracting(Segment::id).doesNotContainAnyElementsOf(ids);
        assertThat(second.mounts).extracting(m -> m.getSegment().getSegmentId()).doesNotContainAnyElementsOf(ids);
        assertThat(node.masterLink().masterId()).isEqualTo(second.masterId);
    }

    @Test
    void shouldNotRekeyForAMasterWhenNoneHadTheSegmentsBefore() throws Exception
    {
        final FakeMaster first = FakeMaster.start(0);
        final int port = first.port();
        first.mountCode(io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE);
        final StorageNode node = track(StorageNode.launch(new StorageNode.Context()
            .masterAddress(first.address()).segmentSizeBytes(MIB).segmentCount(2).heartbeatIntervalMs(50)
            .masterRpcTimeoutMs(2_000).reconnectBackoffMs(10).reconnectBackoffMaxMs(50).ioThreads(1)));
        final List<Integer> ids = node.segments().stream().map(Segment::id).collect(Collectors.toList());
        Await.until("mounts refused", () -> first.mounts.size() >= 2);
        first.close();

        final FakeMaster second = track(FakeMaster.start(port));
        Await.until("registered with the second master", () -> node.masterLink().isRegistered());

        assertThat(node.masterLink().rekeys()).isZero();
        assertThat(node.segments()).extracting(Segment::id).containsExactlyElementsOf(ids);
    }

    @Test
    void shouldClearItsLedgerWhenTheMasterHadExpiredIt() throws Exception
    {
        final FakeMaster master = track(FakeMaster.start(0));
        final StorageNode node = node(master);
        assertThat(commit(node, node.segments().get(0).id(), 0, "a", 1)).isZero();
        master.discardAll(true);

        master.forgetNodes();

        Await.until("registered again", () -> node.masterLink().registrations() >= 2);
        assertThat(node.segments()).allSatisfy(s -> assertThat(s.ledger().size()).isZero());
        assertThat(node.masterLink().ledgersDiscarded()).isEqualTo(2);
        assertThat(master.reports.stream().filter(r -> !r.getPreviousMasterId().isEmpty())
            .flatMap(r -> r.getEntriesList().stream()).map(LedgerEntry::getKey)).containsExactly("a");
    }
}
