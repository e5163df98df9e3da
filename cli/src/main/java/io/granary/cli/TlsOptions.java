package io.granary.cli;

import io.granary.common.tls.TlsSettings;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * The TLS file flags every command shares: a certificate chain and its key (a server's identity, or the
 * client certificate for mutual TLS) and the trust anchors peers are verified against. Given any of them,
 * every channel the command opens or serves speaks TLS. Servers add {@code --tls-client-auth}.
 */
final class TlsOptions
{
    @Option(names = "--tls-cert", paramLabel = "FILE",
        description = "PEM certificate chain (leaf first): the server's certificate, or the client certificate "
            + "presented to servers that ask. Any --tls-* flag turns TLS on.")
    String certFile;

    @Option(names = "--tls-key", paramLabel = "FILE",
        description = "PEM private key of --tls-cert, unencrypted PKCS#8 (-----BEGIN PRIVATE KEY-----).")
    String keyFile;

    @Option(names = "--tls-ca", paramLabel = "FILE",
        description = "PEM trust anchors: peers' certificates must chain to them (default: the JDK's CAs).")
    String caFile;

    /** The settings of these flags with {@code clientAuth}; files are checked by the context that uses them. */
    TlsSettings settings(final TlsSettings.ClientAuth clientAuth)
    {
        return TlsSettings.ofFiles(certFile, keyFile, caFile, clientAuth);
    }

    /** --tls-client-auth values: none, optional, require (case-insensitive). */
    static final class ClientAuthConverter implements CommandLine.ITypeConverter<TlsSettings.ClientAuth>
    {
        @Override
        public TlsSettings.ClientAuth convert(final String value)
        {
            try
            {
                return TlsSettings.ClientAuth.parse(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException("must be none, optional or require, was '" + value + "'");
            }
        }
    }
}
