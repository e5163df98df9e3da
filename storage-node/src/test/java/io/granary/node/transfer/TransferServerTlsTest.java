package io.granary.node.transfer;

import io.granary.common.tls.TestPki;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The transfer server and the Java engine over TLS: bytes intact, and every misconfiguration refused cleanly. */
class TransferServerTlsTest
{
    private static final long SEGMENT_BYTES = 16L << 20;
    private static final int MAX_FRAME_BYTES = 4 << 20;
    /** Far longer than any refusal takes: a refusal must come from the handshake, not from this timeout. */
    private static final long TRANSFER_TIMEOUT_MS = 60_000;

    @TempDir
    static Path dir;
    private static TestPki pki;
    private static TestPki otherPki;
    private static TestPki.Issued node;
    private static TestPki.Issued client;

    private final List<AutoCloseable> resources = new ArrayList<>();
    private final Random random = new Random(42);
    private SegmentRegistry registry;
    private Segment segment;
    private TransferServer server;

    @BeforeAll
    static void makeCertificates()
    {
        pki = TestPki.create(dir, "cluster");
        otherPki = TestPki.create(dir, "stranger");
        node = pki.issue("node");
        client = pki.issue("client");
    }

    @BeforeEach
    void allocate()
    {
        registry = new SegmentRegistry();
        segment = registry.allocate("tls/seg0", SEGMENT_BYTES);
    }

    @AfterEach
    void close() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
        registry.close();
    }

    private String startServer(final TlsSettings tls)
    {
        server = new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 1, true, tls).start();
        resources.add(server);
        return "127.0.0.1:" + server.port();
    }

    private NettyTransferEngine engine(final TlsSettings tls)
    {
        final NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()
            .lanesPerPeer(2).sliceBytes(256 << 10).transferTimeoutMs(TRANSFER_TIMEOUT_MS).tls(tls));
        resources.add(engine);
        return engine;
    }

    private static int write(final NettyTransferEngine engine, final String endpoint, final int segmentId,
        final long offset, final byte[] content) throws Exception
    {
        return engine.submit(TransferRequest.write(endpoint, segmentId, offset, ByteBuffer.wrap(content),
            content.length)).get(2 * TRANSFER_TIMEOUT_MS, TimeUnit.MILLISECONDS);
    }

    private byte[] randomBytes(final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    @Test
    void shouldMoveEveryByteIntactOverTls() throws Exception
    {
        final String endpoint = startServer(pki.serverSettings(node, TlsSettings.ClientAuth.NONE));
        final NettyTransferEngine engine = engine(pki.clientSettings(null));
        assertThat(engine.tlsEnabled()).isTrue();
        final int[] sizes = {1, 63, 4096, 65_537, (1 << 20) + 3, 3 << 20};
        long offset = 7;
        for (final int size : sizes)
        {
            final byte[] content = randomBytes(size);

            assertThat(write(engine, endpoint, segment.id(), offset, content)).as("write of %d bytes", size).isZero();
            final byte[] stored = new byte[size];
            new UnsafeBuffer(segment.address() + offset, size).getBytes(0, stored);
            assertThat(stored).as("segment after a write of %d bytes", size).isEqualTo(content);

            final ByteBuffer target = ByteBuffer.allocateDirect(size);
            assertThat(engine.submit(TransferRequest.read(endpoint, segment.id(), offset, target, size))
                .get(2 * TRANSFER_TIMEOUT_MS, TimeUnit.MILLISECONDS)).as("read of %d bytes", size).isZero();
            final byte[] read = new byte[size];
            target.get(read);
            assertThat(read).as("read back %d bytes", size).isEqualTo(content);
            offset += size + 11;
        }
    }

    /**
     * Small values with their records leave as WRITEVs over TLS as well: every byte lands, every record reaches the
     * ledger. The engine's event loop may drain each submit alone on a busy machine, so rounds repeat (each checked in
     * full) until the node has served a WRITEV.
     */
    @Test
    void shouldPutSmallValuesWithTheirRecordsAsWriteVectorsOverTls() throws Exception
    {
        final String endpoint = startServer(pki.serverSettings(node, TlsSettings.ClientAuth.NONE));
        final NettyTransferEngine engine = engine(pki.clientSettings(null));
        for (int round = 1; round <= 20 && server.writeVectors() == 0; round++)
        {
            final List<byte[]> contents = new ArrayList<>();
            final List<CompletableFuture<Integer>> futures = new ArrayList<>();
            for (int i = 0; i < 64; i++)
            {
                final byte[] value = randomBytes(1 + random.nextInt(16 << 10));
                contents.add(value);
                futures.add(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, segment.id(),
                    i * 32_768L, ByteBuffer.wrap(value), value.length, null,
                    new CommitRecord(0, "tenant-a", "t" + i, "", value.length, round * 100L + i, 0, 0).encode())));
            }
            for (int i = 0; i < contents.size(); i++)
            {
                assertThat(futures.get(i).get(2 * TRANSFER_TIMEOUT_MS, TimeUnit.MILLISECONDS)).as("value %d", i)
                    .isZero();
                final byte[] stored = new byte[contents.get(i).length];
                new UnsafeBuffer(segment.address() + i * 32_768L, stored.length).getBytes(0, stored);
                assertThat(stored).as("bytes of value %d", i).isEqualTo(contents.get(i));
            }
            final long version = round * 100L;
            assertThat(segment.ledger().snapshot()).hasSize(contents.size()).allSatisfy(e ->
            {
                final int i = (int)(e.offset() / 32_768L);
                assertThat(e.key()).isEqualTo("t" + i);
                assertThat(e.valueLength()).isEqualTo(contents.get(i).length);
                assertThat(e.version()).isEqualTo(version + i);
            });
        }
        assertThat(server.writeVectors()).as("WRITEV frames the node served").isPositive();
    }

    @Test
    void shouldRefuseAnEngineThatDoesNotTrustTheNodesCa() throws Exception
    {
        final String endpoint = startServer(pki.serverSettings(node, TlsSettings.ClientAuth.NONE));
        final NettyTransferEngine stranger = engine(otherPki.clientSettings(null));
        final byte[] before = new byte[64];
        new UnsafeBuffer(segment.address(), 64).getBytes(0, before);

        assertThat(write(stranger, endpoint, segment.id(), 0, randomBytes(64))).isEqualTo(TRANSFER_FAIL_VALUE);
        final byte[] after = new byte[64];
        new UnsafeBuffer(segment.address(), 64).getBytes(0, after);
        assertThat(after).isEqualTo(before);
    }

    @Test
    void shouldRequireAClientCertificateWhenClientAuthIsRequire() throws Exception
    {
        final String endpoint = startServer(pki.serverSettings(node, TlsSettings.ClientAuth.REQUIRE));

        assertThat(write(engine(pki.clientSettings(null)), endpoint, segment.id(), 0, randomBytes(100)))
            .as("no client certificate").isEqualTo(TRANSFER_FAIL_VALUE);
        final TestPki.Issued foreign = otherPki.issue("foreign-client");
        assertThat(write(engine(TlsSettings.of(foreign.certFile, foreign.keyFile, pki.caFile(), null)), endpoint,
            segment.id(), 0, randomBytes(100))).as("a certificate of another CA").isEqualTo(TRANSFER_FAIL_VALUE);
        final byte[] content = randomBytes(100);
        assertThat(write(engine(pki.clientSettings(client)), endpoint, segment.id(), 0, content))
            .as("a certificate of the cluster CA").isZero();
        final byte[] stored = new byte[100];
        new UnsafeBuffer(segment.address(), 100).getBytes(0, stored);
        assertThat(stored).isEqualTo(content);
    }

    @Test
    void shouldFailAPlainTextEngineAgainstATlsNodeWithoutWaitingForTheTimeout() throws Exception
    {
        final String endpoint = startServer(pki.serverSettings(node, TlsSettings.ClientAuth.NONE));

        assertThat(write(engine(TlsSettings.DISABLED), endpoint, segment.id(), 0, randomBytes(32)))
            .isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @Test
    void shouldFailATlsEngineAgainstAPlainTextNodeWithoutWaitingForTheTimeout() throws Exception
    {
        final String endpoint = startServer(TlsSettings.DISABLED);

        assertThat(write(engine(pki.clientSettings(null)), endpoint, segment.id(), 0, randomBytes(32)))
            .isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @Test
    void shouldRefuseANodeWhoseCertificateDoesNotNameItsAddress() throws Exception
    {
        final Instant now = Instant.now();
        final TestPki.Issued anonymous = pki.issue("anonymous-node", now.minus(Duration.ofHours(1)),
            now.plus(Duration.ofHours(1)), false);
        final String endpoint = startServer(pki.serverSettings(anonymous, TlsSettings.ClientAuth.NONE));

        assertThat(write(engine(pki.clientSettings(null)), endpoint, segment.id(), 0, randomBytes(32)))
            .isEqualTo(TRANSFER_FAIL_VALUE);
    }

    @Test
    void shouldRefuseToStartWithUnusableTlsFiles()
    {
        assertThatThrownBy(() -> new TransferServer("127.0.0.1", 0, registry, MAX_FRAME_BYTES, 1, true,
            TlsSettings.of(node.certFile, null, null, null)))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("--tls-cert was given without --tls-key");
        assertThatThrownBy(() -> new NettyTransferEngine(new TransferConfig()
            .tls(TlsSettings.of(null, null, dir.resolve("missing-ca.pem"), null))))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("missing-ca.pem: no such file");
    }
}
