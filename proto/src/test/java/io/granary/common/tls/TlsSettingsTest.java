package io.granary.common.tls;

import io.netty.handler.ssl.SslContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.net.ssl.SSLContext;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TlsSettingsTest
{
    @TempDir
    static Path dir;
    private static TestPki pki;
    private static TestPki.Issued server;

    @BeforeAll
    static void makeCertificates()
    {
        pki = TestPki.create(dir, "settings");
        server = pki.issue("server");
    }

    @Test
    void shouldBeDisabledWhenNothingIsGiven()
    {
        final TlsSettings settings = TlsSettings.ofFiles(null, " ", null, null);

        assertThat(settings).isSameAs(TlsSettings.DISABLED);
        assertThat(settings.isEnabled()).isFalse();
        assertThat(TlsContexts.serverContext(settings)).isNull();
        assertThat(TlsContexts.clientContext(settings)).isNull();
        assertThat(TlsContexts.jdkClientContext(settings)).isNull();
    }

    @Test
    void shouldBuildServerAndClientContextsFromPemFiles()
    {
        final SslContext serverContext =
            TlsContexts.serverContext(pki.serverSettings(server, TlsSettings.ClientAuth.REQUIRE));
        final SslContext clientContext = TlsContexts.clientContext(pki.clientSettings(server));
        final SSLContext jdk = TlsContexts.jdkClientContext(pki.clientSettings(null));

        assertThat(serverContext.isServer()).isTrue();
        assertThat(clientContext.isClient()).isTrue();
        assertThat(jdk.getProtocol()).isEqualTo("TLS");
    }

    @Test
    void shouldRefuseAKeyWithoutACertificateAndTheOtherWayRound()
    {
        assertThatThrownBy(() -> TlsSettings.of(null, server.keyFile, null, null).validateForServer())
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("--tls-key was given without --tls-cert");
        assertThatThrownBy(() -> TlsSettings.of(server.certFile, null, null, null).validateForServer())
            .hasMessageContaining("--tls-cert was given without --tls-key");
        assertThatThrownBy(() -> TlsSettings.of(null, server.keyFile, pki.caFile(), null).validateForClient())
            .hasMessageContaining("--tls-key was given without --tls-cert");
        assertThatThrownBy(() -> TlsSettings.of(null, null, pki.caFile(), null).validateForServer())
            .hasMessageContaining("needs both --tls-cert and --tls-key");
    }

    @Test
    void shouldRefuseClientAuthWithoutTrustAnchors()
    {
        assertThatThrownBy(() -> TlsSettings.of(server.certFile, server.keyFile, null, TlsSettings.ClientAuth.REQUIRE)
            .validateForServer())
            .hasMessageContaining("--tls-client-auth require needs --tls-ca");
        assertThatThrownBy(() -> TlsSettings.of(null, null, null, TlsSettings.ClientAuth.OPTIONAL).validateForServer())
            .hasMessageContaining("needs both --tls-cert and --tls-key");
    }

    @Test
    void shouldNameAMissingFile()
    {
        final Path missing = dir.resolve("nope.pem");

        assertThatThrownBy(() -> TlsSettings.of(missing, server.keyFile, null, null).validateForServer())
            .hasMessage("--tls-cert " + missing + ": no such file");
        assertThatThrownBy(() -> TlsSettings.of(null, null, dir, null).validateForClient())
            .hasMessage("--tls-ca " + dir + ": not a regular file");
    }

    @Test
    void shouldRefuseFilesThatAreNotPem() throws IOException
    {
        final Path garbage = Files.writeString(dir.resolve("garbage.pem"), "hello, this is not a certificate\n");

        assertThatThrownBy(() -> TlsSettings.of(garbage, server.keyFile, null, null).validateForServer())
            .hasMessageStartingWith("--tls-cert " + garbage + ":");
        assertThatThrownBy(() -> TlsSettings.of(server.certFile, garbage, null, null).validateForServer())
            .hasMessageContaining("not a PEM private key");
        assertThatThrownBy(() -> TlsSettings.of(null, null, garbage, null).validateForClient())
            .hasMessageStartingWith("--tls-ca " + garbage + ":");
    }

    @Test
    void shouldExplainHowToConvertTraditionalAndEncryptedKeys() throws IOException
    {
        final Path rsa = Files.writeString(dir.resolve("rsa.key"),
            "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n");
        final Path encrypted = Files.writeString(dir.resolve("enc.key"),
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n");

        assertThatThrownBy(() -> TlsSettings.of(server.certFile, rsa, null, null).validateForServer())
            .hasMessageContaining("openssl pkcs8 -topk8 -nocrypt");
        assertThatThrownBy(() -> TlsSettings.of(server.certFile, encrypted, null, null).validateForServer())
            .hasMessageContaining("the key is encrypted");
    }

    @Test
    void shouldRefuseAKeyThatDoesNotBelongToTheCertificate()
    {
        final TestPki.Issued other = pki.issue("other");

        assertThatThrownBy(() -> TlsSettings.of(server.certFile, other.keyFile, null, null).validateForServer())
            .hasMessageContaining("does not belong to the certificate");
    }

    @Test
    void shouldRefuseAnExpiredCertificate()
    {
        final Instant now = Instant.now();
        final TestPki.Issued expired = pki.issue("expired", now.minus(Duration.ofDays(3)),
            now.minus(Duration.ofDays(1)), true);

        assertThatThrownBy(() -> TlsSettings.of(expired.certFile, expired.keyFile, null, null).validateForServer())
            .hasMessageContaining("the certificate expired on");
    }

    @Test
    void shouldParseClientAuthNamesAndRefuseOthers()
    {
        assertThat(TlsSettings.ClientAuth.parse("Require")).isEqualTo(TlsSettings.ClientAuth.REQUIRE);
        assertThat(TlsSettings.ClientAuth.parse("none")).isEqualTo(TlsSettings.ClientAuth.NONE);
        assertThat(TlsSettings.ClientAuth.parse(" optional ")).isEqualTo(TlsSettings.ClientAuth.OPTIONAL);
        assertThatThrownBy(() -> TlsSettings.ClientAuth.parse("always"))
            .hasMessageContaining("--tls-client-auth must be none, optional or require");
    }
}
