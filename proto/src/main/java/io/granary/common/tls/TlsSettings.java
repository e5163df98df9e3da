package io.granary.common.tls;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;

/**
 * Where a process finds its TLS material and whether it asks peers for certificates: PEM files of the
 * certificate chain, its private key (unencrypted PKCS#8) and the trust anchors peers are verified
 * against. TLS is on when any file is given; {@link #DISABLED} is plain text. Immutable and thread safe;
 * {@link TlsMaterial#load} reads and checks the files, {@link TlsContexts} builds the SSL contexts.
 */
public final class TlsSettings
{
    /** Whether a server asks its clients for a certificate (mutual TLS). */
    public enum ClientAuth
    {
        /** Clients are not asked for a certificate. */
        NONE,
        /** Clients may present one; when they do it must chain to the trust anchors. */
        OPTIONAL,
        /** Clients must present a certificate that chains to the trust anchors. */
        REQUIRE;

        /** "none", "optional" or "require" (case-insensitive). @throws IllegalArgumentException otherwise. */
        public static ClientAuth parse(final String text)
        {
            if (text != null)
            {
                switch (text.trim().toLowerCase(Locale.ROOT))
                {
                    case "none": return NONE;
                    case "optional": return OPTIONAL;
                    case "require": return REQUIRE;
                    default: break;
                }
            }
            throw new IllegalArgumentException(
                "--tls-client-auth must be none, optional or require, was '" + text + "'");
        }

        public String flagValue()
        {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Plain text: no TLS on any channel. */
    public static final TlsSettings DISABLED = new TlsSettings(null, null, null, ClientAuth.NONE);

    private final Path certChainFile;
    private final Path privateKeyFile;
    private final Path trustCertsFile;
    private final ClientAuth clientAuth;

    private TlsSettings(
        final Path certChainFile, final Path privateKeyFile, final Path trustCertsFile, final ClientAuth clientAuth)
    {
        this.certChainFile = certChainFile;
        this.privateKeyFile = privateKeyFile;
        this.trustCertsFile = trustCertsFile;
        this.clientAuth = clientAuth == null ? ClientAuth.NONE : clientAuth;
    }

    /**
     * Settings from optional files (null = not given); nothing is read yet.
     *
     * @param certChainFile  PEM certificate chain, leaf first (--tls-cert).
     * @param privateKeyFile PEM PKCS#8 private key of the leaf (--tls-key).
     * @param trustCertsFile PEM trust anchors that peers must chain to (--tls-ca); null trusts the JDK's CAs.
     * @param clientAuth     what a server asks of its clients (--tls-client-auth); null means NONE.
     */
    public static TlsSettings of(
        final Path certChainFile, final Path privateKeyFile, final Path trustCertsFile, final ClientAuth clientAuth)
    {
        if (certChainFile == null && privateKeyFile == null && trustCertsFile == null &&
            (clientAuth == null || clientAuth == ClientAuth.NONE))
        {
            return DISABLED;
        }
        return new TlsSettings(certChainFile, privateKeyFile, trustCertsFile, clientAuth);
    }

    /** {@link #of} from file names; null or blank names mean "not given". */
    public static TlsSettings ofFiles(
        final String certChainFile, final String privateKeyFile, final String trustCertsFile, final ClientAuth clientAuth)
    {
        return of(path(certChainFile), path(privateKeyFile), path(trustCertsFile), clientAuth);
    }

    private static Path path(final String name)
    {
        return name == null || name.isBlank() ? null : Path.of(name.trim());
    }

    /** True when any TLS file is configured: every channel of the process then speaks TLS. */
    public boolean isEnabled()
    {
        return certChainFile != null || privateKeyFile != null || trustCertsFile != null ||
            clientAuth != ClientAuth.NONE;
    }

    /** Null when not given. */
    public Path certChainFile()
    {
        return certChainFile;
    }

    /** Null when not given. */
    public Path privateKeyFile()
    {
        return privateKeyFile;
    }

    /** Null when not given (clients then trust the JDK's default CAs). */
    public Path trustCertsFile()
    {
        return trustCertsFile;
    }

    public ClientAuth clientAuth()
    {
        return clientAuth;
    }

    /**
     * Checks the combination and the files for a process that serves TLS (master, storage node):
     * certificate and key present, readable, parseable and matching; trust anchors when clients must
     * present certificates. A no-op when disabled.
     *
     * @throws IllegalArgumentException naming the flag and the problem.
     */
    public TlsSettings validateForServer()
    {
        if (!isEnabled())
        {
            return this;
        }
        if (certChainFile == null || privateKeyFile == null)
        {
            throw new IllegalArgumentException("TLS on a server needs both --tls-cert and --tls-key" +
                (certChainFile == null && privateKeyFile == null ? "" :
                    certChainFile == null ? " (--tls-key was given without --tls-cert)" :
                        " (--tls-cert was given without --tls-key)"));
        }
        if (clientAuth != ClientAuth.NONE && trustCertsFile == null)
        {
            throw new IllegalArgumentException("--tls-client-auth " + clientAuth.flagValue() +
                " needs --tls-ca (the CA that client certificates must chain to)");
        }
        TlsMaterial.load(this);
        return this;
    }

    /**
     * Checks the combination and the files for a client: a certificate and its key come together (they
     * are presented to servers that ask), the trust anchors must parse. A no-op when disabled.
     *
     * @throws IllegalArgumentException naming the flag and the problem.
     */
    public TlsSettings validateForClient()
    {
        if (!isEnabled())
        {
            return this;
        }
        if ((certChainFile == null) != (privateKeyFile == null))
        {
            throw new IllegalArgumentException(certChainFile == null ?
                "--tls-key was given without --tls-cert (a client certificate needs both)" :
                "--tls-cert was given without --tls-key (a client certificate needs both)");
        }
        TlsMaterial.load(this);
        return this;
    }

    static void requireReadable(final Path file, final String flag)
    {
        if (!Files.exists(file))
        {
            throw new IllegalArgumentException(flag + " " + file + ": no such file");
        }
        if (!Files.isRegularFile(file))
        {
            throw new IllegalArgumentException(flag + " " + file + ": not a regular file");
        }
        if (!Files.isReadable(file))
        {
            throw new IllegalArgumentException(flag + " " + file + ": not readable (check its permissions)");
        }
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof TlsSettings))
        {
            return false;
        }
        final TlsSettings that = (TlsSettings)o;
        return Objects.equals(certChainFile, that.certChainFile) && Objects.equals(privateKeyFile, that.privateKeyFile) &&
            Objects.equals(trustCertsFile, that.trustCertsFile) && clientAuth == that.clientAuth;
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(certChainFile, privateKeyFile, trustCertsFile, clientAuth);
    }

    @Override
    public String toString()
    {
        if (!isEnabled())
        {
            return "TlsSettings[disabled]";
        }
        return "TlsSettings[cert=" + certChainFile + ", key=" + privateKeyFile + ", ca=" +
            (trustCertsFile == null ? "<JDK default>" : trustCertsFile) + ", clientAuth=" + clientAuth.flagValue() + "]";
    }
}
