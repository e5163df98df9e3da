package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/** The engine checks every response field against its request: a node that answers something else fails the lane. */
class ResponseValidationTest
{
    private ServerSocket serverSocket;
    private Thread thread;
    private TransferEngine engine;

    @AfterEach
    void close() throws Exception
    {
        if (engine != null)
        {
            engine.close();
        }
        if (serverSocket != null)
        {
            serverSocket.close();
        }
        if (thread != null)
        {
            thread.join(5_000);
        }
    }

    /** A node that answers the first request with {@code answer} applied to the honest response header. */
    private String lyingNode(final TestEngines kind, final UnaryOperator<FrameHeader> answer) throws IOException
    {
        serverSocket = new ServerSocket(0, 5, InetAddress.getLoopbackAddress());
        thread = new Thread(() ->
        {
            try (Socket socket = serverSocket.accept())
            {
                final DataInputStream in = new DataInputStream(socket.getInputStream());
                final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
                in.readFully(bytes);
                final FrameHeader request = new FrameHeader();
                final ByteBuf buf = Unpooled.wrappedBuffer(bytes);
                request.decode(buf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                buf.release();
                final FrameHeader response = new FrameHeader()
                    .set(Opcode.READ_RESPONSE, request.requestId, request.segmentId, request.offset, request.length);
                response.status = INVALID_PARAMS_VALUE; // no payload follows an error
                final ByteBuf out = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
                answer.apply(response).encode(out);
                final OutputStream os = socket.getOutputStream();
                os.write(out.array(), out.arrayOffset(), out.readableBytes());
                os.flush();
                out.release();
                in.read(); // wait for the engine to hang up
            }
            catch (final IOException ignored)
            {
                // the engine hung up: what these tests expect
            }
        }, "lying-node");
        thread.start();
        engine = kind.create(new TransferConfig().lanesPerPeer(1).transferTimeoutMs(60_000));
        return "127.0.0.1:" + serverSocket.getLocalPort();
    }

    private int read(final String endpoint) throws Exception
    {
        return engine.submit(TransferRequest.read(endpoint, 7, 4096, ByteBuffer.allocate(100), 100))
            .get(30, TimeUnit.SECONDS);
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldPassAKnownErrorStatusThrough(final TestEngines kind) throws Exception
    {
        assertThat(read(lyingNode(kind, h -> h))).isEqualTo(INVALID_PARAMS_VALUE);
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailAResponseThatDoesNotEchoTheOffset(final TestEngines kind) throws Exception
    {
        assertThat(read(lyingNode(kind, h ->
        {
            h.offset++;
            return h;
        }))).isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailAResponseForAnotherSegment(final TestEngines kind) throws Exception
    {
        assertThat(read(lyingNode(kind, h ->
        {
            h.segmentId++;
            return h;
        }))).isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailAResponseWithAnUnknownStatus(final TestEngines kind) throws Exception
    {
        assertThat(read(lyingNode(kind, h ->
        {
            h.status = 12345;
            return h;
        }))).isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailTheLaneOnAResponseToARequestNeverSent(final TestEngines kind) throws Exception
    {
        assertThat(read(lyingNode(kind, h ->
        {
            h.requestId = 1_000_000;
            return h;
        }))).isEqualTo(TRANSFER_FAIL_VALUE);
    }
}
