package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.LedgerBudget;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** COMMIT frames and the segment ledger, through the real transfer server. */
class TransferServerCommitTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private static final long SEGMENT_BYTES = 4L << 20;

    private SegmentRegistry registry;
    private Segment segment;
    private TransferServer server;
    private String endpoint;
    private NettyTransferEngine engine;

    @BeforeEach
    void start()
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("test/seg0", SEGMENT_BYTES);
        server = new TransferServer("127.0.0.1", 0, registry, 1 << 20, 1, true, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED, serverTransport()).start();
        endpoint = "127.0.0.1:" + server.port();
        engine = new NettyTransferEngine(new TransferConfig().sliceBytes(64 << 10));
    }

    @AfterEach
    void stop()
    {
        engine.close();
        server.close();
        registry.close();
    }

    private static CommitRecord record(final String key, final long length, final long version)
    {
        return new CommitRecord(CommitRecord.FLAG_HARD_PIN, "tenant-a", key, "grp", length, version, 0, 0);
    }

    private int writeAndCommit(final int segmentId, final long offset, final byte[] value, final CommitRecord record)
        throws Exception
    {
        return engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segmentId, offset,
            ByteBuffer.wrap(value), value.length, null, record.encode())).get(10, TimeUnit.SECONDS);
    }

    @Test
    void shouldRecordASingleSliceAndASlicedWriteInTheLedger() throws Exception
    {
        assertThat(writeAndCommit(segment.id(), 0, new byte[1000], record("small", 1000, 11))).isZero();
        assertThat(writeAndCommit(segment.id(), 1 << 20, new byte[300_000], record("big", 300_000, 12))).isZero();

        assertThat(segment.ledger().snapshot()).satisfiesExactly(
            e ->
            {
                assertThat(e.key()).isEqualTo("small");
                assertThat(e.tenant()).isEqualTo("tenant-a");
                assertThat(e.groupId()).isEqualTo("grp");
                assertThat(e.offset()).isZero();
                assertThat(e.valueLength()).isEqualTo(1000);
                assertThat(e.version()).isEqualTo(11);
                assertThat(e.flags()).isEqualTo(CommitRecord.FLAG_HARD_PIN);
            },
            e ->
            {
                assertThat(e.key()).isEqualTo("big");
                assertThat(e.offset()).isEqualTo(1 << 20);
            });
    }

    @Test
    void shouldForgetALedgerEntryAsSoonAsAWriteOverlapsIt() throws Exception
    {
        assertThat(writeAndCommit(segment.id(), 4096, new byte[4096], record("k", 4096, 1))).isZero();

        assertThat(engine.submit(TransferRequest.write(endpoint, segment.id(), 8000, ByteBuffer.allocate(200), 200))
            .get(10, TimeUnit.SECONDS)).isZero();

        assertThat(segment.ledger().snapshot()).isEmpty();
    }

    @Test
    void shouldRefuseACommitBeyondTheLedgerBudgetAndKeepTheConnection() throws Exception
    {
        // Room for one entry: "a" or "b" with group "grp" (names of 2 + 1 + 3 bytes).
        final SegmentRegistry small = new SegmentRegistry(new LedgerBudget(LedgerBudget.entryBytes(6)));
        final Segment seg = small.allocate("test/seg1", SEGMENT_BYTES);
        final TransferServer smallServer = new TransferServer("127.0.0.1", 0, small, 1 << 20, 1, true,
            TransferMetrics.NONE, new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED, serverTransport())
            .start();
        try (RawClient client = new RawClient(smallServer.port()))
        {
            final byte[] a = record("a", 100, 1).encode();
            final byte[] b = record("b", 100, 2).encode();
            final ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(RawClient.header(Opcode.WRITE, 1, seg.id(), 0, 100));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.COMMIT, 2, seg.id(), 0, a.length));
            frames.write(a);
            frames.write(RawClient.header(Opcode.WRITE, 3, seg.id(), 4096, 100));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.COMMIT, 4, seg.id(), 4096, b.length));
            frames.write(b);
            client.send(frames.toByteArray());
            final int[] statuses = new int[5];
            for (int i = 0; i < 4; i++)
            {
                final FrameHeader response = client.readHeader();
                statuses[(int)response.requestId] = response.status;
            }
            assertThat(statuses).containsExactly(0, 0, 0, 0, NO_AVAILABLE_HANDLE_VALUE);
            assertThat(seg.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("a");
            assertThat(small.ledgerBudget().refusals()).isEqualTo(1);

            // The master frees "a": "b"'s COMMIT fits now, on the same connection.
            assertThat(seg.ledger().free(0, 1)).isTrue();
            final ByteArrayOutputStream again = new ByteArrayOutputStream();
            again.write(RawClient.header(Opcode.COMMIT, 5, seg.id(), 4096, b.length));
            again.write(b);
            client.send(again.toByteArray());
            final FrameHeader response = client.readHeader();
            assertThat(response.requestId).isEqualTo(5);
            assertThat(response.status).isZero();
            assertThat(seg.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("b");
        }
        finally
        {
            smallServer.close();
            small.close();
        }
    }

    @Test
    void shouldRefuseTheCommitOfAWriteThisConnectionRefused() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            // A WRITE past the end of the segment, then a COMMIT of the same extent right behind it.
            final long offset = SEGMENT_BYTES - 10;
            final byte[] payload = record("k", 100, 1).encode();
            final ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(RawClient.header(Opcode.WRITE, 1, segment.id(), offset, 100));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.COMMIT, 2, segment.id(), offset, payload.length));
            frames.write(payload);
            client.send(frames.toByteArray());

            final FrameHeader writeResponse = client.readHeader();
            final FrameHeader commitResponse = client.readHeader();
            assertThat(writeResponse.status).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(commitResponse.opcode).isEqualTo(Opcode.COMMIT_RESPONSE);
            assertThat(commitResponse.status).isEqualTo(INVALID_PARAMS_VALUE);
        }
        assertThat(segment.ledger().size()).isZero();
    }

    /**
     * A client sends a sliced WRITE's COMMIT behind its last slice: if a slice that started inside the extent was
     * refused on the connection, the COMMIT is refused with its status; a refused WRITE just past the extent does
     * not touch it.
     */
    @Test
    void shouldRefuseTheCommitOfAnExtentOneOfWhoseSlicesThisConnectionRefused() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            final FrameHeader refusedSlice = new FrameHeader();
            refusedSlice.set(Opcode.WRITE, 2, segment.id(), 8192 + 100, 100);
            refusedSlice.status = 7; // a request must carry status 0: refused with INVALID_PARAMS
            final byte[] payload = record("k", 200, 1).encode();
            final ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(RawClient.header(Opcode.WRITE, 1, segment.id(), 8192, 100));
            frames.write(new byte[100]);
            frames.write(RawClient.header(refusedSlice));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.COMMIT, 3, segment.id(), 8192, payload.length));
            frames.write(payload);
            client.send(frames.toByteArray());
            assertThat(client.readHeader().status).isZero();
            assertThat(client.readHeader().status).isEqualTo(INVALID_PARAMS_VALUE);
            final FrameHeader commitResponse = client.readHeader();
            assertThat(commitResponse.requestId).isEqualTo(3);
            assertThat(commitResponse.status).as("the COMMIT behind a refused slice").isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(segment.ledger().size()).isZero();

            final FrameHeader pastTheExtent = new FrameHeader();
            pastTheExtent.set(Opcode.WRITE, 4, segment.id(), 16384 + 200, 100);
            pastTheExtent.status = 7;
            final byte[] next = record("n", 200, 2).encode();
            frames.reset();
            frames.write(RawClient.header(pastTheExtent));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.WRITE, 5, segment.id(), 16384, 200));
            frames.write(new byte[200]);
            frames.write(RawClient.header(Opcode.COMMIT, 6, segment.id(), 16384, next.length));
            frames.write(next);
            client.send(frames.toByteArray());
            assertThat(client.readHeader().status).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(client.readHeader().status).isZero();
            assertThat(client.readHeader().status).as("a refused WRITE past the extent").isZero();
        }
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("n");
    }

    @Test
    void shouldAnswerMalformedAndOversizedCommitsAndKeepTheConnection() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            final byte[] garbage = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
                9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
            client.sendByteByByte(RawClient.header(Opcode.COMMIT, 1, segment.id(), 0, garbage.length));
            client.sendByteByByte(garbage);
            assertThat(client.readHeader().status).isEqualTo(INVALID_PARAMS_VALUE);

            final int oversized = FrameDescriptor.MAX_COMMIT_PAYLOAD + 1;
            client.send(RawClient.header(Opcode.COMMIT, 2, segment.id(), 0, oversized));
            client.send(new byte[oversized]);
            final FrameHeader tooLong = client.readHeader();
            assertThat(tooLong.requestId).isEqualTo(2);
            assertThat(tooLong.status).isEqualTo(INVALID_PARAMS_VALUE);

            final byte[] beyond = record("k", 4096, 1).encode();
            client.send(RawClient.header(Opcode.COMMIT, 3, segment.id(), SEGMENT_BYTES - 100, beyond.length));
            client.send(beyond);
            assertThat(client.readHeader().status).as("an extent outside the segment").isEqualTo(INVALID_PARAMS_VALUE);

            final byte[] good = record("k", 4096, 1).encode();
            client.send(RawClient.header(Opcode.COMMIT, 4, segment.id(), 8192, good.length));
            client.send(good);
            final FrameHeader ok = client.readHeader();
            assertThat(ok.requestId).isEqualTo(4);
            assertThat(ok.status).isZero();
        }
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::offset).containsExactly(8192L);
    }

    /** A WRITE_COMMIT header: the WRITE's range, the record's length in {@code flags}. */
    private static byte[] writeCommitHeader(
        final long requestId, final int segmentId, final long offset, final long length, final int recordLength)
    {
        final FrameHeader header = new FrameHeader();
        header.set(Opcode.WRITE_COMMIT, requestId, segmentId, offset, length);
        header.flags = recordLength;
        return RawClient.header(header);
    }

    @Test
    void shouldWriteAndRecordAWriteCommitWithOneAnswer() throws Exception
    {
        final byte[] value = new byte[1000];
        final byte[] big = new byte[300_000];
        final java.util.Random random = new java.util.Random(5);
        random.nextBytes(value);
        random.nextBytes(big);
        final byte[] rec = record("wc", value.length, 31).encode();
        try (RawClient client = new RawClient(server.port()))
        {
            final ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(writeCommitHeader(1, segment.id(), 4096, value.length, rec.length));
            frames.write(rec);
            frames.write(value);
            frames.write(RawClient.header(Opcode.PING, 2, 0, 0, 0));
            client.sendByteByByte(frames.toByteArray());
            // A value big enough for the Java server to receive it straight into segment memory.
            final byte[] bigRecord = record("big", big.length, 32).encode();
            frames.reset();
            frames.write(writeCommitHeader(3, segment.id(), 1 << 20, big.length, bigRecord.length));
            frames.write(bigRecord);
            frames.write(big);
            client.send(frames.toByteArray());

            final FrameHeader answer = client.readHeader();
            assertThat(answer.opcode).isEqualTo(Opcode.WRITE_COMMIT_RESPONSE);
            assertThat(answer.requestId).isEqualTo(1);
            assertThat(answer.status).isZero();
            assertThat(answer.segmentId).isEqualTo(segment.id());
            assertThat(answer.offset).isEqualTo(4096);
            assertThat(answer.length).isEqualTo(value.length);
            final FrameHeader ping = client.readHeader();
            assertThat(ping.opcode).as("one answer for the WRITE_COMMIT, the stream in step").isEqualTo(
                Opcode.PING_RESPONSE);
            assertThat(ping.requestId).isEqualTo(2);
            final FrameHeader bigAnswer = client.readHeader();
            assertThat(bigAnswer.opcode).isEqualTo(Opcode.WRITE_COMMIT_RESPONSE);
            assertThat(bigAnswer.requestId).isEqualTo(3);
            assertThat(bigAnswer.status).isZero();
        }
        assertThat(segmentBytes(4096, value.length)).isEqualTo(value);
        assertThat(segmentBytes(1 << 20, big.length)).isEqualTo(big);
        assertThat(segment.ledger().snapshot()).satisfiesExactly(
            e ->
            {
                assertThat(e.key()).isEqualTo("wc");
                assertThat(e.offset()).isEqualTo(4096);
                assertThat(e.valueLength()).isEqualTo(value.length);
                assertThat(e.version()).isEqualTo(31);
            },
            e ->
            {
                assertThat(e.key()).isEqualTo("big");
                assertThat(e.offset()).isEqualTo(1 << 20);
                assertThat(e.valueLength()).isEqualTo(big.length);
            });
    }

    private byte[] segmentBytes(final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new org.agrona.concurrent.UnsafeBuffer(segment.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    /**
     * Refused WRITE_COMMITs (a range outside the segment, no record, a record longer than a COMMIT's, a request
     * status) are answered once, their bytes consumed, nothing recorded and nothing remembered against a later COMMIT
     * of the extent; a malformed record is refused after the bytes landed; the connection keeps serving.
     */
    @Test
    void shouldRefuseBadWriteCommitsWithOneAnswerEachAndKeepTheConnection() throws Exception
    {
        final byte[] good = record("k", 100, 1).encode();
        final byte[] garbage = new byte[40];
        java.util.Arrays.fill(garbage, (byte)9);
        final int oversized = FrameDescriptor.MAX_COMMIT_PAYLOAD + 1;
        final FrameHeader withStatus = new FrameHeader();
        withStatus.set(Opcode.WRITE_COMMIT, 5, segment.id(), 16384, 100);
        withStatus.flags = good.length;
        withStatus.status = 7;
        try (RawClient client = new RawClient(server.port()))
        {
            final ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(writeCommitHeader(1, segment.id(), SEGMENT_BYTES - 10, 100, good.length));
            frames.write(good);
            frames.write(new byte[100]);
            frames.write(writeCommitHeader(2, segment.id(), 0, 100, 0));
            frames.write(new byte[100]);
            frames.write(writeCommitHeader(3, segment.id(), 0, 100, oversized));
            frames.write(new byte[oversized]);
            frames.write(new byte[100]);
            frames.write(writeCommitHeader(4, segment.id(), 8192, 100, garbage.length));
            frames.write(garbage);
            frames.write(new byte[100]);
            frames.write(RawClient.header(withStatus));
            frames.write(good);
            frames.write(new byte[100]);
            // The extent of the refused #5 written and committed apart: nothing of #5 is held against it.
            frames.write(RawClient.header(Opcode.WRITE, 6, segment.id(), 16384, 100));
            frames.write(new byte[100]);
            frames.write(RawClient.header(Opcode.COMMIT, 7, segment.id(), 16384, good.length));
            frames.write(good);
            client.send(frames.toByteArray());

            final int[] statuses = new int[8];
            for (int i = 1; i <= 7; i++)
            {
                final FrameHeader answer = client.readHeader();
                assertThat(answer.requestId).isEqualTo(i);
                assertThat(answer.opcode).isEqualTo(i <= 5 ? Opcode.WRITE_COMMIT_RESPONSE :
                    i == 6 ? Opcode.WRITE_RESPONSE : Opcode.COMMIT_RESPONSE);
                statuses[i] = answer.status;
            }
            assertThat(statuses).containsExactly(0, INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE,
                INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE, 0, 0);
        }
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::offset).containsExactly(16384L);
    }

    @Test
    void shouldRefuseWritesAndCommitsNamingARekeyedSegment() throws Exception
    {
        final int old = segment.id();
        registry.rekey(segment);

        assertThat(writeAndCommit(old, 0, new byte[100], record("k", 100, 1))).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        assertThat(writeAndCommit(segment.id(), 0, new byte[100], record("k", 100, 1))).isZero();
        assertThat(segment.ledger().size()).isEqualTo(1);
    }
}
