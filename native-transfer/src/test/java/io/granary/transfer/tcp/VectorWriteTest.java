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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntUnaryOperator;
import java.util.function.Predicate;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every client engine's WRITEV path against a scripted node on a blocking socket (docs/protocol.md, "WRITEV"): small
 * writes with their records queued together leave as one WRITEV (table of WRITE_COMMIT headers and records, then the
 * values), up to maxVectorEntries per vector; each write gets its own status; a refusal of the whole vector fails
 * them all and keeps the connection; an answer that cannot belong to the vector fails them with TRANSFER_FAIL and
 * closes the connection.
 */
class VectorWriteTest
{
    private static final int SEGMENT = 3;
    private static final long EXPIRY = 4_000_000_000L;
    private static final int WAIT_SECONDS = 10;

    /** One value of a vector (or of a WRITE_COMMIT alone) as the node received it. */
    private record Entry(FrameHeader header, byte[] record, byte[] value)
    {
    }

    /** One frame as the node received it: its header and its entries (one for a WRITE_COMMIT: its own header). */
    private record WireFrame(FrameHeader header, List<Entry> entries)
    {
        boolean isVector()
        {
            return header.opcode == Opcode.WRITEV;
        }
    }

    private ServerSocket serverSocket;
    private Socket socket;
    private DataInputStream in;
    private TransferEngine engine;
    /** The write whose value is too big for a vector (-1: none). */
    private int bigIndex = -1;

    @BeforeEach
    void listen() throws IOException
    {
        serverSocket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    }

    private void start(final TestEngines kind, final int maxVectorEntries, final long timeoutMs)
    {
        engine = kind.create(new TransferConfig().lanesPerPeer(1).transferTimeoutMs(timeoutMs)
            .maxVectorEntries(maxVectorEntries));
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

    private static long offsetOf(final int i)
    {
        return 100_000L * i + 16;
    }

    private static int indexOf(final FrameHeader entry)
    {
        return (int)((entry.offset - 16) / 100_000L);
    }

    private int lengthOf(final int i)
    {
        return i == bigIndex ? VectorRead.MAX_ENTRY_BYTES + 1 : 100 + 37 * i;
    }

    private byte[] valueOf(final int i)
    {
        final byte[] value = new byte[lengthOf(i)];
        for (int b = 0; b < value.length; b++)
        {
            value[b] = (byte)(i * 31 + b);
        }
        return value;
    }

    private static byte[] recordOf(final int i)
    {
        final byte[] record = new byte[5 + i % 7];
        for (int b = 0; b < record.length; b++)
        {
            record[b] = (byte)(i * 3 + b + 1);
        }
        return record;
    }

    private static byte[] tokenOf(final int i)
    {
        final byte[] token = new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH];
        ByteBuffer.wrap(token).putInt((int)EXPIRY);
        for (int b = 4; b < token.length; b++)
        {
            token[b] = (byte)(i + b);
        }
        return token;
    }

    /**
     * Submits {@code n} writes with their records, each of its own length, record and token (granted 16 bytes on
     * either side), from direct and heap buffers (every value sits behind 7 bytes of its buffer); under a driving
     * thread all from one task, so that they leave together.
     */
    private List<CompletableFuture<Integer>> submitWrites(final int n)
    {
        final String endpoint = "127.0.0.1:" + serverSocket.getLocalPort();
        final List<TransferRequest> requests = new ArrayList<>();
        for (int i = 0; i < n; i++)
        {
            final byte[] value = valueOf(i);
            final ByteBuffer from = i % 2 == 0 ? ByteBuffer.allocateDirect(value.length + 7) :
                ByteBuffer.allocate(value.length + 7);
            from.position(7);
            from.duplicate().put(value);
            requests.add(new TransferRequest(TransferRequest.Op.WRITE, endpoint, SEGMENT, offsetOf(i), from,
                value.length, tokenOf(i), offsetOf(i) - 16, value.length + 32L, recordOf(i)));
        }
        if (engine instanceof TestEngines.DrivingThread driving)
        {
            return driving.submitAll(requests);
        }
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (final TransferRequest request : requests)
        {
            futures.add(engine.submit(request));
        }
        return futures;
    }

    /**
     * Submits {@code n} writes until the node receives them in frames of {@code shape}: an engine whose thread takes
     * each submit at once (Netty's event loop, the native engine's thread) may send a burst in other frames, which
     * are then answered OK and the burst is submitted again on the same connection.
     */
    private List<WireFrame> submitUntil(final int n, final Predicate<List<WireFrame>> shape,
        final List<CompletableFuture<Integer>> writes) throws Exception
    {
        for (int attempt = 0; attempt < 50; attempt++)
        {
            writes.clear();
            writes.addAll(submitWrites(n));
            final List<WireFrame> frames = collect(n);
            if (shape.test(frames))
            {
                return frames;
            }
            for (final WireFrame frame : frames)
            {
                answer(frame, i -> 0);
            }
            for (final CompletableFuture<Integer> write : writes)
            {
                assertThat(write.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
            }
        }
        throw new AssertionError("no burst of " + n + " writes arrived in the expected frames in 50 attempts");
    }

    /** All {@code n} writes in one WRITEV. */
    private List<WireFrame> submitAsOneVector(final int n, final List<CompletableFuture<Integer>> writes)
        throws Exception
    {
        return submitUntil(n, frames -> frames.size() == 1 && frames.get(0).entries().size() == n, writes);
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

    private byte[] readBytes(final long length) throws IOException
    {
        final byte[] bytes = new byte[(int)length];
        in.readFully(bytes);
        return bytes;
    }

    /** Accepts the connection if need be and reads frames until {@code writes} values arrived, alone or in vectors. */
    private List<WireFrame> collect(final int writes) throws IOException
    {
        if (socket == null || socket.isClosed())
        {
            socket = serverSocket.accept();
            socket.setSoTimeout(WAIT_SECONDS * 1000); // a read fails the test rather than hanging it
            in = new DataInputStream(socket.getInputStream());
        }
        final List<WireFrame> frames = new ArrayList<>();
        int seen = 0;
        while (seen < writes)
        {
            final FrameHeader header = readHeader();
            final List<Entry> entries = new ArrayList<>();
            if (header.opcode == Opcode.WRITEV)
            {
                final List<FrameHeader> headers = new ArrayList<>();
                for (int i = 0; i < header.flags; i++)
                {
                    headers.add(readHeader());
                }
                final List<byte[]> records = new ArrayList<>();
                for (final FrameHeader entry : headers)
                {
                    records.add(readBytes(entry.flags));
                }
                for (int i = 0; i < headers.size(); i++)
                {
                    entries.add(new Entry(headers.get(i), records.get(i), readBytes(headers.get(i).length)));
                }
            }
            else
            {
                assertThat(header.opcode).isEqualTo(Opcode.WRITE_COMMIT);
                final byte[] record = readBytes(header.flags);
                entries.add(new Entry(header, record, readBytes(header.length)));
            }
            seen += entries.size();
            frames.add(new WireFrame(header, entries));
        }
        return frames;
    }

    /** Answers a frame: a WRITEV with a status per entry from {@code statusOf(write index)}, a WRITE_COMMIT alone. */
    private void answer(final WireFrame frame, final IntUnaryOperator statusOf) throws IOException
    {
        final ByteBuf out = Unpooled.buffer();
        if (frame.isVector())
        {
            final int n = frame.entries().size();
            FrameHeader.encode(out, Opcode.WRITEV_RESPONSE, 0, frame.header().requestId, 0, 0, 0,
                (long)n * FrameDescriptor.VECTOR_STATUS_LENGTH, 0, null);
            for (final Entry entry : frame.entries())
            {
                out.writeInt(statusOf.applyAsInt(indexOf(entry.header())));
            }
        }
        else
        {
            final FrameHeader h = frame.header();
            FrameHeader.encode(out, Opcode.WRITE_COMMIT_RESPONSE, 0, h.requestId, h.segmentId,
                statusOf.applyAsInt(indexOf(h)), h.offset, h.length, 0, null);
        }
        write(out);
    }

    /** A WRITEV_RESPONSE header with the given fields, then {@code statuses}. */
    private void answerVector(final long requestId, final int segmentId, final int status, final long offset,
        final long length, final int[] statuses) throws IOException
    {
        final ByteBuf out = Unpooled.buffer();
        FrameHeader.encode(out, Opcode.WRITEV_RESPONSE, 0, requestId, segmentId, status, offset, length, 0, null);
        for (final int s : statuses)
        {
            out.writeInt(s);
        }
        write(out);
    }

    private void write(final ByteBuf out) throws IOException
    {
        socket.getOutputStream().write(out.array(), out.arrayOffset(), out.readableBytes());
        socket.getOutputStream().flush();
        out.release();
    }

    /** Every entry of {@code frame} is write {@code i}'s WRITE_COMMIT as it would have gone alone, with its bytes. */
    private void assertEntries(final WireFrame frame, final int from)
    {
        final List<Entry> entries = frame.entries();
        for (int e = 0; e < entries.size(); e++)
        {
            final int i = from + e;
            final FrameHeader h = entries.get(e).header();
            assertThat(h.opcode).as("entry %d", e).isEqualTo(Opcode.WRITE_COMMIT);
            if (frame.isVector())
            {
                assertThat(h.requestId).as("request id of entry %d: its index", e).isEqualTo(e);
            }
            assertThat(h.segmentId).isEqualTo(SEGMENT);
            assertThat(h.status).isZero();
            assertThat(h.offset).as("entry %d in submit order", e).isEqualTo(offsetOf(i));
            assertThat(h.length).isEqualTo(lengthOf(i));
            assertThat(h.flags).as("record length of entry %d", e).isEqualTo(recordOf(i).length);
            assertThat(h.grantDelta).isEqualTo(16);
            assertThat(h.grantLength).isEqualTo(lengthOf(i) + 32L);
            assertThat(h.tokenExpirySec).isEqualTo(EXPIRY);
            assertThat(h.tokenMac).isEqualTo(java.util.Arrays.copyOfRange(tokenOf(i), 4, 20));
            assertThat(entries.get(e).record()).as("record of entry %d", e).isEqualTo(recordOf(i));
            assertThat(entries.get(e).value()).as("value of entry %d", e).isEqualTo(valueOf(i));
        }
    }

    private static int status(final int i)
    {
        return i % 3 == 0 ? SEGMENT_NOT_FOUND_VALUE : i % 5 == 1 ? ACCESS_DENIED_VALUE : 0;
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldSendQueuedSmallWritesAsOneWritevAndHandEachWriteItsOwnStatus(final TestEngines kind) throws Exception
    {
        start(kind, 256, 5_000);
        final int n = 20;
        final List<CompletableFuture<Integer>> writes = new ArrayList<>();
        final WireFrame vector = submitAsOneVector(n, writes).get(0);

        final FrameHeader h = vector.header();
        long table = (long)n * FrameDescriptor.HEADER_LENGTH;
        long values = 0;
        for (int i = 0; i < n; i++)
        {
            table += recordOf(i).length;
            values += lengthOf(i);
        }
        assertThat(h.opcode).isEqualTo(Opcode.WRITEV);
        assertThat(h.flags).as("entries").isEqualTo(n);
        assertThat(h.offset).as("table length").isEqualTo(table);
        assertThat(h.length).as("table and values").isEqualTo(table + values);
        assertThat(h.segmentId).isZero();
        assertThat(h.status).isZero();
        assertThat(h.grantDelta).isZero();
        assertThat(h.grantLength).isZero();
        assertThat(h.tokenExpirySec).isZero();
        assertThat(h.tokenMac).containsOnly(0);
        assertEntries(vector, 0);

        answer(vector, VectorWriteTest::status);
        for (int i = 0; i < n; i++)
        {
            assertThat(writes.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS)).as("write %d", i).isEqualTo(status(i));
        }
    }

    /**
     * A frame that cannot join a vector (a value above 64 KiB) leaves behind the small writes queued before it and
     * ahead of those queued after it: the wire keeps the order of the queue.
     */
    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldKeepTheQueueOrderAroundAWriteTooBigForAVector(final TestEngines kind) throws Exception
    {
        start(kind, 256, 5_000);
        bigIndex = 5;
        for (int attempt = 0; attempt < 50; attempt++)
        {
            final List<CompletableFuture<Integer>> writes = submitWrites(11);
            final List<WireFrame> frames = collect(11);
            int from = 0;
            for (final WireFrame frame : frames)
            {
                assertEntries(frame, from); // in submit order, whichever frames they came in
                from += frame.entries().size();
                answer(frame, i -> 0);
            }
            for (final CompletableFuture<Integer> write : writes)
            {
                assertThat(write.get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
            }
            if (frames.size() == 3)
            {
                assertThat(frames).extracting(f -> f.header().opcode)
                    .containsExactly(Opcode.WRITEV, Opcode.WRITE_COMMIT, Opcode.WRITEV);
                assertThat(frames).extracting(f -> f.entries().size()).containsExactly(5, 1, 5);
                return;
            }
        }
        throw new AssertionError("no burst of 11 writes arrived in 3 frames in 50 attempts");
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldSplitVectorsAtMaxVectorEntries(final TestEngines kind) throws Exception
    {
        start(kind, 8, 5_000);
        final List<CompletableFuture<Integer>> writes = new ArrayList<>();
        // a burst the engine flushed in two parts splits elsewhere (e.g. 5, 8, 7): send it again
        final List<WireFrame> frames = submitUntil(20, f -> f.size() == 3 && f.get(0).entries().size() == 8 &&
            f.get(1).entries().size() == 8, writes);

        assertThat(frames).extracting(f -> f.header().opcode).containsOnly(Opcode.WRITEV);
        assertThat(frames).extracting(f -> f.entries().size()).containsExactly(8, 8, 4);
        int from = 0;
        for (final WireFrame frame : frames)
        {
            assertThat(frame.header().flags).isEqualTo(frame.entries().size());
            assertEntries(frame, from);
            from += frame.entries().size();
            answer(frame, VectorWriteTest::status);
        }
        for (int i = 0; i < writes.size(); i++)
        {
            assertThat(writes.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS)).as("write %d", i).isEqualTo(status(i));
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldSendWriteCommitsWhenVectorsAreOff(final TestEngines kind) throws Exception
    {
        start(kind, 1, 5_000);
        final List<CompletableFuture<Integer>> writes = submitWrites(20);
        final List<WireFrame> frames = collect(20);

        assertThat(frames).hasSize(20).extracting(f -> f.header().opcode).containsOnly(Opcode.WRITE_COMMIT);
        for (int i = 0; i < frames.size(); i++)
        {
            assertEntries(frames.get(i), i);
            answer(frames.get(i), VectorWriteTest::status);
        }
        for (int i = 0; i < writes.size(); i++)
        {
            assertThat(writes.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS)).as("write %d", i).isEqualTo(status(i));
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldHandEveryWriteOfAVectorRefusedWholeTheRefusalAndKeepTheConnection(final TestEngines kind)
        throws Exception
    {
        start(kind, 256, 5_000);
        final List<CompletableFuture<Integer>> writes = new ArrayList<>();
        final WireFrame vector = submitAsOneVector(20, writes).get(0);
        answerVector(vector.header().requestId, 0, INVALID_PARAMS_VALUE, 0, 0, new int[0]);

        for (int i = 0; i < writes.size(); i++)
        {
            assertThat(writes.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS)).as("write %d", i)
                .isEqualTo(INVALID_PARAMS_VALUE);
        }
        final List<CompletableFuture<Integer>> next = submitWrites(1);
        final List<WireFrame> frames = collect(1);
        assertThat(frames).as("the same connection carries the next write").singleElement()
            .extracting(f -> f.header().opcode).isEqualTo(Opcode.WRITE_COMMIT);
        answer(frames.get(0), i -> 0);
        assertThat(next.get(0).get(WAIT_SECONDS, TimeUnit.SECONDS)).isZero();
    }

    /**
     * Answers that cannot belong to a WRITEV of {@code n} entries: each fails every write of the vector with
     * TRANSFER_FAIL and closes the connection.
     */
    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldFailEveryWriteAndCloseTheConnectionOnAMismatchedAnswer(final TestEngines kind) throws Exception
    {
        start(kind, 256, 5_000);
        final int n = 20;
        final String[] cases = {"one status short", "no statuses", "positive entry status", "unknown entry status",
            "refusal with statuses", "nonzero segment", "nonzero offset", "positive header status"};
        for (final String mismatch : cases)
        {
            final List<CompletableFuture<Integer>> writes = new ArrayList<>();
            final long id = submitAsOneVector(n, writes).get(0).header().requestId;
            final int[] statuses = new int[n];
            switch (mismatch)
            {
                case "one status short" -> answerVector(id, 0, 0, 0, 4L * n - 4, new int[n - 1]);
                case "no statuses" -> answerVector(id, 0, 0, 0, 0, new int[0]);
                case "positive entry status" ->
                {
                    statuses[7] = 7;
                    answerVector(id, 0, 0, 0, 4L * n, statuses);
                }
                case "unknown entry status" ->
                {
                    statuses[n - 1] = -12_345;
                    answerVector(id, 0, 0, 0, 4L * n, statuses);
                }
                case "refusal with statuses" -> answerVector(id, 0, INVALID_PARAMS_VALUE, 0, 4L * n, statuses);
                case "nonzero segment" -> answerVector(id, SEGMENT, 0, 0, 4L * n, statuses);
                case "nonzero offset" -> answerVector(id, 0, INVALID_PARAMS_VALUE, offsetOf(0), 0, new int[0]);
                default -> answerVector(id, 0, 5, 0, 0, new int[0]);
            }

            for (int i = 0; i < n; i++)
            {
                assertThat(writes.get(i).get(WAIT_SECONDS, TimeUnit.SECONDS)).as("%s: write %d", mismatch, i)
                    .isEqualTo(TRANSFER_FAIL_VALUE);
            }
            assertThat(in.read()).as("%s: the engine hung up", mismatch).isEqualTo(-1);
            socket.close();
        }
    }

    @ParameterizedTest
    @EnumSource(TestEngines.class)
    void shouldTimeOutAVectorAsOneFrame(final TestEngines kind) throws Exception
    {
        start(kind, 256, 1_000);
        final List<CompletableFuture<Integer>> writes = submitWrites(5);
        collect(5); // and never answer

        for (final CompletableFuture<Integer> write : writes)
        {
            assertThat(write.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo(RPC_TIMEOUT_VALUE);
        }
    }
}
