package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.ManualClock;
import io.granary.common.tls.TlsSettings;
import io.granary.node.Await;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.TOKEN_EXPIRED_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Data-plane access tokens against a real transfer server over loopback: what a token grants is served, everything
 * else is refused before a byte moves, and the connection stays usable. Two extents of one segment stand for two
 * tenants' objects.
 */
class AccessTokenTransferTest
{
    /** The server transport under test; the Native... subclass runs every test against the native server. */
    TransportKind serverTransport()
    {
        return TransportKind.JAVA;
    }

    private static final long SEGMENT_BYTES = 4L << 20;
    private static final int EXTENT_BYTES = 8192;
    private static final long EXTENT_A = 4096;
    private static final long EXTENT_B = 65_536;
    private static final byte[] MASTER_KEY = AccessTokenCodec.newRandomKey();

    private final ManualClock clock = new ManualClock();
    private final byte[] nodeKey = AccessTokenCodec.deriveNodeKey(MASTER_KEY, "node-1");
    private final AccessTokenCodec signer = new AccessTokenCodec(nodeKey);
    private final Random random = new Random(42);
    private SegmentRegistry registry;
    private Segment segment;
    private AccessTokenVerifier verifier;
    private TransferServer server;
    private byte[] original;
    private long requestId;

    @BeforeEach
    void start()
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("tokens/seg0", SEGMENT_BYTES);
        original = new byte[(int)SEGMENT_BYTES];
        random.nextBytes(original);
        new UnsafeBuffer(segment.address(), original.length).putBytes(0, original);
        verifier = new AccessTokenVerifier(clock);
        verifier.updateKey(nodeKey);
        server = new TransferServer("127.0.0.1", 0, registry, 1 << 20, 1, true, TransferMetrics.NONE,
            verifier, TlsSettings.DISABLED, serverTransport()).start();
    }

    @AfterEach
    void stop()
    {
        server.close();
        registry.close();
    }

    private long expiresInSeconds(final long seconds)
    {
        return clock.epochMillis() / 1000 + seconds;
    }

    /** A request frame whose token (signed with {@code signedOp} over the grant) claims the given grant. */
    private FrameHeader frame(
        final int opcode, final long offset, final int length, final long grantOffset, final long grantLength,
        final int signedOp, final long expirySec)
    {
        final FrameHeader header = new FrameHeader().set(opcode, ++requestId, segment.id(), offset, length);
        final byte[] token = signer.sign(signedOp, segment.id(), grantOffset, grantLength, expirySec);
        header.grantDelta = offset - grantOffset;
        header.grantLength = grantLength;
        header.tokenExpirySec = expirySec;
        System.arraycopy(token, 4, header.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
        return header;
    }

    private FrameHeader validRead(final long extent)
    {
        return frame(Opcode.READ, extent, EXTENT_BYTES, extent, EXTENT_BYTES, Opcode.READ, expiresInSeconds(10));
    }

    private byte[] segmentBytes(final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new UnsafeBuffer(segment.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    private byte[] originalBytes(final long offset, final int length)
    {
        return Arrays.copyOfRange(original, (int)offset, (int)offset + length);
    }

    /** Sends a READ and returns the response status; reads the payload when there is one and checks it. */
    private int read(final RawClient client, final FrameHeader request) throws Exception
    {
        client.send(RawClient.header(request));
        final FrameHeader response = client.readHeader();
        assertThat(response.opcode).isEqualTo(Opcode.READ_RESPONSE);
        assertThat(response.requestId).isEqualTo(request.requestId);
        if (response.status == 0)
        {
            assertThat(client.readPayload((int)request.length)).isEqualTo(segmentBytes(request.offset,
                (int)request.length));
        }
        return response.status;
    }

    /** Sends a WRITE with {@code payload} (always, as the protocol requires) and returns the response status. */
    private static int write(final RawClient client, final FrameHeader request, final byte[] payload)
        throws Exception
    {
        client.send(RawClient.header(request));
        client.send(payload);
        final FrameHeader response = client.readHeader();
        assertThat(response.opcode).isEqualTo(Opcode.WRITE_RESPONSE);
        assertThat(response.requestId).isEqualTo(request.requestId);
        return response.status;
    }

    private byte[] randomBytes(final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    /** The connection still serves a valid request after a refusal. */
    private void assertStillUsable(final RawClient client) throws Exception
    {
        assertThat(read(client, validRead(EXTENT_B))).isZero();
    }

    @Test
    void shouldServeReadsAndWritesThatTheirTokensGrant() throws Exception
    {
        final byte[] value = randomBytes(EXTENT_BYTES);
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(write(client, frame(Opcode.WRITE, EXTENT_A, EXTENT_BYTES, EXTENT_A, EXTENT_BYTES, Opcode.WRITE,
                expiresInSeconds(30)), value)).isZero();
            assertThat(segmentBytes(EXTENT_A, EXTENT_BYTES)).isEqualTo(value);

            assertThat(read(client, validRead(EXTENT_A))).isZero();
            // A slice of the grant, as the engine sends for big values: offset and length inside it.
            assertThat(read(client, frame(Opcode.READ, EXTENT_A + 4096, 4096, EXTENT_A, EXTENT_BYTES, Opcode.READ,
                expiresInSeconds(10)))).isZero();
        }
        assertThat(verifier.verified()).isEqualTo(3);
        assertThat(server.errorResponses()).isZero();
    }

    @Test
    void shouldServeASlicedTransferFromTheEngineWithOneTokenForTheWholeExtent() throws Exception
    {
        final int length = 3 * 4096 + 100;
        final byte[] writeToken = signer.sign(Opcode.WRITE, segment.id(), EXTENT_B, length, expiresInSeconds(30));
        final byte[] readToken = signer.sign(Opcode.READ, segment.id(), EXTENT_B, length, expiresInSeconds(10));
        final byte[] value = randomBytes(length);
        try (NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig().sliceBytes(4096)))
        {
            final String endpoint = "127.0.0.1:" + server.port();
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), EXTENT_B,
                ByteBuffer.wrap(value), length, writeToken)).get(10, TimeUnit.SECONDS)).isZero();
            final ByteBuffer into = ByteBuffer.allocateDirect(length);
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, segment.id(), EXTENT_B,
                into, length, readToken)).get(10, TimeUnit.SECONDS)).isZero();
            final byte[] read = new byte[length];
            into.get(read);
            assertThat(read).isEqualTo(value);
        }
        assertThat(verifier.verified()).isEqualTo(8); // four slices each way
    }

    @Test
    void shouldRefuseAForgedMacWithoutMovingAByte() throws Exception
    {
        final FrameHeader forgedRead = validRead(EXTENT_B);
        forgedRead.tokenMac[0] ^= 1;
        final FrameHeader forgedWrite = frame(Opcode.WRITE, EXTENT_B, EXTENT_BYTES, EXTENT_B, EXTENT_BYTES,
            Opcode.WRITE, expiresInSeconds(30));
        forgedWrite.tokenMac[15] ^= (byte)0x80;
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(read(client, forgedRead)).isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(write(client, forgedWrite, randomBytes(EXTENT_BYTES))).isEqualTo(ACCESS_DENIED_VALUE);
            assertStillUsable(client);
        }
        assertThat(segmentBytes(EXTENT_B, EXTENT_BYTES)).isEqualTo(originalBytes(EXTENT_B, EXTENT_BYTES));
        assertThat(verifier.refusedInvalid()).isEqualTo(2);
        // A server counts bytes out once its send returned, which may be after the client has them all.
        final long expectedOut = 3L * FrameDescriptor.HEADER_LENGTH + EXTENT_BYTES;
        Await.until("the server to count " + expectedOut + " bytes out", () -> server.bytesOut() >= expectedOut);
        assertThat(server.bytesOut()).isEqualTo(expectedOut);
    }

    @Test
    void shouldRefuseAnExpiredTokenWithItsOwnCode() throws Exception
    {
        final long expiry = expiresInSeconds(10);
        final FrameHeader read = frame(Opcode.READ, EXTENT_A, EXTENT_BYTES, EXTENT_A, EXTENT_BYTES, Opcode.READ, expiry);
        final FrameHeader write =
            frame(Opcode.WRITE, EXTENT_A, EXTENT_BYTES, EXTENT_A, EXTENT_BYTES, Opcode.WRITE, expiry);
        try (RawClient client = new RawClient(server.port()))
        {
            clock.advanceMillis(9_000);
            assertThat(read(client, read)).as("one second before expiry").isZero();

            clock.advanceMillis(1_000);
            read.requestId = ++requestId;
            assertThat(read(client, read)).isEqualTo(TOKEN_EXPIRED_VALUE);
            assertThat(write(client, write, randomBytes(EXTENT_BYTES))).isEqualTo(TOKEN_EXPIRED_VALUE);
            assertStillUsable(client);
        }
        assertThat(segmentBytes(EXTENT_A, EXTENT_BYTES)).isEqualTo(originalBytes(EXTENT_A, EXTENT_BYTES));
        assertThat(verifier.refusedExpired()).isEqualTo(2);
    }

    @Test
    void shouldRefuseATokenReplayedOnAnotherTenantsExtent() throws Exception
    {
        final long expiry = expiresInSeconds(10);
        try (RawClient client = new RawClient(server.port()))
        {
            // A's token, the frame claiming B's extent as the grant: the MAC covers A's offset.
            assertThat(read(client, frame(Opcode.READ, EXTENT_B, EXTENT_BYTES, EXTENT_B, EXTENT_BYTES, Opcode.READ,
                expiry, EXTENT_A))).isEqualTo(ACCESS_DENIED_VALUE);
            // A's grant honestly, but the frame's range moved to B: outside the grant.
            assertThat(read(client, frame(Opcode.READ, EXTENT_B, EXTENT_BYTES, EXTENT_A, EXTENT_BYTES, Opcode.READ,
                expiry))).isEqualTo(ACCESS_DENIED_VALUE);
            // A's grant stretched to reach B: the MAC covers A's length.
            assertThat(read(client, frame(Opcode.READ, EXTENT_B, EXTENT_BYTES, EXTENT_A,
                EXTENT_B - EXTENT_A + EXTENT_BYTES, Opcode.READ, expiry, EXTENT_A, EXTENT_BYTES)))
                .isEqualTo(ACCESS_DENIED_VALUE);
            // A's token with a longer length than granted.
            assertThat(read(client, frame(Opcode.READ, EXTENT_A, EXTENT_BYTES + 4096, EXTENT_A, EXTENT_BYTES,
                Opcode.READ, expiry))).isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(write(client, frame(Opcode.WRITE, EXTENT_B, EXTENT_BYTES, EXTENT_B, EXTENT_BYTES,
                Opcode.WRITE, expiresInSeconds(30), EXTENT_A), randomBytes(EXTENT_BYTES)))
                .isEqualTo(ACCESS_DENIED_VALUE);
            assertStillUsable(client);
        }
        assertThat(segmentBytes(EXTENT_B, EXTENT_BYTES)).isEqualTo(originalBytes(EXTENT_B, EXTENT_BYTES));
        assertThat(verifier.refusedInvalid()).isEqualTo(5);
    }

    @Test
    void shouldRefuseAReadTokenUsedForAWrite() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(write(client, frame(Opcode.WRITE, EXTENT_A, EXTENT_BYTES, EXTENT_A, EXTENT_BYTES, Opcode.READ,
                expiresInSeconds(10)), randomBytes(EXTENT_BYTES))).isEqualTo(ACCESS_DENIED_VALUE);
            assertStillUsable(client);
        }
        assertThat(segmentBytes(EXTENT_A, EXTENT_BYTES)).isEqualTo(originalBytes(EXTENT_A, EXTENT_BYTES));
    }

    @Test
    void shouldRefuseFramesWithoutATokenOnceTheNodeHasAKey() throws Exception
    {
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(read(client, new FrameHeader().set(Opcode.READ, ++requestId, segment.id(), EXTENT_A,
                EXTENT_BYTES))).isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(write(client, new FrameHeader().set(Opcode.WRITE, ++requestId, segment.id(), EXTENT_A,
                EXTENT_BYTES), randomBytes(EXTENT_BYTES))).isEqualTo(ACCESS_DENIED_VALUE);

            client.send(RawClient.header(new FrameHeader().set(Opcode.PING, ++requestId, 0, 0, 0)));
            final FrameHeader pong = client.readHeader();
            assertThat(pong.opcode).as("PING needs no token").isEqualTo(Opcode.PING_RESPONSE);
            assertThat(pong.status).isZero();
            assertStillUsable(client);
        }
        assertThat(segmentBytes(EXTENT_A, EXTENT_BYTES)).isEqualTo(originalBytes(EXTENT_A, EXTENT_BYTES));
        assertThat(verifier.refusedMissing()).isEqualTo(2);
    }

    @Test
    void shouldServeTokenlessFramesOnlyWhileTheNodeHasNoKey() throws Exception
    {
        final byte[] value = randomBytes(EXTENT_BYTES);
        try (RawClient client = new RawClient(server.port()))
        {
            verifier.updateKey(new byte[0]);
            assertThat(verifier.tokensRequired()).isFalse();
            assertThat(write(client, new FrameHeader().set(Opcode.WRITE, ++requestId, segment.id(), EXTENT_A,
                EXTENT_BYTES), value)).isZero();
            assertThat(segmentBytes(EXTENT_A, EXTENT_BYTES)).isEqualTo(value);

            verifier.updateKey(nodeKey);
            assertThat(read(client, new FrameHeader().set(Opcode.READ, ++requestId, segment.id(), EXTENT_A,
                EXTENT_BYTES))).isEqualTo(ACCESS_DENIED_VALUE);
        }
    }

    @Test
    void shouldRefuseTokensOfAnotherNodeOrOfAReplacedKey() throws Exception
    {
        final AccessTokenCodec otherNode = new AccessTokenCodec(AccessTokenCodec.deriveNodeKey(MASTER_KEY, "node-2"));
        final FrameHeader foreign = validRead(EXTENT_A);
        final byte[] foreignToken = otherNode.sign(Opcode.READ, segment.id(), EXTENT_A, EXTENT_BYTES,
            foreign.tokenExpirySec);
        System.arraycopy(foreignToken, 4, foreign.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
        final FrameHeader signedWithOldKey = validRead(EXTENT_A);
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(read(client, foreign)).isEqualTo(ACCESS_DENIED_VALUE);

            verifier.updateKey(AccessTokenCodec.deriveNodeKey(AccessTokenCodec.newRandomKey(), "node-1"));
            assertThat(read(client, signedWithOldKey)).as("a master restarted with a new key")
                .isEqualTo(ACCESS_DENIED_VALUE);
        }
    }

    /** Sends a COMMIT of {@code record} under {@code request}'s token and returns the response status. */
    private static int commit(final RawClient client, final FrameHeader request, final byte[] record) throws Exception
    {
        client.send(RawClient.header(request));
        client.send(record);
        final FrameHeader response = client.readHeader();
        assertThat(response.opcode).isEqualTo(Opcode.COMMIT_RESPONSE);
        assertThat(response.requestId).isEqualTo(request.requestId);
        return response.status;
    }

    private static byte[] commitRecord(final String key, final long valueLength)
    {
        return new CommitRecord(0, "tenant-b", key, "", valueLength, 7, 0, 0).encode();
    }

    @Test
    void shouldRecordACommitOnlyForAnExtentItsWriteTokenGrants() throws Exception
    {
        final byte[] record = commitRecord("mine", EXTENT_BYTES);
        final long expiry = expiresInSeconds(30);
        try (RawClient client = new RawClient(server.port()))
        {
            assertThat(commit(client, new FrameHeader().set(Opcode.COMMIT, ++requestId, segment.id(), EXTENT_A,
                record.length), record)).as("no token").isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, record.length, EXTENT_A, EXTENT_BYTES,
                Opcode.READ, expiry), record)).as("a READ token").isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, record.length, EXTENT_B, EXTENT_BYTES,
                Opcode.WRITE, expiry), record)).as("tenant B's WRITE token on tenant A's extent")
                .isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, record.length, EXTENT_A, EXTENT_BYTES,
                Opcode.WRITE, expiry, EXTENT_B), record)).as("a MAC over tenant B's grant")
                .isEqualTo(ACCESS_DENIED_VALUE);
            final byte[] tooLong = commitRecord("mine", EXTENT_BYTES + 1);
            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, tooLong.length, EXTENT_A, EXTENT_BYTES,
                Opcode.WRITE, expiry), tooLong)).as("a value longer than the grant").isEqualTo(ACCESS_DENIED_VALUE);
            assertThat(segment.ledger().size()).isZero();

            clock.advanceMillis(60_000);
            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, record.length, EXTENT_A, EXTENT_BYTES,
                Opcode.WRITE, expiry), record)).as("an expired token").isEqualTo(TOKEN_EXPIRED_VALUE);
            assertThat(segment.ledger().size()).isZero();

            assertThat(commit(client, frame(Opcode.COMMIT, EXTENT_A, record.length, EXTENT_A, EXTENT_BYTES,
                Opcode.WRITE, expiresInSeconds(30)), record)).isZero();
        }
        assertThat(segment.ledger().snapshot()).singleElement()
            .satisfies(e -> assertThat(e.offset()).isEqualTo(EXTENT_A))
            .satisfies(e -> assertThat(e.key()).isEqualTo("mine"));
    }

    @Test
    void shouldCommitASlicedWriteFromTheEngineUnderItsWriteToken() throws Exception
    {
        final int length = 3 * 4096 + 100;
        final byte[] writeToken = signer.sign(Opcode.WRITE, segment.id(), EXTENT_B, length, expiresInSeconds(30));
        try (NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig().sliceBytes(4096)))
        {
            final String endpoint = "127.0.0.1:" + server.port();
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(), EXTENT_B,
                ByteBuffer.wrap(randomBytes(length)), length, writeToken, commitRecord("sliced", length)))
                .get(10, TimeUnit.SECONDS)).isZero();
        }
        assertThat(segment.ledger().snapshot()).singleElement()
            .satisfies(e -> assertThat(e.key()).isEqualTo("sliced"));
        assertThat(verifier.verified()).isEqualTo(5); // four slices and the COMMIT
    }

    /** Like {@link #frame} but with the MAC computed over another grant offset and length (a replayed token). */
    private FrameHeader frame(
        final int opcode, final long offset, final int length, final long grantOffset, final long grantLength,
        final int signedOp, final long expirySec, final long signedGrantOffset)
    {
        return frame(opcode, offset, length, grantOffset, grantLength, signedOp, expirySec, signedGrantOffset,
            grantLength);
    }

    private FrameHeader frame(
        final int opcode, final long offset, final int length, final long grantOffset, final long grantLength,
        final int signedOp, final long expirySec, final long signedGrantOffset, final long signedGrantLength)
    {
        final FrameHeader header = frame(opcode, offset, length, grantOffset, grantLength, signedOp, expirySec);
        final byte[] token = signer.sign(signedOp, segment.id(), signedGrantOffset, signedGrantLength, expirySec);
        System.arraycopy(token, 4, header.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
        return header;
    }
}
