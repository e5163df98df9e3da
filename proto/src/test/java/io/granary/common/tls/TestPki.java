package io.granary.common.tls;

import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.ContentSigner;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Certificates made at test time: a CA, and leaf certificates it signs for 127.0.0.1 / localhost that
 * serve as server and client certificates, written as PEM files into a directory. EC P-256 keys (fast).
 * Not thread safe; one per test class.
 */
public final class TestPki
{
    private static final AtomicLong SERIAL = new AtomicLong(System.currentTimeMillis());

    private final Path dir;
    private final String name;
    private final KeyPair caKeys;
    private final X509Certificate caCert;

    private TestPki(final Path dir, final String name)
    {
        this.dir = dir;
        this.name = name;
        try
        {
            caKeys = newKeyPair();
            final X500Name subject = new X500Name("CN=" + name + " test CA");
            final Instant now = Instant.now();
            final X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(subject, serial(),
                Date.from(now.minus(Duration.ofHours(1))), Date.from(now.plus(Duration.ofDays(2))), subject,
                caKeys.getPublic());
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(true));
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
            caCert = sign(builder, caKeys);
            writePem(dir.resolve(name + "-ca.pem"), "CERTIFICATE", caCert.getEncoded());
        }
        catch (final GeneralSecurityException | IOException ex)
        {
            throw new IllegalStateException("cannot make the test CA", ex);
        }
    }

    /** A new CA named {@code name} whose files go into {@code dir}. */
    public static TestPki create(final Path dir, final String name)
    {
        return new TestPki(dir, name);
    }

    /** The CA certificate file (for --tls-ca). */
    public Path caFile()
    {
        return dir.resolve(name + "-ca.pem");
    }

    /** A certificate and key pair, signed by this CA. */
    public static final class Issued
    {
        public final Path certFile;
        public final Path keyFile;

        Issued(final Path certFile, final Path keyFile)
        {
            this.certFile = certFile;
            this.keyFile = keyFile;
        }
    }

    /** A leaf for 127.0.0.1, ::1 and localhost, good for serverAuth and clientAuth, valid now. */
    public Issued issue(final String leafName)
    {
        final Instant now = Instant.now();
        return issue(leafName, now.minus(Duration.ofHours(1)), now.plus(Duration.ofDays(1)), true);
    }

    /** A leaf with the given validity; {@code withLoopbackNames} false leaves out the subject alternative names. */
    public Issued issue(final String leafName, final Instant notBefore, final Instant notAfter,
        final boolean withLoopbackNames)
    {
        try
        {
            final KeyPair keys = newKeyPair();
            final X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(caCert, serial(),
                Date.from(notBefore), Date.from(notAfter), new X500Name("CN=" + leafName), keys.getPublic());
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            builder.addExtension(Extension.keyUsage, true,
                new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyEncipherment));
            builder.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(
                new KeyPurposeId[]{KeyPurposeId.id_kp_serverAuth, KeyPurposeId.id_kp_clientAuth}));
            if (withLoopbackNames)
            {
                builder.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(new GeneralName[]{
                    new GeneralName(GeneralName.iPAddress, "127.0.0.1"),
                    new GeneralName(GeneralName.iPAddress, "::1"),
                    new GeneralName(GeneralName.dNSName, "localhost")}));
            }
            final X509Certificate cert = sign(builder, caKeys);
            final Path certFile = dir.resolve(leafName + ".pem");
            final Path keyFile = dir.resolve(leafName + ".key");
            writePem(certFile, "CERTIFICATE", cert.getEncoded());
            writePem(keyFile, "PRIVATE KEY", keys.getPrivate().getEncoded());
            return new Issued(certFile, keyFile);
        }
        catch (final GeneralSecurityException | IOException ex)
        {
            throw new IllegalStateException("cannot issue " + leafName, ex);
        }
    }

    /** Server settings with this CA as the trust anchor. */
    public TlsSettings serverSettings(final Issued issued, final TlsSettings.ClientAuth clientAuth)
    {
        return TlsSettings.of(issued.certFile, issued.keyFile, caFile(), clientAuth);
    }

    /** Client settings trusting this CA, presenting {@code issued} (null: no client certificate). */
    public TlsSettings clientSettings(final Issued issued)
    {
        return issued == null ? TlsSettings.of(null, null, caFile(), null) :
            TlsSettings.of(issued.certFile, issued.keyFile, caFile(), null);
    }

    private static KeyPair newKeyPair() throws GeneralSecurityException
    {
        final KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"));
        return generator.generateKeyPair();
    }

    private static BigInteger serial()
    {
        return BigInteger.valueOf(SERIAL.incrementAndGet());
    }

    private static X509Certificate sign(final X509v3CertificateBuilder builder, final KeyPair issuer)
        throws GeneralSecurityException
    {
        try
        {
            final ContentSigner signer = new JcaContentSignerBuilder("SHA256withECDSA").build(issuer.getPrivate());
            return new JcaX509CertificateConverter().getCertificate(builder.build(signer));
        }
        catch (final org.bouncycastle.operator.OperatorCreationException ex)
        {
            throw new GeneralSecurityException(ex);
        }
    }

    /** Writes DER bytes as one PEM block. */
    public static void writePem(final Path file, final String type, final byte[] der)
    {
        final String body = Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der);
        final String pem = "-----BEGIN " + type + "-----\n" + body + "\n-----END " + type + "-----\n";
        try
        {
            Files.writeString(file, pem, StandardCharsets.US_ASCII);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
