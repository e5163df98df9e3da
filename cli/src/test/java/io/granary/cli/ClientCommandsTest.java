package io.granary.cli;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class ClientCommandsTest
{
    private static LocalCluster cluster;
    private static String master;

    @BeforeAll
    static void startCluster()
    {
        cluster = LocalCluster.builder().nodes(2).segmentSizeBytes(32L << 20).start();
        master = cluster.masterAddress();
    }

    @AfterAll
    static void stopCluster()
    {
        cluster.close();
    }

    private static CliRun cli(final String... args)
    {
        final String[] withMaster = new String[args.length + 2];
        System.arraycopy(args, 0, withMaster, 0, args.length);
        withMaster[args.length] = "--master";
        withMaster[args.length + 1] = master;
        return CliRun.run(withMaster);
    }

    @Test
    void shouldPutGetListAndRemoveAKey()
    {
        final CliRun put = cli("put", "greeting", "--value", "hello, granary", "--replicas", "2");
        assertThat(put.exitCode()).as(put.toString()).isZero();
        assertThat(put.out()).contains("put \"greeting\": 14 bytes, 2 replicas");

        final CliRun get = cli("get", "greeting");
        assertThat(get.exitCode()).as(get.toString()).isZero();
        assertThat(get.out()).isEqualTo("hello, granary" + System.lineSeparator());

        final CliRun ls = cli("ls", "--regex", "greet.*");
        assertThat(ls.exitCode()).as(ls.toString()).isZero();
        assertThat(ls.out()).contains("KEY").contains("LEASE-LEFT").contains("1 key matching 'greet.*'");
        assertThat(ls.out().lines().filter(l -> l.startsWith("greeting "))
            .filter(l -> l.matches("greeting\\s+14\\s+COMPLETE\\s+2\\s+\\d.*"))).hasSize(1);

        // The get leased the key: a plain remove is refused, a forced one goes through.
        final CliRun refused = cli("rm", "greeting");
        assertThat(refused.exitCode()).isEqualTo(1);
        assertThat(refused.err().strip()).startsWith("error: OBJECT_HAS_LEASE: ");

        final CliRun forced = cli("rm", "greeting", "--force");
        assertThat(forced.exitCode()).as(forced.toString()).isZero();
        assertThat(forced.out()).contains("removed \"greeting\"");
        assertThat(cli("get", "greeting").exitCode()).isEqualTo(1);
    }

    @Test
    void shouldReportAMissingKeyAsObjectNotFound()
    {
        final CliRun run = cli("get", "never-put");

        assertThat(run.exitCode()).isEqualTo(1);
        assertThat(run.err()).startsWith("error: OBJECT_NOT_FOUND: ");
        assertThat(run.err().strip().lines()).hasSize(1);
        assertThat(run.out()).isEmpty();
    }

    @Test
    void shouldDescribeABinaryValueAndWriteItsExactBytesToAFile(@TempDir final Path dir) throws IOException
    {
        final byte[] bytes = new byte[100_000];
        new Random(3).nextBytes(bytes);
        final Path in = dir.resolve("in.bin");
        Files.write(in, bytes);

        assertThat(cli("put", "blob", "--file", in.toString(), "--hard-pin", "--group", "g1").exitCode()).isZero();

        final CliRun described = cli("get", "blob");
        assertThat(described.exitCode()).isZero();
        assertThat(described.out()).contains("100000 bytes").contains("binary")
            .contains("sha256 " + GetCommand.sha256(ByteBuffer.wrap(bytes)));

        final Path out = dir.resolve("out.bin");
        assertThat(cli("get", "blob", "--out", out.toString()).exitCode()).isZero();
        assertThat(Files.readAllBytes(out)).isEqualTo(bytes);

        final CliRun ls = cli("ls", "--regex", "blob");
        assertThat(ls.out().lines().filter(l -> l.startsWith("blob "))
            .filter(l -> l.contains("hard") && l.endsWith("g1"))).hasSize(1);
    }

    @Test
    void shouldRemoveByRegexAndSayWhenAListingIsCutShort()
    {
        for (int i = 0; i < 5; i++)
        {
            assertThat(cli("put", "batch/" + i, "--size", "4k").exitCode()).isZero();
        }

        final CliRun ls = cli("ls", "--regex", "batch/.*", "--limit", "3");
        assertThat(ls.exitCode()).isZero();
        assertThat(ls.out()).contains("3 keys shown; more match");

        final CliRun rm = cli("rm", "--regex", "batch/.*");
        assertThat(rm.exitCode()).as(rm.toString()).isZero();
        assertThat(rm.out()).contains("removed 5 keys matching 'batch/.*'");
        assertThat(cli("ls", "--regex", "batch/.*").out()).contains("0 keys");
    }

    @Test
    void shouldKeepTenantsApart()
    {
        assertThat(cli("put", "shared-name", "--value", "a", "--tenant", "team-a").exitCode()).isZero();

        assertThat(cli("get", "shared-name", "--tenant", "team-b").err()).startsWith("error: OBJECT_NOT_FOUND");
        assertThat(cli("get", "shared-name", "--tenant", "team-a").out()).startsWith("a");
        assertThat(cli("rm", "--all", "--tenant", "team-a").out()).contains("removed");
    }

    @Test
    void shouldRefuseRemoveWithoutExactlyOneTarget()
    {
        assertThat(cli("rm").exitCode()).isEqualTo(2);
        assertThat(cli("rm", "k", "--all").exitCode()).isEqualTo(2);
        assertThat(cli("rm", "--regex", "x.*", "--force").err()).contains("--force applies to a single KEY");
    }

    @Test
    void shouldRefusePutWithoutOrWithTwoValueSources()
    {
        assertThat(cli("put", "k").exitCode()).isEqualTo(2);
        assertThat(cli("put", "k", "--value", "a", "--size", "4k").exitCode()).isEqualTo(2);
        assertThat(cli("put", "k", "--value", "a", "--soft-pin", "later").err()).contains("--soft-pin");
    }

    @Test
    void shouldShowNodesSegmentsAndObjectsInStat()
    {
        assertThat(cli("put", "stat-probe", "--size", "64k").exitCode()).isZero();

        final CliRun run = cli("stat");

        assertThat(run.exitCode()).as(run.toString()).isZero();
        assertThat(run.out()).contains("nodes: 2").contains("segments: 2")
            .contains("local-node-0/seg0").contains("local-node-1/seg0")
            .contains("LARGEST-FREE").contains("capacity: 64.00 MiB");
        assertThat(run.out()).containsPattern("objects: [1-9]");
    }

    @Test
    void shouldSayWhereItLookedWhenNoMasterAnswers() throws IOException
    {
        final int port;
        try (ServerSocket socket = new ServerSocket(0))
        {
            port = socket.getLocalPort();
        }

        final CliRun run = CliRun.run("stat", "--master", "127.0.0.1:" + port, "--timeout", "2s");

        assertThat(run.exitCode()).isEqualTo(1);
        assertThat(run.err()).startsWith("error: RPC_").contains("127.0.0.1:" + port)
            .contains("is a master running at").contains("granary master");
    }
}
