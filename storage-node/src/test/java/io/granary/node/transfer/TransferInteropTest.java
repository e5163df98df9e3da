package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.Await;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransfer;
import io.granary.transfer.natives.NativeTransferEngine;
import io.granary.transfer.tcp.CallerDrivenEngine;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The data-plane contract in all four directions: Java and native client engines against Java and native transfer
 * servers, with access tokens on, every byte verified in the segment and back in the client, COMMITs reaching the
 * Java ledger, and refusals answered the same way whichever side is native.
 */
class TransferInteropTest
{
    private static final long SEGMENT_BYTES = 32L << 20;
    private static final int MAX_FRAME_BYTES = 4 << 20;
    private static final byte[] NODE_KEY = AccessTokenCodec.newRandomKey();

    private final Random random = new Random(77);
    private final AccessTokenCodec signer = new AccessTokenCodec(NODE_KEY);
    private final List<AutoCloseable> resources = new ArrayList<>();
    private SegmentRegistry registry;
    private Segment segment;
    private TransferServer server;
    private TransferEngine engine;
    private String endpoint;

    @BeforeAll
    static void requireTheLibrary()
    {
        assertThat(NativeTransfer.unavailabilityCause()).as("native transfer library").isNull();
    }

    static Stream<Arguments> directions()
    {
        return Stream.of(
            Arguments.of(TransportKind.JAVA, TransportKind.JAVA),
            Arguments.of(TransportKind.NATIVE, TransportKind.JAVA),
            Arguments.of(TransportKind.JAVA, TransportKind.NATIVE),
            Arguments.of(TransportKind.NATIVE, TransportKind.NATIVE));
    }

    private void start(final TransportKind client, final TransportKind node)
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("interop/seg0", SEGMENT_BYTES);
        final AccessTokenVerifier verifier = new AccessTokenVerifier(Clock.SYSTEM);
        verifier.updateKey(NODE_KEY);
        server = new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, node).start();
        assertThat(server.transport()).isEqualTo(node);
        endpoint = "127.0.0.1:" + server.port();
        // Slices of 256 KiB so that a few MiB span many frames over both lanes; every byte over TCP (same-host copies
        // are shouldMoveBigValuesLocallyToANativeNodeOnThisHost's).
        final TransferConfig config = new TransferConfig().sliceBytes(256 << 10).localTransfers(false);
        engine = client == TransportKind.NATIVE ? new NativeTransferEngine(config) : new NettyTransferEngine(config);
        assertThat(engine.kind()).isEqualTo(client);
    }

    @AfterEach
    void stop() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
        if (engine != null)
        {
            engine.close();
        }
        if (server != null)
        {
            server.close();
            assertThat(server.isTerminated()).isTrue();
        }
        if (registry != null)
        {
            registry.close();
        }
    }

    private byte[] token(final int opcode, final long offset, final long length)
    {
        return signer.sign(opcode, segment.id(), offset, length, System.currentTimeMillis() / 1000 + 600);
    }

    private int write(final long offset, final ByteBuffer from, final int length) throws Exception
    {
        return await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), offset, from,
            length, token(Opcode.WRITE, offset, length))));
    }

    private int read(final long offset, final ByteBuffer into, final int length) throws Exception
    {
        return await(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, segment.id(), offset, into,
            length, token(Opcode.READ, offset, length))));
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(30, TimeUnit.SECONDS);
    }

    private byte[] segmentBytes(final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new UnsafeBuffer(segment.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    private static ByteBuffer buffer(final boolean direct, final int position, final int length)
    {
        final ByteBuffer buffer = direct ? ByteBuffer.allocateDirect(position + length + 5) :
            ByteBuffer.allocate(position + length + 5);
        buffer.position(position).limit(position + length);
        return buffer;
    }

    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldMoveEveryByteOfMixedSizesBothWays(final TransportKind client, final TransportKind node)
        throws Exception
    {
        start(client, node);
        final int[] sizes = {1, 100, 4095, 4096, 65_537, 256 << 10, (1 << 20) + 3, (3 << 20) + 12_345};
        long offset = 4096;
        int i = 0;
        for (final int size : sizes)
        {
            final byte[] value = new byte[size];
            random.nextBytes(value);
            final boolean direct = i % 2 == 0;
            final ByteBuffer from = buffer(direct, 7, size);
            from.duplicate().put(value);
            assertThat(write(offset, from, size)).as("write of %d bytes", size).isZero();
            assertThat(segmentBytes(offset, size)).as("segment after a write of %d bytes", size).isEqualTo(value);

            final ByteBuffer into = buffer(!direct, 3, size);
            assertThat(read(offset, into, size)).as("read of %d bytes", size).isZero();
            final byte[] back = new byte[size];
            into.duplicate().get(back);
            assertThat(back).as("bytes read back, %d", size).isEqualTo(value);
            assertThat(into.position()).isEqualTo(3);
            offset += size + 4096L;
            i++;
        }
    }

    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldServeABatchOf128SmallPagesSubmittedTogether(final TransportKind client, final TransportKind node)
        throws Exception
    {
        start(client, node);
        final int pages = 128;
        final int pageBytes = 4096;
        final byte[] content = new byte[pages * pageBytes];
        random.nextBytes(content);
        new UnsafeBuffer(segment.address() + (1 << 20), content.length).putBytes(0, content);
        final ByteBuffer into = ByteBuffer.allocateDirect(content.length);
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        for (int p = 0; p < pages; p++)
        {
            final long at = (1 << 20) + (long)p * pageBytes;
            futures.add(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, segment.id(), at,
                into.duplicate().position(p * pageBytes).limit((p + 1) * pageBytes).slice(), pageBytes,
                token(Opcode.READ, at, pageBytes))));
        }
        for (final CompletableFuture<Integer> future : futures)
        {
            assertThat(await(future)).isZero();
        }
        final byte[] back = new byte[content.length];
        into.get(0, back);
        assertThat(back).isEqualTo(content);
    }

    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldAnswerEveryReadOfAVectorWithItsOwnStatusAndBytes(final TransportKind client, final TransportKind node)
        throws Exception
    {
        start(client, node);
        final byte[] content = new byte[8 << 20];
        random.nextBytes(content);
        new UnsafeBuffer(segment.address(), content.length).putBytes(0, content);
        final long vectorsBefore = server.readVectors();
        // Reads coalesce into READV frames only when they reach a lane together. Under a driver (the native engine)
        // they always do; the Netty engine's event loop may drain each submit alone on a busy machine, so rounds repeat
        // (each one checked in full) until the node has served a READV.
        for (int round = 0; round < 20 && server.readVectors() == vectorsBefore; round++)
        {
            readScatteredPages(content.length);
        }
        assertThat(server.readVectors() - vectorsBefore).as("READV frames the node served").isPositive();
    }

    private void readScatteredPages(final int contentLength) throws Exception
    {
        final int pages = 200;
        // Reads of 1 byte to 64 KiB at scattered offsets, into slices of one direct buffer and into heap buffers;
        // every 7th is refused for its token, every 11th for its segment, every 13th for its range.
        final List<ByteBuffer> into = new ArrayList<>();
        final List<long[]> asked = new ArrayList<>();
        final List<TransferRequest> requests = new ArrayList<>();
        final ByteBuffer shared = ByteBuffer.allocateDirect(pages * (64 << 10));
        for (int p = 0; p < pages; p++)
        {
            final int length = p % 5 == 0 ? 1 + random.nextInt(100) : p % 5 == 1 ? 64 << 10 : 1 + random.nextInt(8192);
            final long at = random.nextInt(contentLength - length);
            final ByteBuffer dst = p % 3 == 0 ? ByteBuffer.allocate(length) :
                shared.duplicate().position(p * (64 << 10)).limit(p * (64 << 10) + length).slice();
            int segmentId = segment.id();
            long offset = at;
            byte[] token = token(Opcode.READ, at, length);
            int expected = 0;
            if (p % 7 == 3)
            {
                token = token(Opcode.READ, at + 1, length); // another extent's
                expected = ACCESS_DENIED_VALUE;
            }
            else if (p % 11 == 5)
            {
                segmentId = segment.id() + 1;
                token = signer.sign(Opcode.READ, segmentId, at, length, System.currentTimeMillis() / 1000 + 600);
                expected = SEGMENT_NOT_FOUND_VALUE;
            }
            else if (p % 13 == 6)
            {
                offset = SEGMENT_BYTES - length / 2 - 1;
                token = token(Opcode.READ, offset, length);
                expected = length == 1 ? 0 : INVALID_PARAMS_VALUE;
            }
            into.add(dst);
            asked.add(new long[]{offset, length, expected});
            requests.add(new TransferRequest(TransferRequest.Op.READ, endpoint, segmentId, offset, dst, length, token));
        }
        final List<CompletableFuture<Integer>> futures = submitTogether(requests);
        for (int p = 0; p < pages; p++)
        {
            final long offset = asked.get(p)[0];
            final int length = (int)asked.get(p)[1];
            final int status = await(futures.get(p));
            assertThat(status).as("read %d", p).isEqualTo((int)asked.get(p)[2]);
            final byte[] back = new byte[length];
            into.get(p).duplicate().clear().get(back);
            final byte[] expected = status == 0 ? segmentBytes(offset, length) : new byte[length];
            assertThat(back).as("bytes of read %d", p).isEqualTo(expected);
        }
    }

    /** Submits all requests before any is sent where the engine lets this thread drive them, and waits for them. */
    private List<CompletableFuture<Integer>> submitTogether(final List<TransferRequest> requests) throws Exception
    {
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        try (TransferEngine.Driver driver = engine.openDriver())
        {
            for (final TransferRequest request : requests)
            {
                futures.add(engine.submit(request));
            }
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (driver != null && driver.hasWork() && System.nanoTime() < deadline)
            {
                driver.drive(TimeUnit.MILLISECONDS.toNanos(10));
            }
        }
        return futures;
    }

    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldRecordCommitsInTheLedgerOnlyAfterTheirWrites(final TransportKind client, final TransportKind node)
        throws Exception
    {
        start(client, node);
        final byte[] small = new byte[3000];
        final byte[] big = new byte[(1 << 20) + 10];
        random.nextBytes(small);
        random.nextBytes(big);
        assertThat(commitWrite(0, small, 21)).isZero();
        assertThat(commitWrite(1 << 20, big, 22)).isZero();
        // A WRITE refused for its range: its COMMIT is refused with the same status, the ledger is unchanged.
        final long outside = SEGMENT_BYTES - 100;
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), outside,
            ByteBuffer.wrap(small), small.length, token(Opcode.WRITE, outside, small.length),
            record("outside", small.length, 23).encode())))).isEqualTo(INVALID_PARAMS_VALUE);

        assertThat(segment.ledger().snapshot()).satisfiesExactly(
            e ->
            {
                assertThat(e.key()).isEqualTo("k21");
                assertThat(e.offset()).isZero();
                assertThat(e.valueLength()).isEqualTo(small.length);
                assertThat(e.version()).isEqualTo(21);
            },
            e ->
            {
                assertThat(e.key()).isEqualTo("k22");
                assertThat(e.offset()).isEqualTo(1 << 20);
                assertThat(e.valueLength()).isEqualTo(big.length);
            });
        assertThat(segmentBytes(0, small.length)).isEqualTo(small);
        assertThat(segmentBytes(1 << 20, big.length)).isEqualTo(big);
        // A WRITE over a committed extent removes its entry before its bytes land.
        assertThat(write(0, ByteBuffer.wrap(small), 100)).isZero();
        assertThat(segment.ledger().snapshot()).extracting(e -> e.key()).containsExactly("k22");
    }

    /**
     * Both engines send a one-frame value and its COMMIT record as one WRITE_COMMIT frame (one request at the node
     * instead of two), and as a WRITE and a COMMIT with writeCommits off; the ledger holds the value either way.
     */
    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldSendASmallValueWithItsCommitAsOneFrame(final TransportKind client, final TransportKind node)
        throws Exception
    {
        start(client, node);
        final byte[] value = new byte[4096];
        random.nextBytes(value);
        final long before = server.requests();
        assertThat(commitWrite(0, value, 41)).isZero();
        assertThat(server.requests() - before).as("requests for one value and its COMMIT").isEqualTo(1);

        engine.close();
        final TransferConfig off = new TransferConfig().writeCommits(false).localTransfers(false);
        engine = client == TransportKind.NATIVE ? new NativeTransferEngine(off) : new NettyTransferEngine(off);
        final long apart = server.requests();
        assertThat(commitWrite(8192, value, 42)).isZero();
        assertThat(server.requests() - apart).as("requests with writeCommits off").isEqualTo(2);

        assertThat(segment.ledger().snapshot()).extracting(e -> e.key()).containsExactly("k41", "k42");
        assertThat(segmentBytes(0, value.length)).isEqualTo(value);
        assertThat(segmentBytes(8192, value.length)).isEqualTo(value);
    }

    /** The Java caller-driven engine (what synchronous calls of the Java transport use) sends WRITE_COMMIT too. */
    @ParameterizedTest(name = "caller-driven Java client, {0} node")
    @EnumSource(value = TransportKind.class, names = {"JAVA", "NATIVE"})
    void shouldSendASmallValueWithItsCommitAsOneFrameFromTheCallerDrivenJavaEngine(final TransportKind node)
        throws Exception
    {
        start(TransportKind.JAVA, node);
        final byte[] value = new byte[4096];
        random.nextBytes(value);
        final CallerDrivenEngine callerDriven = new CallerDrivenEngine(new TransferConfig());
        resources.add(callerDriven);
        final long before = server.requests();
        try (TransferEngine.Driver driver = callerDriven.openDriver())
        {
            final CompletableFuture<Integer> done = callerDriven.submit(new TransferRequest(TransferRequest.Op.WRITE,
                endpoint, segment.id(), 0, ByteBuffer.wrap(value), value.length, token(Opcode.WRITE, 0, value.length),
                record("k51", value.length, 51).encode()));
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!done.isDone() && System.nanoTime() - deadline < 0)
            {
                driver.drive(TimeUnit.MILLISECONDS.toNanos(50));
            }
            assertThat(done.getNow(-1)).isZero();
        }
        assertThat(server.requests() - before).as("requests for one value and its COMMIT").isEqualTo(1);
        assertThat(segment.ledger().snapshot()).extracting(e -> e.key()).containsExactly("k51");
        assertThat(segmentBytes(0, value.length)).isEqualTo(value);
    }

    static Stream<Arguments> writevClients()
    {
        final List<Arguments> arguments = new ArrayList<>();
        for (final String client : new String[]{"netty", "caller-driven", "native"})
        {
            for (final TransportKind node : new TransportKind[]{TransportKind.JAVA, TransportKind.NATIVE})
            {
                arguments.add(Arguments.of(client, node));
            }
        }
        return arguments.stream();
    }

    /**
     * Every client engine (the Java caller-driven one under a driver, as synchronous calls use it) puts a batch of
     * small values with their records, which leave as WRITEVs, against both servers: each value gets its own status,
     * every byte of the good ones lands, every record of theirs is in the ledger, none of the refused ones is.
     */
    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("writevClients")
    void shouldPutABatchOfSmallValuesWithTheirRecordsAsWriteVectors(final String client, final TransportKind node)
        throws Exception
    {
        start(client.equals("native") ? TransportKind.NATIVE : TransportKind.JAVA, node);
        if (client.equals("caller-driven"))
        {
            engine.close();
            engine = new CallerDrivenEngine(new TransferConfig().sliceBytes(256 << 10));
        }
        final long vectorsBefore = server.writeVectors();
        // Writes coalesce into WRITEV frames only when they reach a lane together. Under a driver they always do; the
        // Netty engine's event loop may drain each submit alone on a busy machine, so rounds repeat (each one checked
        // in full) until the node has served a WRITEV.
        for (int round = 1; round <= 20 && server.writeVectors() == vectorsBefore; round++)
        {
            putSmallValues(round);
        }
        assertThat(server.writeVectors() - vectorsBefore).as("WRITEV frames the node served").isPositive();
    }

    /**
     * Puts 128 values with their records in one batch, at 128 KiB apart: most of 1 byte to 8 KiB, some of exactly
     * 64 KiB (the largest that joins a vector), some just above (each its own WRITE_COMMIT); every 17th carries
     * another extent's token and is refused alone.
     */
    private void putSmallValues(final int round) throws Exception
    {
        final int values = 128;
        final List<byte[]> contents = new ArrayList<>();
        final List<TransferRequest> requests = new ArrayList<>();
        for (int i = 0; i < values; i++)
        {
            final int length = i % 8 == 7 ? 65_537 + i : i % 8 == 6 ? 64 << 10 : 1 + random.nextInt(8192);
            final byte[] value = new byte[length];
            random.nextBytes(value);
            contents.add(value);
            final long at = (long)i << 17;
            final byte[] token = i % 17 == 3 ? token(Opcode.WRITE, at + 1, length) : token(Opcode.WRITE, at, length);
            requests.add(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), at,
                i % 2 == 0 ? ByteBuffer.wrap(value) : ByteBuffer.allocateDirect(length).put(value).flip(), length,
                token, record("b" + i, length, round * 1000L + i).encode()));
        }
        final List<CompletableFuture<Integer>> futures = submitTogether(requests);
        final List<String> committed = new ArrayList<>();
        for (int i = 0; i < values; i++)
        {
            final boolean refused = i % 17 == 3;
            assertThat(await(futures.get(i))).as("round %d, value %d", round, i)
                .isEqualTo(refused ? ACCESS_DENIED_VALUE : 0);
            if (!refused)
            {
                assertThat(segmentBytes((long)i << 17, contents.get(i).length)).as("bytes of value %d", i)
                    .isEqualTo(contents.get(i));
                committed.add("b" + i);
            }
        }
        assertThat(segment.ledger().snapshot()).as("round %d", round).hasSize(committed.size()).allSatisfy(e ->
        {
            final int i = (int)(e.offset() >> 17);
            assertThat(e.key()).isEqualTo("b" + i);
            assertThat(e.valueLength()).isEqualTo(contents.get(i).length);
            assertThat(e.version()).isEqualTo(round * 1000L + i);
        });
        assertThat(segment.ledger().snapshot()).extracting(e -> e.key()).containsExactlyInAnyOrderElementsOf(committed);
    }

    /**
     * The native engine against a node on this host (the node's own TransferServer, tokens on): a 1 MiB value moves
     * with process_vm_writev and its COMMIT over TCP into the ledger, a READ of it with process_vm_readv, neither
     * through the socket; the token's range and expiry are checked before (a range beyond the grant is refused by the
     * node over TCP); the Java node refuses LOCAL_CONNECT and the value goes over TCP; a node started with
     * localTransfers off refuses it too.
     */
    @ParameterizedTest(name = "native client, {0} node, node local transfers {1}")
    @MethodSource("localNodes")
    void shouldMoveBigValuesLocallyToANativeNodeOnThisHost(final TransportKind node, final boolean nodeLocal)
        throws Exception
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("interop/seg0", SEGMENT_BYTES);
        final AccessTokenVerifier verifier = new AccessTokenVerifier(Clock.SYSTEM);
        verifier.updateKey(NODE_KEY);
        server = new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, node).localTransfers(nodeLocal).start();
        endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine natives = new NativeTransferEngine(new TransferConfig().sliceBytes(256 << 10));
        engine = natives;
        final boolean local = node == TransportKind.NATIVE && nodeLocal;
        final byte[] big = new byte[1 << 20];
        random.nextBytes(big);

        final long in = server.bytesIn();
        assertThat(commitWrite(4096, big, 61)).isZero();
        assertThat(server.bytesIn() - in).as("bytes through the socket").satisfies(bytes ->
            assertThat(local ? bytes < 4096 : bytes >= big.length).isTrue());
        assertThat(segment.ledger().snapshot()).extracting(e -> e.key()).containsExactly("k61");
        assertThat(segmentBytes(4096, big.length)).isEqualTo(big);

        final ByteBuffer into = ByteBuffer.allocateDirect(big.length);
        final long out = server.bytesOut();
        assertThat(read(4096, into, big.length)).isZero();
        final byte[] back = new byte[big.length];
        into.get(back);
        assertThat(back).isEqualTo(big);
        // (a COMMIT's answer may still be counted after the snapshot: a few bytes, never the value's; and the server
        // may count what it sent a moment after the client has it all)
        if (!local)
        {
            Await.until("the read's bytes counted as sent", () -> server.bytesOut() - out >= big.length);
        }
        assertThat(server.bytesOut() - out).satisfies(bytes ->
            assertThat(local ? bytes < 4096 : bytes >= big.length).isTrue());
        assertThat(natives.localTransfers()).isEqualTo(local ? 2 : 0);
        // refused: the WRITE asked and took TCP, the READ took TCP without asking again (5 s)
        assertThat(natives.localFallbacks()).isEqualTo(local ? 0 : 2);

        // A grant that does not hold the range: not copied locally; the node refuses it over TCP.
        final long at = 8L << 20;
        final byte[] narrow = signer.sign(Opcode.WRITE, segment.id(), at, big.length - 4096,
            System.currentTimeMillis() / 1000 + 600);
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), at,
            ByteBuffer.wrap(big), big.length, narrow, at, big.length - 4096)))).isNotZero();
        assertThat(segmentBytes(at, 16)).containsOnly(0);
        assertThat(natives.localTransfers()).isEqualTo(local ? 2 : 0);
    }

    static Stream<Arguments> localNodes()
    {
        return Stream.of(
            Arguments.of(TransportKind.NATIVE, true),
            Arguments.of(TransportKind.NATIVE, false),
            Arguments.of(TransportKind.JAVA, true));
    }

    private static CommitRecord record(final String key, final long length, final long version)
    {
        return new CommitRecord(0, "tenant-a", key, "", length, version, 0, 0);
    }

    private int commitWrite(final long offset, final byte[] value, final long version) throws Exception
    {
        return await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), offset,
            ByteBuffer.wrap(value), value.length, token(Opcode.WRITE, offset, value.length),
            record("k" + version, value.length, version).encode())));
    }

    @ParameterizedTest(name = "{0} client, {1} node")
    @MethodSource("directions")
    void shouldRefuseWhatNoTokenGrantsAndUnknownSegmentsWithoutMovingBytes(
        final TransportKind client, final TransportKind node) throws Exception
    {
        start(client, node);
        final byte[] before = segmentBytes(8192, 4096);
        final byte[] value = new byte[4096];
        random.nextBytes(value);
        // A READ token used for a WRITE, a token of another extent, no token at all.
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), 8192,
            ByteBuffer.wrap(value), 4096, token(Opcode.READ, 8192, 4096))))).isEqualTo(ACCESS_DENIED_VALUE);
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), 8192,
            ByteBuffer.wrap(value), 4096, token(Opcode.WRITE, 16384, 4096))))).isEqualTo(ACCESS_DENIED_VALUE);
        assertThat(await(engine.submit(TransferRequest.write(endpoint, segment.id(), 8192, ByteBuffer.wrap(value),
            4096)))).isEqualTo(ACCESS_DENIED_VALUE);
        assertThat(segmentBytes(8192, 4096)).isEqualTo(before);
        final int unknown = segment.id() + 1;
        assertThat(await(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, unknown, 0,
            ByteBuffer.allocateDirect(10), 10,
            signer.sign(Opcode.READ, unknown, 0, 10, System.currentTimeMillis() / 1000 + 60)))))
            .isEqualTo(SEGMENT_NOT_FOUND_VALUE);
        // The lanes are still in sync after every refusal.
        assertThat(write(8192, ByteBuffer.wrap(value), 4096)).isZero();
        assertThat(segmentBytes(8192, 4096)).isEqualTo(value);
    }
}
