package io.granary.it;

import io.granary.cli.LocalCluster;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.ManualClock;
import io.granary.master.meta.MetadataStore;
import io.granary.node.StorageNode;
import io.granary.node.segment.Segment;
import io.granary.proto.Replica;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * End-to-end integrity and data-plane access control in an in-process cluster (real master, nodes, client and
 * sockets): a page corrupted in a node's segment memory behind the master's back is never returned as a success, and
 * a client cannot read another tenant's extent or forge an offset, with its own token or none.
 */
class IntegrityClusterTest
{
    private static final long SEGMENT_BYTES = 32L << 20;
    private static final Duration WAIT = Duration.ofSeconds(10);

    private static byte[] randomValue(final int length, final long seed)
    {
        final byte[] value = new byte[length];
        new Random(seed).nextBytes(value);
        return value;
    }

    /** The replicas the master holds for a key (asking grants a lease, like a get, and tokens when they are on). */
    private static List<Replica> replicasOf(final LocalCluster cluster, final String tenant, final String key)
    {
        final MetadataStore.Lookup lookup = new MetadataStore.Lookup();
        cluster.master().store().getReplicaList(tenant, key, lookup);
        assertThat(lookup.code).as("replica list of " + key).isZero();
        return lookup.replicas;
    }

    private static Segment segmentOf(final LocalCluster cluster, final Replica replica)
    {
        for (final StorageNode node : cluster.nodes())
        {
            for (final Segment segment : node.segments())
            {
                if (segment.id() == replica.getSegmentId() && node.endpoint().equals(replica.getEndpoint()))
                {
                    return segment;
                }
            }
        }
        throw new AssertionError("no segment holds " + replica);
    }

    /** Flips bits of one 4 KiB page of the replica's extent, writing straight into the node's segment memory. */
    private static void corruptPage(final LocalCluster cluster, final Replica replica, final int page)
    {
        final Segment segment = segmentOf(cluster, replica);
        final UnsafeBuffer memory = new UnsafeBuffer(segment.address() + replica.getOffset(), (int)replica.getLength());
        final int at = page * Segment.PAGE_SIZE_BYTES + 123;
        memory.putByte(at, (byte)(memory.getByte(at) ^ 0x5A));
    }

    private static GranaryException thrown(final Runnable call)
    {
        return catchThrowableOfType(GranaryException.class, call::run);
    }

    // ------------------------------------------------------------------------------------------- checksums

    /**
     * Each transport checks differently: the native engine checksums the bytes while they arrive (over TCP, driven by
     * the caller or by its own thread), the Java engines after the transfer; none may return the corrupt page.
     */
    @ParameterizedTest
    @CsvSource({"JAVA,true", "JAVA,false", "NATIVE,true", "NATIVE,false"})
    void shouldAnswerChecksumMismatchForACorruptPageOfTheOnlyReplica(final TransportKind transport,
        final boolean callerDriven)
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(SEGMENT_BYTES).start())
        {
            final GranaryClient client =
                cluster.newClient(cluster.clientConfig().transport(transport).callerDriven(callerDriven).build());
            final byte[] value = randomValue(64 << 10, 1);
            client.put("page", value);
            client.put("intact", randomValue(4096, 2));
            assertThat(client.get("page")).isEqualTo(value);

            corruptPage(cluster, replicasOf(cluster, "default", "page").get(0), 7);

            assertThat(thrown(() -> client.get("page")).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
            final ByteBuffer into = ByteBuffer.allocateDirect(value.length);
            assertThat(thrown(() -> client.getInto("page", into)).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
            assertThat(into.position()).isZero();
            final List<OpResult<byte[]>> batch = client.getBatch(List.of("page", "intact"));
            assertThat(batch.get(0).error()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
            assertThat(batch.get(1).ok()).isTrue();
            final List<OpResult<Integer>> intoBatch = client.getBatchInto(List.of("page", "intact"),
                List.of(ByteBuffer.allocateDirect(value.length), ByteBuffer.allocateDirect(4096)));
            assertThat(intoBatch.get(0).error()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
            assertThat(intoBatch.get(1).value()).isEqualTo(4096);
            final Throwable async = catchThrowableOfType(Exception.class,
                () -> client.async().get("page").get(10, TimeUnit.SECONDS));
            assertThat(((GranaryException)async.getCause()).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        }
    }

    @Test
    void shouldReturnTheGoodBytesFromTheOtherReplicaWhenOneIsCorrupt()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(SEGMENT_BYTES).start())
        {
            final GranaryClient client = cluster.newClient();
            final byte[] value = randomValue((3 << 20) + 17, 3); // several slices
            client.put("page", ByteBuffer.wrap(value), PutOptions.builder().replicas(2).build());
            final List<Replica> replicas = replicasOf(cluster, "default", "page");
            assertThat(replicas).hasSize(2);

            corruptPage(cluster, replicas.get(0), 300);
            for (int i = 0; i < 4; i++)
            {
                assertThat(client.get("page")).as("read %d", i).isEqualTo(value);
            }
            assertThat(client.getBatch(List.of("page")).get(0).value()).isEqualTo(value);

            corruptPage(cluster, replicas.get(1), 1);
            assertThat(thrown(() -> client.get("page")).code()).as("both replicas bad")
                .isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        }
    }

    @Test
    void shouldReturnUncheckedBytesOnlyWhenTheWriterRecordedNoChecksum()
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(SEGMENT_BYTES).start())
        {
            final GranaryClient unchecked = cluster.newClient(cluster.clientConfig().checksums(false).build());
            final GranaryClient checked = cluster.newClient();
            final byte[] value = randomValue(8192, 4);
            unchecked.put("no-crc", value);
            corruptPage(cluster, replicasOf(cluster, "default", "no-crc").get(0), 1);

            assertThat(checked.get("no-crc")).as("nothing to check against").isNotEqualTo(value).hasSize(8192);
        }
    }

    // ------------------------------------------------------------------------------------------- tokens

    @Test
    void shouldRefuseAClientReadingAnotherTenantsExtentWithItsOwnTokenOrForgingAnOffset() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(SEGMENT_BYTES).start();
             NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()))
        {
            final GranaryClient tenantA = cluster.newClient(cluster.clientConfig().tenant("tenant-a").build());
            final GranaryClient tenantB = cluster.newClient(cluster.clientConfig().tenant("tenant-b").build());
            final byte[] mine = randomValue(16 << 10, 5);
            final byte[] secret = randomValue(16 << 10, 6);
            tenantA.put("mine", mine);
            tenantB.put("secret", secret);
            assertThat(tenantA.get("mine")).isEqualTo(mine);
            assertThat(thrown(() -> tenantA.get("secret")).code()).as("tenants never see each other's keys")
                .isEqualTo(ErrorCode.OBJECT_NOT_FOUND);

            final Replica a = replicasOf(cluster, "tenant-a", "mine").get(0);
            final Replica b = replicasOf(cluster, "tenant-b", "secret").get(0);
            assertThat(a.getAccessToken().size()).isEqualTo(FrameDescriptor.ACCESS_TOKEN_LENGTH);
            final byte[] tokenOfA = a.getAccessToken().toByteArray();
            assertThat(b.getOffset()).as("B's extent lies after A's in the fresh segment").isGreaterThan(a.getOffset());
            final String endpoint = b.getEndpoint();

            // A's own token works for A's extent, through the engine a client uses.
            final ByteBuffer own = ByteBuffer.allocate((int)a.getLength());
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, a.getSegmentId(),
                a.getOffset(), own, (int)a.getLength(), tokenOfA)).get(10, TimeUnit.SECONDS)).isZero();
            assertThat(own.array()).isEqualTo(mine);

            // B's extent (offset and length from the master's replica list) with A's token.
            final ByteBuffer stolen = ByteBuffer.allocate((int)b.getLength());
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.READ, endpoint, b.getSegmentId(),
                b.getOffset(), stolen, (int)b.getLength(), tokenOfA)).get(10, TimeUnit.SECONDS))
                .isEqualTo(ErrorCode.ACCESS_DENIED.code());
            // ... or with no token at all.
            assertThat(engine.submit(TransferRequest.read(endpoint, b.getSegmentId(), b.getOffset(), stolen,
                (int)b.getLength())).get(10, TimeUnit.SECONDS)).isEqualTo(ErrorCode.ACCESS_DENIED.code());
            assertThat(stolen.array()).as("no byte of B's value arrived").containsOnly(0);

            // Forged frames: A's grant honestly stated but the offset moved onto B, and A's grant stretched to B.
            try (RawFrames raw = new RawFrames(cluster.nodes().get(0).transferPort()))
            {
                assertThat(raw.read(b.getSegmentId(), b.getOffset(), (int)b.getLength(), b.getOffset() - a.getOffset(),
                    a.getLength(), tokenOfA)).isEqualTo(ErrorCode.ACCESS_DENIED.code());
                final long stretched = b.getOffset() + b.getLength() - a.getOffset();
                assertThat(raw.read(b.getSegmentId(), b.getOffset(), (int)b.getLength(),
                    b.getOffset() - a.getOffset(), stretched, tokenOfA)).isEqualTo(ErrorCode.ACCESS_DENIED.code());
                assertThat(raw.read(a.getSegmentId(), a.getOffset(), (int)a.getLength(), 0, a.getLength(), tokenOfA))
                    .as("the connection stays usable for a valid frame").isZero();
            }
            assertThat(tenantB.get("secret")).isEqualTo(secret);
            assertThat(cluster.nodes().get(0).transferServer().tokenVerifier().refusedInvalid()).isEqualTo(3);
            assertThat(cluster.nodes().get(0).transferServer().tokenVerifier().refusedMissing()).isEqualTo(1);
        }
    }

    @Test
    void shouldRefuseAnExpiredTokenWhileClientsGoOnWithFreshOnes() throws Exception
    {
        final ManualClock clock = new ManualClock();
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(SEGMENT_BYTES)
                 .masterContext(LocalCluster.defaultMasterContext().clock(clock).nodeTtl(Duration.ofMinutes(10)))
                 .nodeContext(ctx -> ctx.clock(clock))
                 .start();
             NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()))
        {
            final GranaryClient client = cluster.newClient();
            final byte[] value = randomValue(5000, 7);
            client.put("k", value);
            final Replica replica = replicasOf(cluster, "default", "k").get(0);

            clock.advance(Duration.ofSeconds(11)); // past the 10 s lease the token was issued for
            final ByteBuffer into = ByteBuffer.allocate(5000);
            assertThat(engine.submit(new TransferRequest(TransferRequest.Op.READ, replica.getEndpoint(),
                replica.getSegmentId(), replica.getOffset(), into, 5000, replica.getAccessToken().toByteArray()))
                .get(10, TimeUnit.SECONDS)).isEqualTo(ErrorCode.TOKEN_EXPIRED.code());

            assertThat(client.get("k")).as("a get asks for a fresh token").isEqualTo(value);
        }
    }

    @Test
    void shouldServeTokenlessFramesWhenTheMasterIssuesNoTokens() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(SEGMENT_BYTES)
                 .masterContext(LocalCluster.defaultMasterContext().dataTokens(false))
                 .start();
             NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()))
        {
            final GranaryClient client = cluster.newClient();
            final byte[] value = randomValue(4096, 8);
            client.put("open", value);
            final Replica replica = replicasOf(cluster, "default", "open").get(0);
            assertThat(replica.getAccessToken().isEmpty()).isTrue();
            assertThat(cluster.nodes().get(0).transferServer().tokenVerifier().tokensRequired()).isFalse();

            final ByteBuffer into = ByteBuffer.allocate(4096);
            assertThat(engine.submit(TransferRequest.read(replica.getEndpoint(), replica.getSegmentId(),
                replica.getOffset(), into, 4096)).get(10, TimeUnit.SECONDS)).isZero();
            assertThat(into.array()).isEqualTo(value);
        }
    }

    /** Hand-made READ frames on one connection, as a client bent on forging them would send. */
    private static final class RawFrames implements AutoCloseable
    {
        private final Socket socket;
        private final DataInputStream in;
        private long requestId;

        RawFrames(final int port) throws IOException
        {
            socket = new Socket(InetAddress.getLoopbackAddress(), port);
            socket.setSoTimeout((int)WAIT.toMillis());
            in = new DataInputStream(socket.getInputStream());
        }

        /** Sends a READ with the given grant fields and token; returns the status (payload read and dropped). */
        int read(final int segmentId, final long offset, final int length, final long grantDelta,
            final long grantLength, final byte[] token) throws IOException
        {
            final FrameHeader request = new FrameHeader().set(Opcode.READ, ++requestId, segmentId, offset, length);
            request.grantDelta = grantDelta;
            request.grantLength = grantLength;
            request.tokenExpirySec = ByteBuffer.wrap(token).getInt() & 0xFFFF_FFFFL;
            System.arraycopy(token, 4, request.tokenMac, 0, FrameDescriptor.TOKEN_MAC_LENGTH);
            final ByteBuf out = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
            try
            {
                request.encode(out);
                socket.getOutputStream().write(out.array(), out.arrayOffset(), FrameDescriptor.HEADER_LENGTH);
                socket.getOutputStream().flush();
            }
            finally
            {
                out.release();
            }
            final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
            in.readFully(bytes);
            final FrameHeader response = new FrameHeader();
            final ByteBuf wrapped = Unpooled.wrappedBuffer(bytes);
            assertThat(response.decode(wrapped, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT)).isZero();
            wrapped.release();
            assertThat(response.requestId).isEqualTo(requestId);
            if (response.status == 0)
            {
                in.skipNBytes(length);
            }
            return response.status;
        }

        @Override
        public void close() throws IOException
        {
            socket.close();
        }
    }
}
