package io.granary.cli;

import io.granary.common.tls.TestPki;
import io.granary.common.tls.TlsSettings;
import io.granary.master.MasterServer;
import io.granary.node.StorageNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The --tls-* flags: parsed into every context, and bad files or combinations are usage errors (exit 2). */
class TlsFlagsTest
{
    @TempDir
    static Path dir;
    private static TestPki pki;
    private static TestPki.Issued server;

    @BeforeAll
    static void makeCertificates()
    {
        pki = TestPki.create(dir, "flags");
        server = pki.issue("server");
    }

    private static void assertBadInput(final CliRun run, final String... fragments)
    {
        assertThat(run.exitCode()).as(run.toString()).isEqualTo(Granary.EXIT_BAD_INPUT);
        assertThat(run.err()).as(run.toString()).contains(fragments).doesNotContain("\tat ");
        assertThat(run.out()).isEmpty();
    }

    @Test
    void shouldCarryTheTlsFlagsIntoTheMasterAndNodeContexts()
    {
        final MasterServer.Context master = FlagParsingTest.<MasterCommand>parse("master",
            "--tls-cert", server.certFile.toString(), "--tls-key", server.keyFile.toString(),
            "--tls-ca", pki.caFile().toString(), "--tls-client-auth", "require").context().conclude();
        final StorageNode.Context node = FlagParsingTest.<NodeCommand>parse("node", "--master", "127.0.0.1:1",
            "--tls-cert", server.certFile.toString(), "--tls-key", server.keyFile.toString(),
            "--tls-ca", pki.caFile().toString()).context().conclude();

        assertThat(master.tls()).isEqualTo(pki.serverSettings(server, TlsSettings.ClientAuth.REQUIRE));
        assertThat(node.tls()).isEqualTo(pki.serverSettings(server, TlsSettings.ClientAuth.NONE));
        assertThat(FlagParsingTest.<MasterCommand>parse("master").context().tls().isEnabled()).isFalse();
        assertThat(FlagParsingTest.<NodeCommand>parse("node", "--master", "h:1").context().tls().isEnabled()).isFalse();
    }

    @Test
    void shouldRefuseAMissingCertificateFileNamingTheFlag()
    {
        final String missing = dir.resolve("missing.pem").toString();

        assertBadInput(CliRun.run("master", "--port", "0", "--tls-cert", missing, "--tls-key",
            server.keyFile.toString()), "--tls-cert " + missing + ": no such file");
        assertBadInput(CliRun.run("node", "--master", "127.0.0.1:1", "--tls-cert", missing, "--tls-key",
            server.keyFile.toString()), "--tls-cert " + missing + ": no such file");
        assertBadInput(CliRun.run("get", "k", "--tls-ca", missing), "--tls-ca " + missing + ": no such file");
    }

    @Test
    void shouldRefuseAKeyWithoutACertificate()
    {
        assertBadInput(CliRun.run("master", "--tls-key", server.keyFile.toString()),
            "--tls-key was given without --tls-cert");
        assertBadInput(CliRun.run("node", "--master", "127.0.0.1:1", "--tls-key", server.keyFile.toString()),
            "--tls-key was given without --tls-cert");
        assertBadInput(CliRun.run("put", "k", "--value", "v", "--tls-key", server.keyFile.toString()),
            "--tls-key was given without --tls-cert");
    }

    @Test
    void shouldRefuseAFileThatIsNotPem() throws IOException
    {
        final Path garbage = Files.writeString(dir.resolve("garbage.pem"), "not a certificate");

        assertBadInput(CliRun.run("master", "--tls-cert", garbage.toString(), "--tls-key", server.keyFile.toString()),
            "--tls-cert " + garbage);
        assertBadInput(CliRun.run("node", "--master", "127.0.0.1:1", "--tls-cert", server.certFile.toString(),
            "--tls-key", garbage.toString()), "--tls-key " + garbage, "not a PEM private key");
        assertBadInput(CliRun.run("stat", "--tls-ca", garbage.toString()), "--tls-ca " + garbage);
    }

    @Test
    void shouldRefuseClientAuthWithoutACaAndAnUnknownMode()
    {
        assertBadInput(CliRun.run("master", "--tls-cert", server.certFile.toString(), "--tls-key",
            server.keyFile.toString(), "--tls-client-auth", "require"), "--tls-client-auth require needs --tls-ca");
        assertBadInput(CliRun.run("master", "--tls-client-auth", "sometimes"), "--tls-client-auth",
            "must be none, optional or require");
        assertBadInput(CliRun.run("bench", "--tls-client-auth", "require"),
            "--tls-client-auth applies to the in-process servers of --local only");
    }
}
