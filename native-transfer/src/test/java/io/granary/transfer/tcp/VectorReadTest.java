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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The engine's READV path against a scripted node on a blocking socket: small reads queued together leave as
 * one vector, per-entry statuses reach the right reads, and answers that cannot belong to the vector fail its
 * reads instead of landing bytes in the wrong place.
 */
class VectorReadTest
{
    private ServerSocket serverSocket;
    private Socket socket;
    private DataInputStream in;
    private TransferEngine engine;

    @BeforeEach
    void listen() throws IOException
    {
        serverSocket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    }

    private void start(final TestEngines kind)
    {
        engine = kind.create(new TransferConfig().lanesPerPeer(1).transferTimeoutMs(2_000));
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

    /**
     * Submits {@code n} reads of {@code length} bytes at offsets 1000 * i, each into its own direct buffer (all made
     * first, so that the submits follow each other closely).
     */
    private List<CompletableFuture<Integer>> submitReads(final int n, final int length, final List<ByteBuffer> into)
    {
        final String endpoint = "127.0.0.1:" + serverSocket.getLocalPort();
        final List<TransferRequest> requests = new ArrayList<>();
        for (int i = 0; i < n; i++)
        {
            final ByteBuffer dst = ByteBuffer.allocateDirect(length);
            into.add(dst);
            requests.add(TransferRequest.read(endpoint, 3, 1000L * i, dst, length));
        }
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (final TransferRequest request : requests)
        {
            futures.add(engine.submit(request));
        }
        return futures;
    }

    /**
     * Submits and collects {@code n} reads (into {@code reads} and {@code into}) until the engine sent at least one
     * READV: an engine whose thread takes each submit at once may send a burst as single READs, which are then
     * answered honestly and the burst is submitted again on the same connection.
     */
    private List<List<FrameHeader>> submitUntilVector(final int n, final int length, final List<ByteBuffer> into,
        final List<CompletableFuture<Integer>> reads) throws Exception
    {
        for (int attempt = 0; attempt < 20; attempt++)
        {
            into.clear();
            reads.clear();
            reads.addAll(submitReads(n, length, into));
            final List<List<FrameHeader>> frames = collect(n);
            if (frames.stream().anyMatch(f -> f.size() > 1))
            {
                return frames;
            }
            for (final List<FrameHeader> frame : frames)
            {
                answerSingle(frame.get(0));
            }
            for (final CompletableFuture<Integer> read : reads)
            {
                assertThat(read.get(10, TimeUnit.SECONDS)).isZero();
            }
        }
        throw new AssertionError("no READV in 20 bursts of " + n + " reads");
    }

    private FrameHeader readHeader() throws IOException
    {
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
        in.readFully(bytes);
        final FrameHeader header = new FrameHeader();
        assertThat(header.decode(Unpooled.wrappedBuffer(bytes), FrameDescriptor.MAX_FRAME_LENGTH_LIMIT))
            .isEqualTo(FrameHeader.DECODE_OK);
        return header;
    }

    /**
     * Accepts the lane and reads frames until {@code reads} READs arrived, in vectors or alone (the engine forms
     * vectors from whatever is queued when its event loop drains the lane, so a burst may be split). Each
     * returned list is one frame: its header first, then its entries (none for a single READ).
     */
    private List<List<FrameHeader>> collect(final int reads) throws IOException
    {
        if (socket == null || socket.isClosed())
        {
            socket = serverSocket.accept();
            in = new DataInputStream(socket.getInputStream());
        }
        final List<List<FrameHeader>> frames = new ArrayList<>();
        int seen = 0;
        while (seen < reads)
        {
            final FrameHeader header = readHeader();
            final List<FrameHeader> frame = new ArrayList<>();
            frame.add(header);
            if (header.opcode == Opcode.READV)
            {
                for (long i = 0; i < header.length / FrameDescriptor.HEADER_LENGTH; i++)
                {
                    final FrameHeader entry = readHeader();
                    assertThat(entry.opcode).isEqualTo(Opcode.READ);
                    frame.add(entry);
                    seen++;
                }
            }
            else
            {
                assertThat(header.opcode).isEqualTo(Opcode.READ);
                seen++;
            }
            frames.add(frame);
        }
        return frames;
    }

    /** Answers a single READ with bytes of value (offset / 1000 + 1). */
    private void answerSingle(final FrameHeader read) throws IOException
    {
        final ByteBuf out = Unpooled.buffer();
        FrameHeader.encode(out, Opcode.READ_RESPONSE, 0, read.requestId, read.segmentId, 0, read.offset, read.length,
            0, null);
        for (long i = 0; i < read.length; i++)
        {
            out.writeByte((int)(read.offset / 1000 + 1));
        }
        socket.getOutputStream().write(out.array(), out.arrayOffset(), out.readableBytes());
        socket.getOutputStream().flush();
        out.release();
    }

    private void answer(final long requestId, final long length, final int[] statuses, final byte[] payload)
        throws IOException
    {
        final ByteBuf out = Unpooled.buffer();
        FrameHeader.encode(out, Opcode.READV_RESPONSE, 0, requestId, 0, 0, 0, length, 0, null);
        for (final int status : statuses)
        {
            out.writeInt(status);
        }
        out.writeBytes(payload);
        socket.getOutputStream().write(out.array(), out.arrayOffset(), out.readableBytes());
        socket.getOutputStream().flush();
        out.release();
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldSendQueuedSmallReadsAsVectorsAndHandEachReadItsOwnStatusAndBytes(final TestEngines kind) throws Exception
    {
        start(kind);
        final int n = 40;
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        int vectors = 0;
        for (final List<FrameHeader> frame : submitUntilVector(n, 10, into, reads))
        {
            if (frame.size() == 1)
            {
                answerSingle(frame.get(0));
                continue;
            }
            vectors++;
            // Every read whose index is a multiple of 3 is refused; the others get bytes of value index + 1.
            final int entries = frame.size() - 1;
            final int[] statuses = new int[entries];
            final ByteBuf payload = Unpooled.buffer();
            for (int e = 0; e < entries; e++)
            {
                final FrameHeader entry = frame.get(e + 1);
                assertThat(entry.segmentId).isEqualTo(3);
                assertThat(entry.length).isEqualTo(10);
                final int index = (int)(entry.offset / 1000);
                statuses[e] = index % 3 == 0 ? SEGMENT_NOT_FOUND_VALUE : 0;
                for (int b = 0; statuses[e] == 0 && b < 10; b++)
                {
                    payload.writeByte(index + 1);
                }
            }
            final byte[] bytes = new byte[payload.readableBytes()];
            payload.readBytes(bytes).release();
            answer(frame.get(0).requestId, 4L * entries + bytes.length, statuses, bytes);
        }

        assertThat(vectors).as("READV frames").isPositive();
        for (int i = 0; i < n; i++)
        {
            final int status = reads.get(i).get(10, TimeUnit.SECONDS);
            final byte[] landed = new byte[10];
            into.get(i).duplicate().clear().get(landed);
            final byte[] expected = new byte[10];
            if (status == 0)
            {
                Arrays.fill(expected, (byte)(i + 1));
            }
            else
            {
                assertThat(status).as("read %d", i).isEqualTo(SEGMENT_NOT_FOUND_VALUE);
                assertThat(i % 3).isZero();
            }
            assertThat(landed).as("read %d", i).isEqualTo(expected);
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailEveryReadOfAVectorWhoseStatusesDoNotAddUpToTheAnnouncedLength(final TestEngines kind) throws Exception
    {
        start(kind);
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final List<Integer> inVectors = new ArrayList<>();
        for (final List<FrameHeader> frame : submitUntilVector(20, 10, into, reads))
        {
            if (frame.size() == 1)
            {
                answerSingle(frame.get(0));
                continue;
            }
            // The statuses say every entry succeeded, the header announces one byte less.
            final int entries = frame.size() - 1;
            final int bytes = 10 * entries - 1;
            answer(frame.get(0).requestId, 4L * entries + bytes, new int[entries], new byte[bytes]);
            frame.subList(1, frame.size()).forEach(e -> inVectors.add((int)(e.offset / 1000)));
        }

        assertThat(inVectors).isNotEmpty();
        for (int i = 0; i < reads.size(); i++)
        {
            assertThat(reads.get(i).get(10, TimeUnit.SECONDS)).as("read %d", i)
                .isEqualTo(inVectors.contains(i) ? TRANSFER_FAIL_VALUE : 0);
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldCloseTheLaneWhenAVectorAnswerIsLongerThanEverythingAskedFor(final TestEngines kind) throws Exception
    {
        start(kind);
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final List<List<FrameHeader>> frames = submitUntilVector(20, 10, into, reads);
        final List<FrameHeader> vector = frames.stream().filter(f -> f.size() > 1).findFirst().orElseThrow();
        final int entries = vector.size() - 1;
        answer(vector.get(0).requestId, 4L * entries + 10L * entries + 1, new int[entries], new byte[10 * entries + 1]);

        for (final FrameHeader entry : vector.subList(1, vector.size()))
        {
            assertThat(reads.get((int)(entry.offset / 1000)).get(10, TimeUnit.SECONDS)).isEqualTo(TRANSFER_FAIL_VALUE);
        }
        for (final CompletableFuture<Integer> read : reads)
        {
            assertThat(read.get(10, TimeUnit.SECONDS)).isEqualTo(TRANSFER_FAIL_VALUE); // the lane closed under all
        }
        assertThat(in.read()).as("the engine hung up").isEqualTo(-1);
    }

    /** A READV_RESPONSE header alone, with the given addressing fields and status. */
    private void answerHeader(final long requestId, final int segmentId, final int status, final long offset,
        final long length) throws IOException
    {
        final ByteBuf out = Unpooled.buffer();
        FrameHeader.encode(out, Opcode.READV_RESPONSE, 0, requestId, segmentId, status, offset, length, 0, null);
        socket.getOutputStream().write(out.array(), out.arrayOffset(), out.readableBytes());
        socket.getOutputStream().flush();
        out.release();
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldHandEveryReadOfAVectorRefusedWholeTheRefusalAndKeepTheLane(final TestEngines kind) throws Exception
    {
        start(kind);
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final List<Integer> inVectors = new ArrayList<>();
        for (final List<FrameHeader> frame : submitUntilVector(20, 10, into, reads))
        {
            if (frame.size() == 1)
            {
                answerSingle(frame.get(0));
                continue;
            }
            answerHeader(frame.get(0).requestId, 0, INVALID_PARAMS_VALUE, 0, 0);
            frame.subList(1, frame.size()).forEach(e -> inVectors.add((int)(e.offset / 1000)));
        }

        assertThat(inVectors).isNotEmpty();
        for (int i = 0; i < reads.size(); i++)
        {
            assertThat(reads.get(i).get(10, TimeUnit.SECONDS)).as("read %d", i)
                .isEqualTo(inVectors.contains(i) ? INVALID_PARAMS_VALUE : 0);
        }
        final List<ByteBuffer> more = new ArrayList<>();
        final CompletableFuture<Integer> next = engine.submit(TransferRequest.read(
            "127.0.0.1:" + serverSocket.getLocalPort(), 3, 0, directBuffer(more, 10), 10));
        final FrameHeader read = readHeader();
        assertThat(read.opcode).as("the same connection carries the next read").isEqualTo(Opcode.READ);
        answerSingle(read);
        assertThat(next.get(10, TimeUnit.SECONDS)).isZero();
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldCloseTheLaneWhenAVectorAnswerDoesNotEchoSegmentAndOffsetZero(final TestEngines kind) throws Exception
    {
        start(kind);
        for (final long[] fields : new long[][]{{3, 0}, {0, 1000}})
        {
            final List<ByteBuffer> into = new ArrayList<>();
            final List<CompletableFuture<Integer>> reads = new ArrayList<>();
            final List<List<FrameHeader>> frames = submitUntilVector(20, 10, into, reads);
            final List<FrameHeader> vector = frames.stream().filter(f -> f.size() > 1).findFirst().orElseThrow();
            final int entries = vector.size() - 1;
            // A refusal whose addressing fields belong to some READ, not to this vector.
            answerHeader(vector.get(0).requestId, (int)fields[0], INVALID_PARAMS_VALUE, fields[1], 0);

            for (final CompletableFuture<Integer> read : reads)
            {
                assertThat(read.get(10, TimeUnit.SECONDS)).as("%d entries, fields %s", entries, Arrays.toString(fields))
                    .isEqualTo(TRANSFER_FAIL_VALUE); // the lane closed under all
            }
            assertThat(in.read()).as("the engine hung up").isEqualTo(-1);
            socket.close();
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldCloseTheLaneWhenAVectorRefusalCarriesALength(final TestEngines kind) throws Exception
    {
        start(kind);
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = new ArrayList<>();
        final List<FrameHeader> vector = submitUntilVector(20, 10, into, reads).stream().filter(f -> f.size() > 1)
            .findFirst().orElseThrow();
        answerHeader(vector.get(0).requestId, 0, INVALID_PARAMS_VALUE, 0, 64L * (vector.size() - 1));

        for (final CompletableFuture<Integer> read : reads)
        {
            assertThat(read.get(10, TimeUnit.SECONDS)).isEqualTo(TRANSFER_FAIL_VALUE);
        }
        assertThat(in.read()).as("the engine hung up").isEqualTo(-1);
    }

    private static ByteBuffer directBuffer(final List<ByteBuffer> into, final int length)
    {
        final ByteBuffer dst = ByteBuffer.allocateDirect(length);
        into.add(dst);
        return dst;
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldTimeOutAVectorAsOneFrame(final TestEngines kind) throws Exception
    {
        start(kind);
        final List<ByteBuffer> into = new ArrayList<>();
        final List<CompletableFuture<Integer>> reads = submitReads(5, 100, into);
        collect(5); // and never answer

        for (final CompletableFuture<Integer> read : reads)
        {
            assertThat(read.get(10, TimeUnit.SECONDS)).isEqualTo(RPC_TIMEOUT_VALUE);
        }
    }
}
