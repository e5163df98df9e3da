package io.granary.common.tls;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateExpiredException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateNotYetValidException;
import java.security.cert.X509Certificate;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;

/**
 * The parsed contents of a {@link TlsSettings}' PEM files: the certificate chain, its private key and the
 * trust anchors, each checked (the key matches the leaf certificate, the leaf is within its validity).
 * Immutable once loaded; files are read once per {@link #load}.
 */
public final class TlsMaterial
{
    private static final String[] KEY_ALGORITHMS = {"RSA", "EC", "Ed25519", "Ed448", "RSASSA-PSS", "DSA"};
    private static final byte[] PROBE = "granary key check".getBytes(StandardCharsets.US_ASCII);

    private final X509Certificate[] certChain;
    private final PrivateKey privateKey;
    private final X509Certificate[] trustCerts;

    private TlsMaterial(final X509Certificate[] certChain, final PrivateKey privateKey, final X509Certificate[] trustCerts)
    {
        this.certChain = certChain;
        this.privateKey = privateKey;
        this.trustCerts = trustCerts;
    }

    /**
     * Reads and checks every file {@code settings} names.
     *
     * @throws IllegalArgumentException naming the flag, the file and what is wrong with it.
     */
    public static TlsMaterial load(final TlsSettings settings)
    {
        X509Certificate[] chain = null;
        PrivateKey key = null;
        X509Certificate[] trust = null;
        if (settings.certChainFile() != null)
        {
            chain = readCertificates(settings.certChainFile(), "--tls-cert");
            try
            {
                chain[0].checkValidity();
            }
            catch (final CertificateExpiredException ex)
            {
                throw new IllegalArgumentException("--tls-cert " + settings.certChainFile() +
                    ": the certificate expired on " + chain[0].getNotAfter().toInstant(), ex);
            }
            catch (final CertificateNotYetValidException ex)
            {
                throw new IllegalArgumentException("--tls-cert " + settings.certChainFile() +
                    ": the certificate is not valid before " + chain[0].getNotBefore().toInstant(), ex);
            }
        }
        if (settings.privateKeyFile() != null)
        {
            key = readPrivateKey(settings.privateKeyFile());
        }
        if (chain != null && key != null && !matches(key, chain[0].getPublicKey()))
        {
            throw new IllegalArgumentException("--tls-key " + settings.privateKeyFile() +
                " does not belong to the certificate in --tls-cert " + settings.certChainFile());
        }
        if (settings.trustCertsFile() != null)
        {
            trust = readCertificates(settings.trustCertsFile(), "--tls-ca");
        }
        return new TlsMaterial(chain, key, trust);
    }

    /** The certificate chain, leaf first; null when not configured. */
    public X509Certificate[] certChain()
    {
        return certChain == null ? null : certChain.clone();
    }

    /** Null when not configured. */
    public PrivateKey privateKey()
    {
        return privateKey;
    }

    /** The trust anchors; null means the JDK's default CAs. */
    public X509Certificate[] trustCerts()
    {
        return trustCerts == null ? null : trustCerts.clone();
    }

    public boolean hasKeyPair()
    {
        return certChain != null && privateKey != null;
    }

    static X509Certificate[] readCertificates(final Path file, final String flag)
    {
        TlsSettings.requireReadable(file, flag);
        final Collection<? extends java.security.cert.Certificate> parsed;
        try (InputStream in = Files.newInputStream(file))
        {
            parsed = CertificateFactory.getInstance("X.509").generateCertificates(in);
        }
        catch (final IOException ex)
        {
            throw new IllegalArgumentException(flag + " " + file + ": cannot read: " + ex.getMessage(), ex);
        }
        catch (final CertificateException ex)
        {
            throw new IllegalArgumentException(flag + " " + file +
                ": not a PEM certificate file (expected -----BEGIN CERTIFICATE----- blocks): " + ex.getMessage(), ex);
        }
        final List<X509Certificate> certs = new ArrayList<>();
        for (final java.security.cert.Certificate c : parsed)
        {
            if (c instanceof X509Certificate)
            {
                certs.add((X509Certificate)c);
            }
        }
        if (certs.isEmpty())
        {
            throw new IllegalArgumentException(flag + " " + file +
                ": holds no certificate (expected -----BEGIN CERTIFICATE----- blocks)");
        }
        return certs.toArray(new X509Certificate[0]);
    }

    static PrivateKey readPrivateKey(final Path file)
    {
        final String flag = "--tls-key";
        TlsSettings.requireReadable(file, flag);
        final String pem;
        try
        {
            pem = Files.readString(file, StandardCharsets.US_ASCII);
        }
        catch (final IOException ex)
        {
            throw new IllegalArgumentException(flag + " " + file + ": cannot read: " + ex.getMessage(), ex);
        }
        if (pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        {
            throw new IllegalArgumentException(flag + " " + file + ": the key is encrypted; give an unencrypted " +
                "PKCS#8 key (openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8) and protect the file instead");
        }
        final String begin = "-----BEGIN PRIVATE KEY-----";
        final String end = "-----END PRIVATE KEY-----";
        final int from = pem.indexOf(begin);
        final int to = from < 0 ? -1 : pem.indexOf(end, from);
        if (from < 0 || to < 0)
        {
            final boolean legacy = pem.contains("-----BEGIN RSA PRIVATE KEY-----") ||
                pem.contains("-----BEGIN EC PRIVATE KEY-----");
            throw new IllegalArgumentException(flag + " " + file + (legacy ?
                ": the key is in the traditional (PKCS#1/SEC1) PEM form; convert it to PKCS#8 with " +
                    "openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8" :
                ": not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"));
        }
        final byte[] der;
        try
        {
            der = Base64.getMimeDecoder().decode(pem.substring(from + begin.length(), to));
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(flag + " " + file + ": the PEM block is not valid base64", ex);
        }
        final PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        for (final String algorithm : KEY_ALGORITHMS)
        {
            try
            {
                return KeyFactory.getInstance(algorithm).generatePrivate(spec);
            }
            catch (final InvalidKeySpecException | java.security.NoSuchAlgorithmException ex)
            {
                // not this algorithm; try the next
            }
        }
        throw new IllegalArgumentException(flag + " " + file +
            ": cannot parse the PKCS#8 key (supported: RSA, EC, Ed25519, Ed448, DSA)");
    }

    /** True when {@code key} signs what {@code publicKey} verifies: the key pair belongs together. */
    static boolean matches(final PrivateKey key, final PublicKey publicKey)
    {
        if (!key.getAlgorithm().equals(publicKey.getAlgorithm()) &&
            !(key.getAlgorithm().startsWith("Ed") && publicKey.getAlgorithm().startsWith("Ed")))
        {
            return false;
        }
        final String algorithm;
        switch (key.getAlgorithm())
        {
            case "RSA": algorithm = "SHA256withRSA"; break;
            case "EC": algorithm = "SHA256withECDSA"; break;
            case "DSA": algorithm = "SHA256withDSA"; break;
            case "RSASSA-PSS": return true; // needs parameters to sign; the handshake checks it
            default: algorithm = key.getAlgorithm(); break; // Ed25519, Ed448, EdDSA
        }
        try
        {
            final Signature signer = Signature.getInstance(algorithm);
            signer.initSign(key);
            signer.update(PROBE);
            final byte[] signature = signer.sign();
            final Signature verifier = Signature.getInstance(algorithm);
            verifier.initVerify(publicKey);
            verifier.update(PROBE);
            return verifier.verify(signature);
        }
        catch (final GeneralSecurityException ex)
        {
            return false;
        }
    }
}
