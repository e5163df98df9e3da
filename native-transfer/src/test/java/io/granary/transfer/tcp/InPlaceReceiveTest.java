package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * READ payloads that the engine receives straight into the caller's direct buffer: a scripted node on a
 * blocking socket sends responses in pieces the test chooses, and the test checks where every byte landed,
 * that nothing around the caller's range changed, and that nothing lands after the transfer completed.
 */
class InPlaceReceiveTest
{
    private static final byte CANARY = (byte)0xA5;

    private final Random random = new Random(7_2026);
    private ServerSocket serverSocket;
    private Socket socket;
    private NettyTransferEngine engine;

    @BeforeEach
    void listen() throws IOException
    {
        serverSocket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    }

    @AfterEach
    void close() throws IOException
    {
        if (engine != null)
        {
            engine.close();
        }
        if (socket != null)
        {
            socket.close();
        }
        serverSocket.close();
    }

    private String endpoint()
    {
        return "127.0.0.1:" + serverSocket.getLocalPort();
    }

    private CompletableFuture<Integer> read(final ByteBuffer into, final long remoteOffset, final int length)
    {
        return engine.submit(TransferRequest.read(endpoint(), 9, remoteOffset, into, length));
    }

    /** A direct buffer full of canary bytes with the caller's range [pad, pad + length) as position/limit. */
    private static ByteBuffer canaryBuffer(final int pad, final int length)
    {
        final ByteBuffer buffer = ByteBuffer.allocateDirect(pad + length + pad);
        for (int i = 0; i < buffer.capacity(); i++)
        {
            buffer.put(i, CANARY);
        }
        buffer.position(pad).limit(pad + length);
        return buffer;
    }

    private FrameHeader acceptAndReadRequest() throws IOException
    {
        socket = serverSocket.accept();
        return readRequest();
    }

    private FrameHeader readRequest() throws IOException
    {
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
        new DataInputStream(socket.getInputStream()).readFully(bytes);
        final ByteBuf buf = Unpooled.wrappedBuffer(bytes);
        final FrameHeader header = new FrameHeader();
        assertThat(header.decode(buf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT)).isEqualTo(FrameHeader.DECODE_OK);
        return header;
    }

    private static byte[] responseHeader(final FrameHeader request)
    {
        final ByteBuf buf = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        FrameHeader.encode(buf, Opcode.READ_RESPONSE, 0, request.requestId, request.segmentId, 0, request.offset,
            request.length, 0, null);
        return Arrays.copyOf(buf.array(), FrameDescriptor.HEADER_LENGTH);
    }

    private void send(final byte[] bytes, final int from, final int to) throws IOException
    {
        final OutputStream out = socket.getOutputStream();
        out.write(bytes, from, to - from);
        out.flush();
    }

    private static void assertCanaries(final ByteBuffer buffer, final int from, final int to)
    {
        final ByteBuffer whole = buffer.duplicate().clear();
        for (int i = from; i < to; i++)
        {
            assertThat(whole.get(i)).as("byte %d of the buffer", i).isEqualTo(CANARY);
        }
    }

    @Test
    void shouldPlaceEveryPieceOfALargeReadAndLeaveTheBytesAroundTheRangeAlone() throws Exception
    {
        engine = new NettyTransferEngine(new TransferConfig().lanesPerPeer(1).sliceBytes(4 << 20));
        final int length = (1 << 20) + 4097;
        final int pad = 4096;
        final ByteBuffer into = canaryBuffer(pad, length);
        final byte[] payload = new byte[length];
        random.nextBytes(payload);

        final CompletableFuture<Integer> done = read(into, 77, length);
        final FrameHeader request = acceptAndReadRequest();
        assertThat(request.length).isEqualTo(length);
        // Header split in two, then payload pieces below and above the in-place threshold.
        final byte[] header = responseHeader(request);
        send(header, 0, 10);
        send(header, 10, header.length);
        int sent = 0;
        for (final int piece : new int[]{5, 20_000, 1, 300_000, 70_000, 3})
        {
            send(payload, sent, sent + piece);
            sent += piece;
        }
        send(payload, sent, length);

        assertThat(done.get(30, TimeUnit.SECONDS)).isZero();
        final byte[] landed = new byte[length];
        into.duplicate().get(landed);
        assertThat(landed).isEqualTo(payload);
        assertThat(into.position()).isEqualTo(pad);
        assertThat(into.limit()).isEqualTo(pad + length);
        assertCanaries(into, 0, pad);
        assertCanaries(into, pad + length, into.capacity());
    }

    @Test
    void shouldDecodePipelinedResponsesOfMixedSizesGluedTogether() throws Exception
    {
        engine = new NettyTransferEngine(new TransferConfig().lanesPerPeer(1).maxVectorEntries(1).sliceBytes(4 << 20));
        final int[] lengths = {1 << 20, 100, 64 << 10, 1, 2 << 20};
        final ByteBuffer[] buffers = new ByteBuffer[lengths.length];
        final CompletableFuture<?>[] futures = new CompletableFuture<?>[lengths.length];
        for (int i = 0; i < lengths.length; i++)
        {
            buffers[i] = canaryBuffer(64, lengths[i]);
            futures[i] = read(buffers[i], 1000L * i, lengths[i]);
        }

        socket = serverSocket.accept();
        final ByteBuf stream = Unpooled.buffer();
        final byte[][] payloads = new byte[lengths.length][];
        for (int i = 0; i < lengths.length; i++)
        {
            final FrameHeader request = readRequest();
            final int index = (int)(request.offset / 1000);
            payloads[index] = new byte[lengths[index]];
            random.nextBytes(payloads[index]);
            stream.writeBytes(responseHeader(request)).writeBytes(payloads[index]);
        }
        final byte[] all = Arrays.copyOf(stream.array(), stream.writerIndex());
        stream.release();
        send(all, 0, all.length); // one write: headers and payloads back to back

        for (int i = 0; i < lengths.length; i++)
        {
            assertThat(futures[i].get(30, TimeUnit.SECONDS)).isEqualTo(0);
            final byte[] landed = new byte[lengths[i]];
            buffers[i].duplicate().get(landed);
            assertThat(landed).as("read %d", i).isEqualTo(payloads[i]);
            assertCanaries(buffers[i], 0, 64);
            assertCanaries(buffers[i], 64 + lengths[i], buffers[i].capacity());
        }
    }

    @Test
    void shouldStopWritingIntoTheCallersBufferOnceTheReadTimedOut() throws Exception
    {
        engine = new NettyTransferEngine(new TransferConfig().lanesPerPeer(1).sliceBytes(4 << 20).transferTimeoutMs(300));
        final int length = 1 << 20;
        final ByteBuffer into = canaryBuffer(0, length);
        final byte[] payload = new byte[length];
        random.nextBytes(payload);
        final int early = 200 << 10;

        final CompletableFuture<Integer> done = read(into, 0, length);
        final FrameHeader request = acceptAndReadRequest();
        send(responseHeader(request), 0, FrameDescriptor.HEADER_LENGTH);
        send(payload, 0, early);
        assertThat(done.get(30, TimeUnit.SECONDS)).isEqualTo(RPC_TIMEOUT_VALUE);

        // The rest arrives after the caller got its buffer back: it must be discarded, not written.
        send(payload, early, length);
        final CompletableFuture<Integer> probe = read(canaryBuffer(0, 16), 5, 16);
        final FrameHeader second = readRequest();
        final byte[] small = new byte[FrameDescriptor.HEADER_LENGTH + 16];
        System.arraycopy(responseHeader(second), 0, small, 0, FrameDescriptor.HEADER_LENGTH);
        send(small, 0, small.length);
        assertThat(probe.get(30, TimeUnit.SECONDS)).isZero(); // the lane stayed in sync past the discarded bytes

        final byte[] landed = new byte[early];
        into.duplicate().get(landed);
        assertThat(landed).isEqualTo(Arrays.copyOf(payload, early));
        assertCanaries(into, early, length);
    }
}
