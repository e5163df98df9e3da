package io.granary.cli;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.tls.TestPki;
import io.granary.common.tls.TlsSettings;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A whole cluster over TLS with client certificates required on every port (master gRPC, master lookup port,
 * node transfer ports; nodes present theirs to the master): every byte comes back intact, and clients that do
 * not trust the cluster's CA, present no certificate or speak plain text are refused with a clear code.
 */
class TlsClusterTest
{
    /** Long enough that a refusal must come from the handshake rather than a deadline. */
    private static final Duration RPC_TIMEOUT = Duration.ofSeconds(30);

    @TempDir
    static Path dir;
    private static TestPki pki;
    private static TestPki stranger;
    private static TestPki.Issued client;
    private static LocalCluster cluster;

    @BeforeAll
    static void startCluster()
    {
        pki = TestPki.create(dir, "cluster");
        stranger = TestPki.create(dir, "stranger");
        final TestPki.Issued server = pki.issue("server");
        client = pki.issue("client");
        cluster = LocalCluster.builder()
            .nodes(2)
            .segmentSizeBytes(32L << 20)
            .tls(pki.serverSettings(server, TlsSettings.ClientAuth.REQUIRE), pki.clientSettings(client))
            .start();
    }

    @AfterAll
    static void stopCluster()
    {
        if (cluster != null)
        {
            cluster.close();
        }
    }

    @Test
    void shouldServePutsAndGetsOverTlsOnAllThreeChannelsWithEveryByteIntact()
    {
        for (final StorageNode node : cluster.nodes())
        {
            assertThat(node.transferServer().tlsEnabled()).isTrue();
        }
        final Random random = new Random(7);
        final GranaryClient c = cluster.newClient(cluster.clientConfig().rpcTimeout(RPC_TIMEOUT).build());
        final int[] sizes = {1, 100, 4096, 65_536 + 1, (1 << 20) + 17, 3 << 20};
        final List<byte[]> values = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++)
        {
            final byte[] value = new byte[sizes[i]];
            random.nextBytes(value);
            values.add(value);
            c.put("tls/single/" + i, ByteBuffer.wrap(value),
                PutOptions.builder().replicas(2).build());
        }
        for (int i = 0; i < sizes.length; i++)
        {
            assertThat(c.get("tls/single/" + i)).as("value %d", i)
                .isEqualTo(values.get(i));
        }

        final List<String> keys = new ArrayList<>();
        final List<ByteBuffer> batch = new ArrayList<>();
        final List<byte[]> batchValues = new ArrayList<>();
        for (int i = 0; i < 64; i++)
        {
            final byte[] value = new byte[1 + random.nextInt(20_000)];
            random.nextBytes(value);
            keys.add("tls/batch/" + i);
            batch.add(ByteBuffer.wrap(value));
            batchValues.add(value);
        }
        assertThat(c.putBatch(keys, batch, PutOptions.defaults())).allMatch(r -> r.ok());
        final List<OpResult<byte[]>> read = c.getBatch(keys);
        for (int i = 0; i < keys.size(); i++)
        {
            assertThat(read.get(i).ok()).as("batch get %d", i).isTrue();
            assertThat(read.get(i).value()).as("batch value %d", i).isEqualTo(batchValues.get(i));
        }
        assertThat(c.existsBatch(keys)).allMatch(r -> r.ok() && r.value());
        assertThat(cluster.master().lookupRequests()).as("lookups went over the TLS lookup port").isPositive();
    }

    @Test
    void shouldRefuseAClientThatDoesNotTrustTheClustersCa()
    {
        final TestPki.Issued foreign = stranger.issue("foreign-client");
        final GranaryClient c = cluster.newClient(cluster.clientConfig().rpcTimeout(RPC_TIMEOUT)
            .tls(TlsSettings.of(foreign.certFile, foreign.keyFile, stranger.caFile(), null)).build());

        assertThatThrownBy(() -> c.put("tls/stranger", new byte[]{1}))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
        assertThatThrownBy(() -> c.exists("tls/stranger"))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
    }

    @Test
    void shouldRefuseAClientWithoutACertificateWhenClientAuthIsRequired()
    {
        final GranaryClient c = cluster.newClient(cluster.clientConfig().rpcTimeout(RPC_TIMEOUT)
            .tls(pki.clientSettings(null)).build());

        assertThatThrownBy(() -> c.put("tls/anonymous", new byte[]{1}))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
        assertThatThrownBy(() -> c.get("tls/anonymous"))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
    }

    @Test
    void shouldFailAPlainTextClientCleanlyWithoutWaitingForTheDeadline()
    {
        final GranaryClient c = cluster.newClient(cluster.clientConfig().rpcTimeout(RPC_TIMEOUT)
            .tls(TlsSettings.DISABLED).build());

        assertThatThrownBy(() -> c.put("tls/plain", new byte[]{1}))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
        assertThatThrownBy(() -> c.exists("tls/plain"))
            .isInstanceOfSatisfying(GranaryException.class, ex -> assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL));
    }
}
