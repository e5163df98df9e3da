package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransportKind;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The node's side of LOCAL_CONNECT (docs/protocol.md) over raw frames: malformed requests are refused and the
 * connection stays in step; the Java server never hands out addresses; the native one names an unknown segment and
 * answers a client on its host with the record of the segment (this process, its memory, the segment's range) while
 * its local transfers are on, whatever the token key, and refuses while they are off.
 */
class LocalConnectTest
{
    private SegmentRegistry registry;
    private Segment segment;
    private AccessTokenVerifier verifier;
    private TransferServer server;

    private void start(final TransportKind transport, final boolean localTransfers)
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("local/seg0", 1L << 20);
        verifier = new AccessTokenVerifier(Clock.SYSTEM);
        server = new TransferServer("127.0.0.1", 0, registry, 1 << 20, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, transport).localTransfers(localTransfers).start();
    }

    @AfterEach
    void stop()
    {
        if (server != null)
        {
            server.close();
        }
        if (registry != null)
        {
            registry.close();
        }
    }

    /** Sends one LOCAL_CONNECT and returns its answer's header, checking the echo; the record, if any, is read. */
    private static FrameHeader exchange(final RawClient client, final long requestId, final int segmentId,
        final int status, final long offset, final long length, final ByteBuffer record) throws IOException
    {
        final FrameHeader request = new FrameHeader().set(Opcode.LOCAL_CONNECT, requestId, segmentId, offset, length);
        request.status = status;
        client.send(RawClient.header(request));
        final FrameHeader answer = client.readHeader();
        assertThat(answer.opcode).isEqualTo(Opcode.LOCAL_CONNECT_RESPONSE);
        assertThat(answer.requestId).isEqualTo(requestId);
        assertThat(answer.segmentId).isEqualTo(segmentId);
        assertThat(answer.offset).isZero();
        assertThat(answer.length).as("a record exactly with status 0").isEqualTo(answer.status == 0 ? 64 : 0);
        if (answer.status == 0)
        {
            record.clear();
            record.put(client.readPayload(64)).flip();
        }
        return answer;
    }

    private void refusesMalformedAndStaysInStep(final RawClient client) throws IOException
    {
        final ByteBuffer record = ByteBuffer.allocate(64);
        final int id = segment.id();
        assertThat(exchange(client, 1, id, 0, 0, 8, record).status).as("a length").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(exchange(client, 2, id, 7, 0, 0, record).status).as("a status").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(exchange(client, 3, id, 0, 4096, 0, record).status).as("an offset")
            .isEqualTo(INVALID_PARAMS_VALUE);
        client.send(RawClient.header(Opcode.PING, 4, 0, 0, 0));
        assertThat(client.readHeader().opcode).isEqualTo(Opcode.PING_RESPONSE);
    }

    @Test
    void shouldNeverHandOutAddressesFromTheJavaServer() throws Exception
    {
        start(TransportKind.JAVA, true);
        try (RawClient client = new RawClient(server.port()))
        {
            refusesMalformedAndStaysInStep(client);
            final ByteBuffer record = ByteBuffer.allocate(64);
            assertThat(exchange(client, 5, segment.id(), 0, 0, 0, record).status)
                .isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
            assertThat(exchange(client, 6, 4242, 0, 0, 0, record).status)
                .isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        }
    }

    @Test
    void shouldAnswerWithTheSegmentsPlaceInThisProcessFromTheNativeServer() throws Exception
    {
        start(TransportKind.NATIVE, true);
        verifier.updateKey(AccessTokenCodec.newRandomKey()); // tokens on: the exchange needs none
        try (RawClient client = new RawClient(server.port()))
        {
            refusesMalformedAndStaysInStep(client);
            final ByteBuffer record = ByteBuffer.allocate(64);
            assertThat(exchange(client, 5, 4242, 0, 0, 0, record).status).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
            assertThat(exchange(client, 6, segment.id(), 0, 0, 0, record).status).isZero();
            assertThat(record.getInt(0)).as("magic").isEqualTo(0x47524C43);
            assertThat(record.get(4)).as("version").isEqualTo((byte)1);
            assertThat(record.getInt(8)).as("pid").isEqualTo((int)ProcessHandle.current().pid());
            assertThat(record.getLong(16)).as("cookie").isNotZero();
            assertThat(record.getLong(24)).as("cookie address").isNotZero();
            assertThat(record.getLong(40)).as("generation address").isNotZero();
            assertThat(record.getLong(48)).as("segment address").isEqualTo(segment.address());
            assertThat(record.getLong(56)).as("segment length").isEqualTo(segment.sizeBytes());
            final long generation = record.getLong(32);
            // A new segment table moves the generation the next answer names.
            registry.allocate("local/seg1", 1L << 20);
            final long deadline = System.nanoTime() + 10_000_000_000L;
            long moved = generation;
            for (long id = 7; moved == generation && System.nanoTime() < deadline; id++)
            {
                assertThat(exchange(client, id, segment.id(), 0, 0, 0, record).status).isZero();
                moved = record.getLong(32);
            }
            assertThat(moved).isGreaterThan(generation);
        }
    }

    @Test
    void shouldRefuseFromTheNativeServerWithLocalTransfersOff() throws Exception
    {
        start(TransportKind.NATIVE, false);
        try (RawClient client = new RawClient(server.port()))
        {
            refusesMalformedAndStaysInStep(client);
            final ByteBuffer record = ByteBuffer.allocate(64);
            assertThat(exchange(client, 5, segment.id(), 0, 0, 0, record).status)
                .isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
        }
    }
}
