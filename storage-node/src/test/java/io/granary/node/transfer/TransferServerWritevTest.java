package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.LeakWatch;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.LedgerBudget;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentLedger;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransportKind;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Consumer;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * WRITEV frames (docs/protocol.md, "WRITEV": many small values and their COMMITs in one frame) through the real
 * transfer server, built byte by byte on a plain socket: one answer with a status per entry, the values in segment
 * memory, the records in the ledger; refusals of single entries and of whole vectors, the connection in step after
 * each.
 */
class TransferServerWritevTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private static final long SEGMENT_BYTES = 4L << 20;
    /** Above {@link FrameDescriptor#MAX_WRITEV_TABLE}, so that a table over that limit reaches the WRITEV checks. */
    private static final int MAX_FRAME_BYTES = 2 << 20;

    private final Random random = new Random(7);
    private SegmentRegistry registry;
    private Segment segment;
    private TransferServer server;
    private int leaksBefore;

    @BeforeEach
    void start()
    {
        leaksBefore = LeakWatch.install();
        registry = new SegmentRegistry();
        segment = registry.allocate("test/seg0", SEGMENT_BYTES);
        // The C allocator's memory is not zeroed: untouched bytes must read 0 for the tests to tell them apart.
        new UnsafeBuffer(segment.address(), (int)SEGMENT_BYTES).setMemory(0, (int)SEGMENT_BYTES, (byte)0);
        server = startServer(registry, new AccessTokenVerifier(Clock.SYSTEM));
    }

    private TransferServer startServer(final SegmentRegistry segments, final AccessTokenVerifier verifier)
    {
        return new TransferServer("127.0.0.1", 0, segments, MAX_FRAME_BYTES, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, serverTransport()).start();
    }

    @AfterEach
    void stop()
    {
        server.close();
        registry.close();
        assertThat(LeakWatch.collect()).as("ByteBuf leaks reported by Netty").isEqualTo(leaksBefore);
    }

    // ------------------------------------------------------------------------------------------------ frames

    /** One entry of a WRITEV: its WRITE_COMMIT header (flags = the record's length), its record and its value. */
    private record Entry(FrameHeader header, byte[] record, byte[] value)
    {
    }

    private static CommitRecord record(final String key, final long length, final long version)
    {
        return new CommitRecord(CommitRecord.FLAG_HARD_PIN, "tenant-a", key, "grp", length, version, 0, 0);
    }

    private byte[] randomValue(final int length)
    {
        final byte[] value = new byte[length];
        random.nextBytes(value);
        value[0] = (byte)(value[0] | 1); // never all zeros: a written value is told from untouched memory
        return value;
    }

    /** A well-formed entry writing {@code value} at {@code offset} and committing it as {@code key}. */
    private static Entry entry(
        final int segmentId, final long offset, final byte[] value, final String key, final long version)
    {
        return entry(segmentId, offset, value, record(key, value.length, version).encode());
    }

    private static Entry entry(final int segmentId, final long offset, final byte[] value, final byte[] record)
    {
        final FrameHeader header = new FrameHeader().set(Opcode.WRITE_COMMIT, 0, segmentId, offset, value.length);
        header.flags = record.length;
        return new Entry(header, record, value);
    }

    /** The WRITEV header that describes {@code entries} truthfully. */
    private static FrameHeader vectorHeader(final long requestId, final List<Entry> entries)
    {
        long table = (long)entries.size() * FrameDescriptor.HEADER_LENGTH;
        long values = 0;
        for (final Entry e : entries)
        {
            table += e.record().length;
            values += e.value().length;
        }
        final FrameHeader header = new FrameHeader().set(Opcode.WRITEV, requestId, 0, table, table + values);
        header.flags = entries.size();
        return header;
    }

    /** The frame on the wire: {@code vector}, the entries' headers (request id = index), records, values. */
    private static byte[] frame(final FrameHeader vector, final List<Entry> entries) throws IOException
    {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(RawClient.header(vector));
        for (int i = 0; i < entries.size(); i++)
        {
            entries.get(i).header().requestId = i;
            out.write(RawClient.header(entries.get(i).header()));
        }
        for (final Entry e : entries)
        {
            out.write(e.record());
        }
        for (final Entry e : entries)
        {
            out.write(e.value());
        }
        return out.toByteArray();
    }

    private static byte[] writev(final long requestId, final List<Entry> entries) throws IOException
    {
        return frame(vectorHeader(requestId, entries), entries);
    }

    /** A WRITEV of {@code entries} whose header {@code tamper} changes after it was computed. */
    private static byte[] writev(final long requestId, final List<Entry> entries, final Consumer<FrameHeader> tamper)
        throws IOException
    {
        final FrameHeader header = vectorHeader(requestId, entries);
        tamper.accept(header);
        return frame(header, entries);
    }

    /** Reads a WRITEV answer that is not a whole-vector refusal; returns its statuses. */
    private static int[] readStatuses(final RawClient client, final long requestId, final int entries)
        throws IOException
    {
        final FrameHeader answer = client.readHeader();
        assertThat(answer.opcode).isEqualTo(Opcode.WRITEV_RESPONSE);
        assertThat(answer.requestId).isEqualTo(requestId);
        assertThat(answer.status).isZero();
        assertThat(answer.segmentId).isZero();
        assertThat(answer.offset).isZero();
        assertThat(answer.length).isEqualTo(4L * entries);
        final DataInputStream statuses = new DataInputStream(
            new ByteArrayInputStream(client.readPayload(4 * entries)));
        final int[] result = new int[entries];
        for (int i = 0; i < entries; i++)
        {
            result[i] = statuses.readInt();
        }
        return result;
    }

    /** Reads a header-only INVALID_PARAMS answer to the whole WRITEV {@code requestId}. */
    private static void readRefusal(final RawClient client, final long requestId, final String why) throws IOException
    {
        final FrameHeader answer = client.readHeader();
        assertThat(answer.opcode).as(why).isEqualTo(Opcode.WRITEV_RESPONSE);
        assertThat(answer.requestId).as(why).isEqualTo(requestId);
        assertThat(answer.status).as(why).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(answer.segmentId).as(why).isZero();
        assertThat(answer.offset).as(why).isZero();
        assertThat(answer.length).as(why).isZero();
    }

    /** A PING answered next: the connection is open and in step (nothing left of the frames before it). */
    private static void assertPingAnswered(final RawClient client, final long requestId) throws IOException
    {
        client.send(RawClient.header(Opcode.PING, requestId, 0, 0, 0));
        final FrameHeader pong = client.readHeader();
        assertThat(pong.opcode).isEqualTo(Opcode.PING_RESPONSE);
        assertThat(pong.requestId).isEqualTo(requestId);
    }

    private byte[] segmentBytes(final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new UnsafeBuffer(segment.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    private int unknownSegmentId()
    {
        int id = segment.id() ^ 0x5A5A_5A5A;
        while (registry.get(id) != null)
        {
            id++;
        }
        return id;
    }

    // ------------------------------------------------------------------------------------------------ tests

    @Test
    void shouldWriteAndRecordEveryEntryWithOneAnswer() throws Exception
    {
        // Adjacent, then far apart; the last big enough for the Java server to receive it straight into memory.
        final byte[] a = randomValue(1000);
        final byte[] b = randomValue(3000);
        final byte[] c = randomValue(40_000);
        final List<Entry> entries = List.of(
            entry(segment.id(), 0, a, "a", 11),
            entry(segment.id(), 1000, b, "b", 12),
            entry(segment.id(), 65_536, c, "c", 13));
        final byte[] d = randomValue(77);
        final byte[] e = randomValue(5);
        final List<Entry> more = List.of(
            entry(segment.id(), 200_000, d, "d", 14),
            entry(segment.id(), 300_000, e, "e", 15));
        final long requestsBefore = server.requests();
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(41, entries));
            assertThat(readStatuses(client, 41, 3)).containsExactly(0, 0, 0);

            // The same again split into one-byte reads on the server, a PING right behind it.
            client.sendByteByByte(writev(42, more));
            assertThat(readStatuses(client, 42, 2)).containsExactly(0, 0);
            assertPingAnswered(client, 43);
        }
        assertThat(segmentBytes(0, a.length)).isEqualTo(a);
        assertThat(segmentBytes(1000, b.length)).isEqualTo(b);
        assertThat(segmentBytes(65_536, c.length)).isEqualTo(c);
        assertThat(segmentBytes(200_000, d.length)).isEqualTo(d);
        assertThat(segmentBytes(300_000, e.length)).isEqualTo(e);
        assertThat(segmentBytes(4000, 100)).as("between two values").containsOnly(0);
        assertThat(segment.ledger().snapshot()).satisfiesExactly(
            x -> assertEntry(x, 0, "a", a.length, 11),
            x -> assertEntry(x, 1000, "b", b.length, 12),
            x -> assertEntry(x, 65_536, "c", c.length, 13),
            x -> assertEntry(x, 200_000, "d", d.length, 14),
            x -> assertEntry(x, 300_000, "e", e.length, 15));
        if (serverTransport() == TransportKind.JAVA)
        {
            assertThat(server.requests() - requestsBefore).as("every entry and the PING").isEqualTo(6);
        }
    }

    /**
     * Randomly damaged WRITEVs (1 to 3 bytes changed in the header's flags, segment, status or table offset, or
     * anywhere in the table; the frame's length kept, so the stream stays framed): every one is answered, either refused
     * whole with INVALID_PARAMS or with a status per entry its header announces; every entry answered 0 has the bytes
     * the damaged frame carried for it at the offset its damaged header names, and a ledger entry there; a PING after
     * each is answered.
     */
    @Test
    void shouldAnswerEveryDamagedVectorAndStayInStep() throws Exception
    {
        final Random damage = new Random(20261207);
        int refused = 0;
        int accepted = 0;
        try (RawClient client = new RawClient(server.port()))
        {
            for (int round = 0; round < 300; round++)
            {
                final int n = 1 + damage.nextInt(6);
                final List<Entry> entries = new ArrayList<>();
                for (int i = 0; i < n; i++)
                {
                    final long slot = damage.nextInt((int)(SEGMENT_BYTES / 8192));
                    entries.add(entry(segment.id(), slot * 8192, randomValue(1 + damage.nextInt(4000)),
                        "f" + round + "-" + i, round * 10L + i + 1));
                }
                final byte[] frame = writev(1000 + round, entries);
                final FrameHeader truth = vectorHeader(1000 + round, entries);
                for (int k = 1 + damage.nextInt(3); k > 0; k--)
                {
                    final int where = damage.nextInt(4);
                    final int at = where == 0 ? 6 + damage.nextInt(2) // flags: the entry count
                        : where == 1 ? 16 + damage.nextInt(8) // segment id, status
                        : where == 2 ? 24 + damage.nextInt(8) // offset: the table's length
                        : FrameDescriptor.HEADER_LENGTH + damage.nextInt((int)truth.offset); // the table
                    frame[at] ^= (byte)(1 + damage.nextInt(255));
                }
                client.send(frame);
                final FrameHeader sent = new FrameHeader();
                sent.decode(io.netty.buffer.Unpooled.wrappedBuffer(frame), MAX_FRAME_BYTES);
                final FrameHeader answer = client.readHeader();
                assertThat(answer.opcode).isEqualTo(Opcode.WRITEV_RESPONSE);
                assertThat(answer.requestId).isEqualTo(1000L + round);
                if (answer.status != 0)
                {
                    assertThat(answer.status).isEqualTo(INVALID_PARAMS_VALUE);
                    assertThat(answer.length).isZero();
                    refused++;
                }
                else
                {
                    assertThat(answer.length).isEqualTo(4L * sent.flags);
                    final DataInputStream in = new DataInputStream(
                        new ByteArrayInputStream(client.readPayload(4 * sent.flags)));
                    accepted += checkLanded(frame, sent, in);
                }
                assertPingAnswered(client, 5000 + round);
            }
        }
        assertThat(refused).as("vectors refused whole").isPositive();
        assertThat(accepted).as("entries that landed").isPositive();
    }

    /**
     * The entries of a damaged WRITEV the server answered entry by entry (their statuses in {@code statuses}): each
     * answered 0 and not overwritten by a later one of the same frame has its bytes and its ledger entry. @return how
     * many were answered 0.
     */
    private int checkLanded(final byte[] frame, final FrameHeader sent, final DataInputStream statuses)
        throws IOException
    {
        final int n = sent.flags;
        final FrameHeader[] headers = new FrameHeader[n];
        final long[] valueAt = new long[n];
        final int[] status = new int[n];
        long value = FrameDescriptor.HEADER_LENGTH + sent.offset;
        for (int i = 0; i < n; i++)
        {
            status[i] = statuses.readInt();
            headers[i] = new FrameHeader();
            headers[i].decode(io.netty.buffer.Unpooled.wrappedBuffer(frame, FrameDescriptor.HEADER_LENGTH *
                (1 + i), FrameDescriptor.HEADER_LENGTH), Integer.MAX_VALUE);
            valueAt[i] = value;
            value += headers[i].length;
        }
        int landed = 0;
        final List<SegmentLedger.Entry> ledger = segment.ledger().snapshot();
        for (int i = 0; i < n; i++)
        {
            if (status[i] != 0)
            {
                continue;
            }
            landed++;
            final long from = headers[i].offset;
            final long to = from + headers[i].length;
            boolean overwritten = false;
            for (int j = i + 1; j < n; j++)
            {
                overwritten |= status[j] == 0 && headers[j].offset < to && headers[j].offset + headers[j].length > from;
            }
            if (overwritten)
            {
                continue;
            }
            assertThat(segmentBytes(from, (int)headers[i].length)).as("entry %d", i)
                .isEqualTo(Arrays.copyOfRange(frame, (int)valueAt[i], (int)(valueAt[i] + headers[i].length)));
            assertThat(ledger).as("ledger entry of entry %d", i)
                .anySatisfy(e -> assertThat(e.offset()).isEqualTo(from));
        }
        return landed;
    }

    private static void assertEntry(
        final SegmentLedger.Entry entry, final long offset, final String key, final long length, final long version)
    {
        assertThat(entry.offset()).isEqualTo(offset);
        assertThat(entry.key()).isEqualTo(key);
        assertThat(entry.tenant()).isEqualTo("tenant-a");
        assertThat(entry.groupId()).isEqualTo("grp");
        assertThat(entry.valueLength()).isEqualTo(length);
        assertThat(entry.version()).isEqualTo(version);
        assertThat(entry.flags()).isEqualTo(CommitRecord.FLAG_HARD_PIN);
    }

    @Test
    void shouldTakeAsManyEntriesAsAVectorMayCarry() throws Exception
    {
        final int n = FrameDescriptor.MAX_VECTOR_ENTRIES;
        final List<Entry> entries = new ArrayList<>();
        final byte[] values = randomValue(16 * n);
        for (int i = 0; i < n; i++)
        {
            entries.add(entry(segment.id(), 16L * i, Arrays.copyOfRange(values, 16 * i, 16 * i + 16), "k" + i, i + 1));
        }
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(1, entries));
            final int[] statuses = readStatuses(client, 1, n);
            assertThat(statuses).containsOnly(0);
        }
        assertThat(segmentBytes(0, values.length)).isEqualTo(values);
        assertThat(segment.ledger().size()).isEqualTo(n);
        assertThat(segment.ledger().snapshot().get(n - 1).key()).isEqualTo("k" + (n - 1));
    }

    /**
     * Entries refused on their own (a range outside the segment, an unknown segment, a nonzero status) get their own
     * status, nothing written or recorded for them; the good ones go through; the connection keeps serving, and a
     * refused entry is not held against a later COMMIT of its extent (its COMMIT went with it).
     */
    @Test
    void shouldAnswerEachEntryWithItsOwnStatus() throws Exception
    {
        final byte[] outside = randomValue(100);
        final byte[] unknown = randomValue(200);
        final byte[] good = randomValue(300);
        final byte[] withStatus = randomValue(400);
        final byte[] good2 = randomValue(50);
        final Entry statusEntry = entry(segment.id(), 200_000, withStatus, "s", 4);
        statusEntry.header().status = 7; // a request's status is 0
        final List<Entry> entries = List.of(
            entry(segment.id(), SEGMENT_BYTES - 10, outside, "o", 1),
            entry(unknownSegmentId(), 8192, unknown, "u", 2),
            entry(segment.id(), 16_384, good, "g", 3),
            statusEntry,
            entry(segment.id(), 32_768, good2, "h", 5));
        final long errorsBefore = server.errorResponses();
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(9, entries));
            assertThat(readStatuses(client, 9, 5)).containsExactly(
                INVALID_PARAMS_VALUE, SEGMENT_NOT_FOUND_VALUE, 0, INVALID_PARAMS_VALUE, 0);
            if (serverTransport() == TransportKind.JAVA)
            {
                assertThat(server.errorResponses() - errorsBefore).isEqualTo(3);
            }
            assertPingAnswered(client, 10);

            // The extent of the refused entry committed on its own: nothing of the entry is held against it.
            final byte[] rec = record("s", withStatus.length, 6).encode();
            client.send(RawClient.header(Opcode.COMMIT, 11, segment.id(), 200_000, rec.length));
            client.send(rec);
            final FrameHeader commit = client.readHeader();
            assertThat(commit.requestId).isEqualTo(11);
            assertThat(commit.status).isZero();

            // And another WRITEV on the same connection.
            final byte[] later = randomValue(123);
            client.send(writev(12, List.of(entry(segment.id(), 48_000, later, "l", 7))));
            assertThat(readStatuses(client, 12, 1)).containsExactly(0);
            assertThat(segmentBytes(48_000, later.length)).isEqualTo(later);
        }
        assertThat(segmentBytes(SEGMENT_BYTES - 10, 10)).as("the refused entry's range").containsOnly(0);
        assertThat(segmentBytes(8192, unknown.length)).as("where the unknown segment's entry pointed").containsOnly(0);
        assertThat(segmentBytes(200_000, withStatus.length)).as("the entry with a status").containsOnly(0);
        assertThat(segmentBytes(16_384, good.length)).isEqualTo(good);
        assertThat(segmentBytes(32_768, good2.length)).isEqualTo(good2);
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly(
            "g", "h", "l", "s");
    }

    /**
     * Vectors refused whole, each answered header-only with INVALID_PARAMS after its payload was consumed: nothing is
     * written, the ledger does not even forget what the entries' ranges held, and the connection stays in step.
     */
    @Test
    void shouldRefuseMalformedVectorsWholeAndKeepTheConnection() throws Exception
    {
        // A committed extent under every entry below: a refused vector must not make the ledger forget it.
        final long at = 65_536;
        final byte[] held = randomValue(4096);
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(1, List.of(entry(segment.id(), at, held, "held", 1))));
            assertThat(readStatuses(client, 1, 1)).containsExactly(0);
        }
        final List<Entry> two = List.of(
            entry(segment.id(), at, randomValue(100), "x", 2),
            entry(segment.id(), at + 200, randomValue(300), "y", 3));
        final Entry readEntry = entry(segment.id(), at, randomValue(100), "r", 4);
        readEntry.header().opcode = Opcode.READ;
        final Entry noRecord = entry(segment.id(), at, randomValue(100), new byte[0]);
        final Entry bigRecord = entry(segment.id(), at, randomValue(100),
            new byte[FrameDescriptor.MAX_COMMIT_PAYLOAD + 1]);
        final Entry emptyValue = entry(segment.id(), at, new byte[0], record("z", 0, 5).encode());
        final Entry responseEntry = entry(segment.id(), at, randomValue(100), "q", 6);
        responseEntry.header().opcode = Opcode.WRITE_COMMIT_RESPONSE;
        final Entry unknownOpcode = entry(segment.id(), at, randomValue(100), "q", 6);
        unknownOpcode.header().opcode = 0x7F;
        final Entry hugeRecords = entry(segment.id(), at, randomValue(10),
            new byte[FrameDescriptor.MAX_COMMIT_PAYLOAD]);
        final List<Entry> overTheTableLimit = new ArrayList<>();
        for (int i = 0; i < 64; i++)
        {
            overTheTableLimit.add(hugeRecords); // 64 x (64 + 16 KiB): above 1 MiB
        }

        final List<byte[]> vectors = new ArrayList<>();
        final List<String> why = new ArrayList<>();
        vectors.add(writev(100, two, h -> h.flags = 0));
        why.add("no entries");
        vectors.add(concat(writev(101, List.of(), h -> h.length = 100), new byte[100]));
        why.add("no entries, a payload");
        vectors.add(writev(102, two, h -> h.status = 7));
        why.add("a nonzero status");
        vectors.add(writev(103, two, h -> h.offset = 64 + 10));
        why.add("a table shorter than the entries' headers");
        vectors.add(writev(104, two, h -> h.offset = h.length + 1));
        why.add("a table longer than the frame");
        vectors.add(concat(writev(105, two, h -> h.length += 1), new byte[1]));
        why.add("values that do not add up to the frame");
        vectors.add(concat(writev(106, two, h ->
        {
            h.offset += 1;
            h.length += 1;
        }), new byte[1]));
        why.add("records that do not add up to the table");
        vectors.add(writev(107, List.of(two.get(0), readEntry)));
        why.add("an entry that is a READ");
        vectors.add(writev(108, List.of(noRecord, two.get(1))));
        why.add("an entry without a record");
        vectors.add(writev(109, List.of(two.get(0), bigRecord)));
        why.add("an entry's record above 16 KiB");
        vectors.add(writev(110, List.of(two.get(0), emptyValue)));
        why.add("an entry without a value");
        vectors.add(writev(111, List.of(responseEntry)));
        why.add("an entry that is a response");
        vectors.add(writev(112, List.of(two.get(0), unknownOpcode)));
        why.add("an entry with an unknown opcode");
        final byte[] badMagic = writev(113, two);
        badMagic[64 + 64] ^= 0x01; // the second entry's magic
        vectors.add(badMagic);
        why.add("an entry that does not decode");
        vectors.add(writev(114, overTheTableLimit));
        why.add("a table above 1 MiB");
        final FrameHeader tooMany = vectorHeader(115, List.of());
        tooMany.flags = FrameDescriptor.MAX_VECTOR_ENTRIES + 1;
        tooMany.offset = 64L * tooMany.flags;
        tooMany.length = tooMany.offset;
        vectors.add(concat(RawClient.header(tooMany), new byte[(int)tooMany.length]));
        why.add("more than 1024 entries");

        try (RawClient client = new RawClient(server.port()))
        {
            for (int i = 0; i < vectors.size(); i++)
            {
                client.send(vectors.get(i));
                readRefusal(client, 100 + i, why.get(i));
                assertPingAnswered(client, 1000 + i);
            }
            // Byte by byte, a refused vector is consumed just the same.
            client.sendByteByByte(writev(200, List.of(two.get(0), readEntry)));
            readRefusal(client, 200, "split into one-byte reads");

            final byte[] good = randomValue(64);
            client.send(writev(201, List.of(entry(segment.id(), 500_000, good, "good", 9))));
            assertThat(readStatuses(client, 201, 1)).containsExactly(0);
            assertThat(segmentBytes(500_000, good.length)).isEqualTo(good);
        }
        assertThat(segmentBytes(at, held.length)).as("no refused vector wrote").isEqualTo(held);
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("held", "good");
    }

    private static byte[] concat(final byte[] a, final byte[] b)
    {
        final byte[] both = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, both, a.length, b.length);
        return both;
    }

    /**
     * A record that fails its COMMIT's checks (version 0, garbage, an extent past the end of the segment) refuses its
     * entry once the bytes are in: the value is in memory but not in the ledger; the other entries are recorded.
     */
    @Test
    void shouldRefuseAnEntryWhoseRecordIsBadAndRecordTheOthers() throws Exception
    {
        final byte[] first = randomValue(500);
        final byte[] versionZero = randomValue(600);
        final byte[] garbage = randomValue(700);
        final byte[] pastTheEnd = randomValue(100);
        final byte[] last = randomValue(800);
        final byte[] junk = new byte[40];
        Arrays.fill(junk, (byte)9);
        final List<Entry> entries = List.of(
            entry(segment.id(), 0, first, "first", 1),
            entry(segment.id(), 4096, versionZero, record("v0", versionZero.length, 0).encode()),
            entry(segment.id(), 8192, garbage, junk),
            entry(segment.id(), SEGMENT_BYTES - 100, pastTheEnd, record("end", 4096, 3).encode()),
            entry(segment.id(), 12_288, last, "last", 2));
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(5, entries));
            assertThat(readStatuses(client, 5, 5)).containsExactly(
                0, INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE, INVALID_PARAMS_VALUE, 0);
            assertPingAnswered(client, 6);
        }
        assertThat(segmentBytes(0, first.length)).isEqualTo(first);
        assertThat(segmentBytes(4096, versionZero.length)).as("written, then refused at the COMMIT").isEqualTo(
            versionZero);
        assertThat(segmentBytes(8192, garbage.length)).isEqualTo(garbage);
        assertThat(segmentBytes(SEGMENT_BYTES - 100, pastTheEnd.length)).isEqualTo(pastTheEnd);
        assertThat(segmentBytes(12_288, last.length)).isEqualTo(last);
        assertThat(segment.ledger().snapshot()).satisfiesExactly(
            x -> assertEntry(x, 0, "first", first.length, 1),
            x -> assertEntry(x, 12_288, "last", last.length, 2));
    }

    /**
     * An entry replaces the ledger entries its range overlaps and keeps the ones beside it; of two entries of one
     * vector that overlap, the later one is what the ledger holds.
     */
    @Test
    void shouldReplaceTheLedgerEntriesAnEntryOverlaps() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(1, List.of(
                entry(segment.id(), 0, randomValue(4096), "keep", 1),
                entry(segment.id(), 8192, randomValue(4096), "old", 2))));
            assertThat(readStatuses(client, 1, 2)).containsExactly(0, 0);
            assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly(
                "keep", "old");

            final byte[] fresh = randomValue(100);
            final byte[] x = randomValue(1000);
            final byte[] y = randomValue(1000);
            client.send(writev(2, List.of(
                entry(segment.id(), 10_000, fresh, "new", 3),
                entry(segment.id(), 4096, randomValue(10), "beside", 4),
                entry(segment.id(), 20_000, x, "x", 5),
                entry(segment.id(), 20_500, y, "y", 6))));
            assertThat(readStatuses(client, 2, 4)).containsExactly(0, 0, 0, 0);
            assertThat(segmentBytes(10_000, fresh.length)).isEqualTo(fresh);
            assertThat(segmentBytes(20_000, 500)).isEqualTo(Arrays.copyOf(x, 500));
            assertThat(segmentBytes(20_500, y.length)).isEqualTo(y);
        }
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly(
            "keep", "beside", "new", "y");
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::offset).containsExactly(
            0L, 4096L, 10_000L, 20_500L);
    }

    /**
     * With a data-token key: every entry's WRITE part needs a WRITE token for its range, and its record's extent must
     * lie in that token's grant; a refused entry stands alone.
     */
    @Test
    void shouldCheckEveryEntrysTokenAsAWriteCommitsWould() throws Exception
    {
        final byte[] nodeKey = AccessTokenCodec.deriveNodeKey(AccessTokenCodec.newRandomKey(), "node-1");
        final AccessTokenCodec signer = new AccessTokenCodec(nodeKey);
        server.tokenVerifier().updateKey(nodeKey);
        final long expiry = System.currentTimeMillis() / 1000 + 600;

        final byte[] granted = randomValue(100);
        final byte[] noToken = randomValue(100);
        final byte[] readToken = randomValue(100);
        final byte[] shortGrant = randomValue(100);
        final Entry ok = entry(segment.id(), 4096, granted, "ok", 1);
        sign(signer, ok.header(), Opcode.WRITE, 4096, 100, expiry);
        final Entry none = entry(segment.id(), 8192, noToken, "none", 2);
        final Entry wrongOp = entry(segment.id(), 12_288, readToken, "read", 3);
        sign(signer, wrongOp.header(), Opcode.READ, 12_288, 100, expiry);
        // The value fits the grant, but the record commits 200 bytes: the COMMIT part is refused.
        final Entry beyondGrant = entry(segment.id(), 16_384, shortGrant, record("beyond", 200, 4).encode());
        sign(signer, beyondGrant.header(), Opcode.WRITE, 16_384, 100, expiry);
        try (RawClient client = new RawClient(server.port()))
        {
            client.send(writev(3, List.of(ok, none, wrongOp, beyondGrant)));
            assertThat(readStatuses(client, 3, 4)).containsExactly(
                0, ACCESS_DENIED_VALUE, ACCESS_DENIED_VALUE, ACCESS_DENIED_VALUE);
            assertPingAnswered(client, 4);
        }
        assertThat(segmentBytes(4096, granted.length)).isEqualTo(granted);
        assertThat(segmentBytes(8192, noToken.length)).containsOnly(0);
        assertThat(segmentBytes(12_288, readToken.length)).containsOnly(0);
        assertThat(segmentBytes(16_384, shortGrant.length)).as("its WRITE part was granted").isEqualTo(shortGrant);
        assertThat(segment.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("ok");
    }

    private static void sign(
        final AccessTokenCodec signer,
        final FrameHeader header,
        final int op,
        final long grantOffset,
        final long grantLength,
        final long expirySec)
    {
        final byte[] token = signer.sign(op, header.segmentId, grantOffset, grantLength, expirySec);
        header.grantDelta = header.offset - grantOffset;
        header.grantLength = grantLength;
        header.tokenExpirySec = expirySec;
        System.arraycopy(token, 4, header.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
    }

    @Test
    void shouldRefuseTheEntriesBeyondTheLedgerBudget() throws Exception
    {
        // Room for one entry: "a" or "b" with group "grp" (names of 2 + 1 + 3 bytes).
        final SegmentRegistry small = new SegmentRegistry(new LedgerBudget(LedgerBudget.entryBytes(6)));
        final Segment seg = small.allocate("test/seg1", SEGMENT_BYTES);
        final TransferServer smallServer = startServer(small, new AccessTokenVerifier(Clock.SYSTEM));
        try (RawClient client = new RawClient(smallServer.port()))
        {
            client.send(writev(1, List.of(
                entry(seg.id(), 0, randomValue(100), "a", 1),
                entry(seg.id(), 4096, randomValue(100), "b", 2))));
            assertThat(readStatuses(client, 1, 2)).containsExactly(0, NO_AVAILABLE_HANDLE_VALUE);
            assertThat(seg.ledger().snapshot()).extracting(SegmentLedger.Entry::key).containsExactly("a");
            assertThat(small.ledgerBudget().refusals()).isEqualTo(1);
        }
        finally
        {
            smallServer.close();
            small.close();
        }
    }
}
