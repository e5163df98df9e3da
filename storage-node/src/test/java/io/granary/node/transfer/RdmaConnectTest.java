package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.protocol.QpInfo;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransfer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Arrays;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The node's side of the RDMA queue-pair information exchange (RDMA_CONNECT) over raw frames: malformed requests are
 * refused and the connection stays in step, an unknown segment is named, a node with data tokens on hands out no
 * remote key, and a node without an RDMA transport or device answers UNAVAILABLE.
 */
class RdmaConnectTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private SegmentRegistry registry;
    private Segment segment;
    private AccessTokenVerifier verifier;
    private TransferServer server;

    @BeforeEach
    void start()
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("rdma/seg0", 1L << 20);
        verifier = new AccessTokenVerifier(Clock.SYSTEM);
        server = new TransferServer("127.0.0.1", 0, registry, 1 << 20, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, serverTransport()).start();
    }

    @AfterEach
    void stop()
    {
        server.close();
        registry.close();
    }

    private static byte[] record(final int segmentId)
    {
        return QpInfo.client(1, 5, 0, 0x1234, 0x4321, new byte[16], segmentId).encode();
    }

    private static byte[] frame(final long requestId, final int segmentId, final int status, final byte[] payload)
    {
        final FrameHeader header = new FrameHeader().set(Opcode.RDMA_CONNECT, requestId, segmentId, 0, payload.length);
        header.status = status;
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(RawClient.header(header));
        out.writeBytes(payload);
        return out.toByteArray();
    }

    /** Sends one exchange and returns the status of its answer, checking the answer's echo and emptiness. */
    private static int exchange(final RawClient client, final long requestId, final int segmentId, final int status,
        final byte[] payload) throws IOException
    {
        client.send(frame(requestId, segmentId, status, payload));
        final FrameHeader answer = client.readHeader();
        assertThat(answer.opcode).isEqualTo(Opcode.RDMA_CONNECT_RESPONSE);
        assertThat(answer.requestId).isEqualTo(requestId);
        assertThat(answer.segmentId).isEqualTo(segmentId);
        assertThat(answer.offset).isZero();
        assertThat(answer.status).isNotZero();
        assertThat(answer.length).as("an error answer carries no record").isZero();
        return answer.status;
    }

    @Test
    void shouldRefuseMalformedExchangesAndStayInStep() throws Exception
    {
        final int id = segment.id();
        final byte[] good = record(id);
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(exchange(client, 1, id, 0, new byte[0])).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(exchange(client, 2, id, 0, Arrays.copyOf(good, 63))).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(exchange(client, 3, id, 0, Arrays.copyOf(good, 65))).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(exchange(client, 4, id, 0, Arrays.copyOf(good, 100_000)))
                .as("a long payload is discarded whole").isEqualTo(INVALID_PARAMS_VALUE);
            final byte[] badMagic = good.clone();
            badMagic[0] ^= 1;
            assertThat(exchange(client, 5, id, 0, badMagic)).isEqualTo(INVALID_PARAMS_VALUE);
            final byte[] reserved = good.clone();
            reserved[63] = 1;
            assertThat(exchange(client, 6, id, 0, reserved)).isEqualTo(INVALID_PARAMS_VALUE);
            final byte[] zeroQp = QpInfo.client(1, 5, 0, 0, 1, new byte[16], id).encode();
            assertThat(exchange(client, 7, id, 0, zeroQp)).isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(exchange(client, 8, id + 1, 0, good)).as("the record names another segment")
                .isEqualTo(INVALID_PARAMS_VALUE);
            assertThat(exchange(client, 9, id, 7, good)).as("a request with a status").isEqualTo(INVALID_PARAMS_VALUE);

            // split across reads, byte by byte: still one answer
            client.sendByteByByte(frame(10, id + 1, 0, record(id + 1)));
            final FrameHeader split = client.readHeader();
            assertThat(split.requestId).isEqualTo(10);
            assertThat(split.status).isEqualTo(SEGMENT_NOT_FOUND_VALUE);

            client.send(RawClient.header(Opcode.PING, 11, 0, 0, 0));
            assertThat(client.readHeader().opcode).isEqualTo(Opcode.PING_RESPONSE);
        }
    }

    @Test
    void shouldNameAnUnknownSegmentAndAnswerUnavailableWithoutADevice() throws Exception
    {
        // The Java server has no RDMA transport; the native one answers UNAVAILABLE here because no device exists.
        final boolean nativeWithDevice = serverTransport() == TransportKind.NATIVE && NativeTransfer.isRdmaAvailable();
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(exchange(client, 1, 4242, 0, record(4242))).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
            if (!nativeWithDevice)
            {
                assertThat(exchange(client, 2, segment.id(), 0, record(segment.id())))
                    .isEqualTo(UNAVAILABLE_IN_CURRENT_STATUS_VALUE);
            }
        }
    }

    @Test
    void shouldHandOutNoRemoteKeyWhileTokensAreOn() throws Exception
    {
        verifier.updateKey(AccessTokenCodec.newRandomKey());
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(exchange(client, 1, segment.id(), 0, record(segment.id()))).isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(exchange(client, 2, 4242, 0, record(4242))).as("before the segment is looked up")
                .isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(exchange(client, 3, segment.id(), 0, new byte[10])).as("malformed comes first")
                .isEqualTo(INVALID_PARAMS_VALUE);
        }
        verifier.updateKey(new byte[0]);
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(exchange(client, 4, 4242, 0, record(4242))).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        }
    }
}
