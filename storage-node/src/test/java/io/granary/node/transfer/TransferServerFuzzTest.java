package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.FuzzRun;
import io.granary.common.LeakWatch;
import io.granary.common.tls.TlsSettings;
import io.granary.node.Await;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.internal.PlatformDependent;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Throws random and mutated frames at a real transfer server over real sockets and checks every answer against a
 * model of the protocol: the exact response (or the close) each frame deserves, the segment's content (a shadow
 * copy), bytes outside every range a WRITE addressed unchanged, a second segment never addressed untouched, a valid
 * client served throughout, no leaked buffers and bounded direct memory at the end.
 */
class TransferServerFuzzTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private static final int CI_CASES = 3000;
    private static final int SEGMENT_BYTES = 1 << 20;
    /** WRITEs whose payload is cut short land only here (the server applies what arrived, at its own pace). */
    private static final int SCRATCH_START = 768 << 10;
    private static final int MAX_FRAME_BYTES = 64 << 10;
    private static final int CHECK_EVERY = 250;
    private static final int READ_TIMEOUT_MS = 10_000;

    private final FuzzRun run = new FuzzRun("transfer-server", CI_CASES);
    private final SplittableRandom random = new SplittableRandom(run.seed());
    private final byte[] shadow = new byte[SEGMENT_BYTES];
    /** Bytes whose content the model does not know (a cut-short WRITE); never compared. */
    private final boolean[] unknown = new boolean[SEGMENT_BYTES];
    /** Bytes inside a range some WRITE addressed in bounds; the others must keep their first pattern. */
    private final boolean[] addressed = new boolean[SEGMENT_BYTES];
    private byte[] initial;
    private byte[] canaryInitial;

    private SegmentRegistry registry;
    private Segment segment;
    private Segment canary;
    private TransferServer server;
    private Socket socket;
    private DataInputStream in;
    private OutputStream out;
    private long nextRequestId = 1;

    @Test
    void shouldSurviveRandomAndMutatedFramesWithoutWritingOutsideTheAddressedRanges() throws Exception
    {
        final int leaksBefore = LeakWatch.install();
        registry = new SegmentRegistry();
        segment = registry.allocate("fuzz/seg0", SEGMENT_BYTES);
        canary = registry.allocate("fuzz/canary", 256 << 10);
        initial = pattern(SEGMENT_BYTES, 1);
        canaryInitial = pattern((int)canary.sizeBytes(), 2);
        new UnsafeBuffer(segment.address(), SEGMENT_BYTES).putBytes(0, initial);
        new UnsafeBuffer(canary.address(), canaryInitial.length).putBytes(0, canaryInitial);
        System.arraycopy(initial, 0, shadow, 0, SEGMENT_BYTES);
        // Cut-short WRITEs of closed connections may still be applied there while later cases run.
        Arrays.fill(unknown, SCRATCH_START, SEGMENT_BYTES, true);
        server = new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 1, true, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED, serverTransport()).start();
        final NettyTransferEngine client = new NettyTransferEngine(new TransferConfig().lanesPerPeer(1));
        int ran = 0;
        try
        {
            checkValidClient(client, -1);
            final long directBefore = PlatformDependent.usedDirectMemory();
            for (int i = 0; i < run.cases(); i++)
            {
                fuzzCase(i);
                ran++;
                if (i % CHECK_EVERY == CHECK_EVERY - 1)
                {
                    checkValidClient(client, i);
                    checkMemory(i);
                }
            }
            closeSocket();
            checkValidClient(client, run.cases());
            checkMemory(run.cases());
            client.close();
            Await.until("every fuzz connection closed", () -> server.openConnections() == 0);
            assertThat(LeakWatch.collect()).as("ByteBuf leaks reported by Netty").isEqualTo(leaksBefore);
            final long directAfter = PlatformDependent.usedDirectMemory();
            assertThat(directAfter - directBefore).as("direct memory growth over the run (bytes)")
                .isLessThan(32L << 20);
            assertThat(server.protocolErrors()).isEqualTo(run.get("closed"));
        }
        finally
        {
            run.report(ran);
            closeSocket();
            client.close();
            server.close();
            registry.close();
        }
    }

    // ---------------------------------------------------------------------------------------------- cases

    private void fuzzCase(final int i) throws IOException
    {
        final int kind = random.nextInt(100);
        if (kind < 10)
        {
            garbage(i);
        }
        else if (kind < 50)
        {
            mutatedFrame(i);
        }
        else if (kind < 60)
        {
            truncatedHeader();
        }
        else if (kind < 68)
        {
            truncatedPayload();
        }
        else
        {
            validPipeline(i);
        }
    }

    /** Random bytes: unless they happen to form a valid header, the server hangs up without answering. */
    private void garbage(final int i) throws IOException
    {
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH + random.nextInt(300)];
        random.nextBytes(bytes);
        bytes[0] ^= 0x55; // keep the magic wrong: the model cannot follow a random header's payload
        connected().write(bytes);
        out.flush();
        expectClose(i);
    }

    /** A valid frame with one to three fields changed; the model says what the server must answer. */
    private void mutatedFrame(final int i) throws IOException
    {
        final Frame f = validFrame();
        final int mutations = 1 + random.nextInt(3);
        for (int m = 0; m < mutations; m++)
        {
            mutate(f);
        }
        final int closeReason = decodeOutcome(f);
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        bytes.write(f.encode());
        if (closeReason == 0 && isWrite(f))
        {
            bytes.write(payloadOf(f));
        }
        if (random.nextInt(10) == 0 && bytes.size() <= 1024)
        {
            sendByteByByte(bytes.toByteArray());
        }
        else
        {
            connected().write(bytes.toByteArray());
        }
        if (closeReason != 0)
        {
            out.flush();
            expectClose(i);
            return;
        }
        final int status = answer(f, bytes.toByteArray());
        expectResponse(i, f, status);
        ping(i);
    }

    /** Part of a header, then the connection closes: nothing to answer, nothing written. */
    private void truncatedHeader() throws IOException
    {
        final byte[] header = validFrame().encode();
        connected().write(header, 0, 1 + random.nextInt(FrameDescriptor.HEADER_LENGTH - 1));
        out.flush();
        closeSocket();
        run.count("truncated-header");
    }

    /** A WRITE into the scratch area whose payload stops short: the server keeps what came, within the range. */
    private void truncatedPayload() throws IOException
    {
        final int length = 1 + random.nextInt(MAX_FRAME_BYTES);
        final long offset = SCRATCH_START + random.nextInt(SEGMENT_BYTES - SCRATCH_START - length + 1);
        final Frame f = new Frame(Opcode.WRITE, nextRequestId++, segment.id(), offset, length);
        final byte[] payload = f.payload(random.nextInt(length), random);
        connected().write(f.encode());
        out.write(payload);
        out.flush();
        mark(offset, length, true);
        closeSocket();
        run.count("truncated-payload");
    }

    /** A few valid READ, WRITE and PING frames back to back, every answer checked in order. */
    private void validPipeline(final int i) throws IOException
    {
        final int frames = 1 + random.nextInt(6);
        final Frame[] sent = new Frame[frames];
        final int[] statuses = new int[frames];
        // What each READ must see is the model as of its place in the pipeline, except where a later WRITE of the
        // pipeline overlaps it: READs are sent straight from segment memory (zero copy), so bytes still queued for
        // the socket may already be the later WRITE's. Either value is right there (the master never lets a WRITE
        // target an extent being read).
        final byte[][] expectedShadow = new byte[frames][];
        final boolean[][] expectedUnknown = new boolean[frames][];
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int k = 0; k < frames; k++)
        {
            sent[k] = validFrame();
            final byte[] frame = sent[k].encode();
            bytes.write(frame);
            byte[] payload = null;
            if (isWrite(sent[k]))
            {
                payload = payloadOf(sent[k]);
                bytes.write(payload);
            }
            statuses[k] = answer(sent[k], payload == null ? frame : concat(frame, payload));
            if (sent[k].opcode == Opcode.READ && statuses[k] == 0)
            {
                final int from = (int)sent[k].offset;
                final int to = from + (int)sent[k].length;
                expectedShadow[k] = Arrays.copyOfRange(shadow, from, to);
                expectedUnknown[k] = Arrays.copyOfRange(unknown, from, to);
            }
        }
        for (int k = 0; k < frames; k++)
        {
            for (int later = k + 1; expectedShadow[k] != null && later < frames; later++)
            {
                if (isWrite(sent[later]) && statuses[later] == 0)
                {
                    final long from = Math.max(sent[k].offset, sent[later].offset);
                    final long to = Math.min(sent[k].offset + sent[k].length, sent[later].offset + sent[later].length);
                    for (long at = from; at < to; at++)
                    {
                        expectedUnknown[k][(int)(at - sent[k].offset)] = true;
                    }
                }
            }
        }
        connected().write(bytes.toByteArray());
        out.flush();
        for (int k = 0; k < frames; k++)
        {
            expectResponse(i, sent[k], statuses[k], expectedShadow[k], expectedUnknown[k]);
        }
        run.count("valid");
    }

    // ---------------------------------------------------------------------------------------------- frames

    /** A frame as the fuzzer builds it: header fields plus, for a WRITE, the payload it will send. */
    private static final class Frame
    {
        int magic = FrameDescriptor.MAGIC;
        int version = FrameDescriptor.VERSION;
        int opcode;
        int flags;
        long requestId;
        int segmentId;
        int status;
        long offset;
        long length;
        int reserved;
        long tokenExpiryMs;
        byte[] lastPayload;
        /** A WRITE_COMMIT's well-formed record (for the frame as built, before any mutation); else null. */
        byte[] record;

        Frame(final int opcode, final long requestId, final int segmentId, final long offset, final long length)
        {
            this.opcode = opcode;
            this.requestId = requestId;
            this.segmentId = segmentId;
            this.offset = offset;
            this.length = length;
        }

        byte[] encode()
        {
            final ByteBuf buf = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
            buf.writeInt(magic).writeByte(version).writeByte(opcode).writeShort(flags).writeLong(requestId)
                .writeInt(segmentId).writeInt(status).writeLong(offset).writeInt((int)length).writeInt(reserved)
                .writeLong(tokenExpiryMs).writeZero(FrameDescriptor.TOKEN_MAC_LENGTH);
            final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
            buf.readBytes(bytes);
            buf.release();
            return bytes;
        }

        byte[] payload(final int count, final SplittableRandom random)
        {
            final byte[] bytes = new byte[count];
            random.nextBytes(bytes);
            lastPayload = bytes;
            return bytes;
        }
    }

    private Frame validFrame()
    {
        final int op = random.nextInt(10);
        final int opcode = op < 4 ? Opcode.READ : op < 7 ? Opcode.WRITE : op < 8 ? Opcode.WRITE_COMMIT : Opcode.PING;
        final int length = opcode == Opcode.PING ? 0 : 1 + random.nextInt(random.nextInt(8) == 0 ? MAX_FRAME_BYTES : 512);
        final long offset = random.nextInt(SCRATCH_START - length + 1);
        final Frame f = new Frame(opcode, nextRequestId++, segment.id(), offset, length);
        if (opcode == Opcode.WRITE_COMMIT)
        {
            f.record = new CommitRecord(0, "fuzz", "k" + f.requestId, "", length, f.requestId, 0, 0).encode();
            f.flags = f.record.length;
        }
        return f;
    }

    private static boolean isWrite(final Frame f)
    {
        return f.opcode == Opcode.WRITE || f.opcode == Opcode.WRITE_COMMIT;
    }

    /**
     * The bytes after a WRITE's or WRITE_COMMIT's header: for a WRITE_COMMIT first {@code flags} bytes of record (its
     * well-formed record while {@code flags} still says its length, else bytes that are no record: format 0), then
     * {@code length} random bytes of value.
     */
    private byte[] payloadOf(final Frame f)
    {
        final byte[] value = f.payload((int)f.length, random);
        if (f.opcode != Opcode.WRITE_COMMIT)
        {
            return value;
        }
        final byte[] record = f.record != null && f.flags == f.record.length ? f.record : new byte[f.flags];
        if (record != f.record)
        {
            random.nextBytes(record);
            if (record.length > 0)
            {
                record[0] = 0;
            }
        }
        return concat(record, value);
    }

    private void mutate(final Frame f)
    {
        switch (random.nextInt(12))
        {
            case 0: f.magic ^= 1 << random.nextInt(32); break;
            case 1: f.version = random.nextInt(256); break;
            case 2: f.opcode = random.nextInt(4) == 0 ? randomOpcodeButReadv() :
                new int[]{Opcode.READ, Opcode.WRITE, Opcode.PING, Opcode.READ_RESPONSE, Opcode.WRITE_RESPONSE}
                    [random.nextInt(5)];
                break;
            case 3: f.flags = random.nextInt(1 << 16); break;
            case 4: f.status = random.nextBoolean() ? random.nextInt() : -600; break;
            case 5:
                f.segmentId = random.nextInt();
                if (f.segmentId == canary.id())
                {
                    f.segmentId++; // never address the canary segment
                }
                break;
            case 6: f.offset = mutatedOffset(f.length); break;
            case 7: f.length = mutatedLength(); break;
            case 8: f.reserved = random.nextInt(); break;
            case 9: f.tokenExpiryMs = random.nextLong(); break;
            case 10: f.requestId = random.nextLong(); break;
            default:
                f.offset = mutatedOffset(f.length);
                f.length = mutatedLength();
                break;
        }
    }

    /**
     * Any byte but COMMIT, RDMA_CONNECT, WRITE_COMMIT, LOCAL_CONNECT, READV and WRITEV, whose payloads or answers a
     * random opcode would not give (TransferServerTest covers malformed READVs, TransferServerWritevTest malformed
     * WRITEVs, TransferServerCommitTest malformed COMMITs, RdmaConnectTest malformed exchanges, LocalConnectTest
     * same-host exchanges; WRITE_COMMITs come from validFrame, mutated like the others).
     */
    private int randomOpcodeButReadv()
    {
        final int opcode = random.nextInt(250); // 256 values less the six skipped
        // COMMIT, RDMA_CONNECT, WRITE_COMMIT and LOCAL_CONNECT are adjacent (0x04 .. 0x07), READV and WRITEV too
        final int skipCommit = opcode >= Opcode.COMMIT ? opcode + 4 : opcode;
        return skipCommit >= Opcode.READV ? skipCommit + 2 : skipCommit;
    }

    private long mutatedOffset(final long length)
    {
        switch (random.nextInt(6))
        {
            case 0: return random.nextLong();
            case 1: return SEGMENT_BYTES;
            case 2: return SEGMENT_BYTES - random.nextInt((int)Math.min(length, MAX_FRAME_BYTES) + 1); // may straddle the end
            case 3: return Long.MAX_VALUE - random.nextInt(1000);
            case 4: return -1 - random.nextInt(1000); // above 2^63 as unsigned
            default: return random.nextInt(SEGMENT_BYTES);
        }
    }

    private long mutatedLength()
    {
        switch (random.nextInt(5))
        {
            case 0: return 0;
            case 1: return MAX_FRAME_BYTES + 1 + random.nextInt(1000);
            case 2: return 0xFFFFFFFFL;
            case 3: return MAX_FRAME_BYTES;
            default: return 1 + random.nextInt(4096);
        }
    }

    // ---------------------------------------------------------------------------------------------- model

    /** 0 when the header decodes as a request; else why the server must close the connection. */
    private static int decodeOutcome(final Frame f)
    {
        if (f.magic != FrameDescriptor.MAGIC)
        {
            return 1;
        }
        if (f.version != FrameDescriptor.VERSION)
        {
            return 2;
        }
        if (!Opcode.isRequest(f.opcode))
        {
            return 3;
        }
        return f.length > MAX_FRAME_BYTES ? 4 : 0;
    }

    /** The status the server must answer for a decodable request, applying a WRITE to the shadow. */
    private int answer(final Frame f, final byte[] sentBytes)
    {
        if (f.opcode == Opcode.PING)
        {
            return 0;
        }
        if (f.opcode == Opcode.WRITE_COMMIT)
        {
            run.count("write-commit");
        }
        if (f.opcode == Opcode.WRITE_COMMIT && (f.flags == 0 || f.flags > FrameDescriptor.MAX_COMMIT_PAYLOAD))
        {
            run.count("write-commit-no-record");
            return INVALID_PARAMS_VALUE; // no record: refused before any byte of the value moves
        }
        final boolean known = f.segmentId == segment.id();
        final boolean inBounds = known && f.length > 0 && f.offset >= 0 && f.offset <= SEGMENT_BYTES &&
            f.length <= SEGMENT_BYTES - f.offset;
        final int status = f.status != 0 ? INVALID_PARAMS_VALUE : !known ? SEGMENT_NOT_FOUND_VALUE :
            !inBounds ? INVALID_PARAMS_VALUE : 0;
        if (isWrite(f) && inBounds)
        {
            mark(f.offset, (int)f.length, false); // addressed, whatever the outcome
        }
        if (isWrite(f) && status == 0)
        {
            System.arraycopy(f.lastPayload, 0, shadow, (int)f.offset, (int)f.length);
            if (f.offset < SCRATCH_START)
            {
                Arrays.fill(unknown, (int)f.offset, (int)Math.min(f.offset + f.length, SCRATCH_START), false);
            }
        }
        if (f.opcode == Opcode.WRITE_COMMIT && status == 0)
        {
            // The bytes are in; then the record: well formed, and its extent [offset, offset + max(1, value length))
            // inside the segment (the value length is the frame's before any mutation of its length).
            if (f.record == null || f.flags != f.record.length)
            {
                run.count("write-commit-bad-record");
                return INVALID_PARAMS_VALUE;
            }
            final long valueLength = CommitRecord.decode(f.record, 0, f.record.length).valueLength();
            return f.offset + Math.max(1, valueLength) <= SEGMENT_BYTES ? 0 : INVALID_PARAMS_VALUE;
        }
        return status;
    }

    private void mark(final long offset, final int length, final boolean contentUnknown)
    {
        Arrays.fill(addressed, (int)offset, (int)offset + length, true);
        if (contentUnknown)
        {
            Arrays.fill(unknown, (int)offset, (int)offset + length, true);
        }
    }

    private void expectResponse(final int i, final Frame f, final int status) throws IOException
    {
        final boolean read = f.opcode == Opcode.READ && status == 0;
        final int from = (int)f.offset;
        final int to = read ? from + (int)f.length : from;
        expectResponse(i, f, status, read ? Arrays.copyOfRange(shadow, from, to) : null,
            read ? Arrays.copyOfRange(unknown, from, to) : null);
    }

    /** @param expected the model's bytes of a READ's range as of the READ (unknownThen: which it did not know). */
    private void expectResponse(
        final int i, final Frame f, final int status, final byte[] expected, final boolean[] unknownThen)
        throws IOException
    {
        final FrameHeader response = readHeader(i);
        assertThat(response.opcode).as(run.where(i)).isEqualTo(f.opcode | Opcode.RESPONSE_BIT);
        assertThat(response.requestId).as(run.where(i)).isEqualTo(f.requestId);
        assertThat(response.status).as(run.where(i) + " status of " + response).isEqualTo(status);
        assertThat(response.segmentId).as(run.where(i)).isEqualTo(f.segmentId);
        assertThat(response.offset).as(run.where(i)).isEqualTo(f.offset);
        assertThat(response.length).as(run.where(i)).isEqualTo(f.length);
        if (f.opcode == Opcode.READ && status == 0)
        {
            final byte[] payload = new byte[(int)f.length];
            in.readFully(payload);
            for (int b = 0; b < payload.length; b++)
            {
                if (!unknownThen[b] && payload[b] != expected[b])
                {
                    throw new AssertionError(run.where(i) + ": READ " + f.offset + "+" + f.length + " byte " +
                        (f.offset + b) + " is " + payload[b] + ", the model says " + expected[b]);
                }
            }
        }
        run.count(status == 0 ? "answered-ok" : "answered-" + status);
    }

    private void ping(final int i) throws IOException
    {
        final Frame ping = new Frame(Opcode.PING, nextRequestId++, 0, 0, 0);
        out.write(ping.encode());
        out.flush();
        expectResponse(i, ping, 0);
    }

    private void expectClose(final int i) throws IOException
    {
        try
        {
            final int b = in.read();
            assertThat(b).as(run.where(i) + ": the server must hang up without answering").isEqualTo(-1);
        }
        catch (final SocketTimeoutException ex)
        {
            throw new AssertionError(run.where(i) + ": the server neither answered nor closed", ex);
        }
        catch (final IOException ex)
        {
            // reset: closed as well
        }
        closeSocket();
        run.count("closed");
    }

    // ---------------------------------------------------------------------------------------------- checks

    private void checkValidClient(final NettyTransferEngine client, final int i) throws Exception
    {
        final int length = 1 + random.nextInt(8192);
        final long offset = random.nextInt(SCRATCH_START - length + 1);
        final byte[] content = new byte[length];
        random.nextBytes(content);
        assertThat(client.submit(TransferRequest.write("127.0.0.1:" + server.port(), segment.id(), offset,
            ByteBuffer.wrap(content), length)).get(30, TimeUnit.SECONDS)).as(run.where(i) + " valid write").isZero();
        System.arraycopy(content, 0, shadow, (int)offset, length);
        Arrays.fill(unknown, (int)offset, (int)offset + length, false);
        mark(offset, length, false);
        final ByteBuffer back = ByteBuffer.allocate(length);
        assertThat(client.submit(TransferRequest.read("127.0.0.1:" + server.port(), segment.id(), offset, back, length))
            .get(30, TimeUnit.SECONDS)).as(run.where(i) + " valid read").isZero();
        assertThat(back.array()).as(run.where(i) + " valid read back").isEqualTo(content);
    }

    /** Segment bytes equal the model where it knows them; unaddressed bytes and the canary segment never change. */
    private void checkMemory(final int i)
    {
        final byte[] now = new byte[SEGMENT_BYTES];
        new UnsafeBuffer(segment.address(), SEGMENT_BYTES).getBytes(0, now);
        for (int b = 0; b < SEGMENT_BYTES; b++)
        {
            if (!addressed[b] && now[b] != initial[b])
            {
                throw new AssertionError(run.where(i) + ": byte " + b + " changed but no WRITE addressed it");
            }
            if (!unknown[b] && now[b] != shadow[b])
            {
                throw new AssertionError(run.where(i) + ": byte " + b + " is " + now[b] + ", the model says " +
                    shadow[b]);
            }
        }
        final byte[] canaryNow = new byte[canaryInitial.length];
        new UnsafeBuffer(canary.address(), canaryNow.length).getBytes(0, canaryNow);
        assertThat(canaryNow).as(run.where(i) + ": the canary segment").isEqualTo(canaryInitial);
    }

    // ---------------------------------------------------------------------------------------------- sockets

    private OutputStream connected() throws IOException
    {
        if (socket == null)
        {
            socket = new Socket(InetAddress.getLoopbackAddress(), server.port());
            socket.setTcpNoDelay(true);
            socket.setSoTimeout(READ_TIMEOUT_MS);
            in = new DataInputStream(socket.getInputStream());
            out = socket.getOutputStream();
        }
        return out;
    }

    private void sendByteByByte(final byte[] bytes) throws IOException
    {
        connected();
        for (final byte b : bytes)
        {
            out.write(b);
            out.flush();
        }
    }

    private FrameHeader readHeader(final int i) throws IOException
    {
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
        try
        {
            in.readFully(bytes);
        }
        catch (final IOException ex)
        {
            throw new AssertionError(run.where(i) + ": expected a response, got " + ex, ex);
        }
        final ByteBuf buf = Unpooled.wrappedBuffer(bytes);
        final FrameHeader header = new FrameHeader();
        assertThat(header.decode(buf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT)).as(run.where(i)).isZero();
        return header;
    }

    private void closeSocket()
    {
        if (socket != null)
        {
            try
            {
                socket.close();
            }
            catch (final IOException ignored)
            {
                // dropping it anyway
            }
            socket = null;
        }
    }

    private static byte[] concat(final byte[] a, final byte[] b)
    {
        final byte[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    private static byte[] pattern(final int length, final int salt)
    {
        final byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++)
        {
            bytes[i] = (byte)((i * 31 + salt * 7) ^ (i >>> 8));
        }
        return bytes;
    }
}
