package io.granary.common.tls;

import io.netty.channel.Channel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.NotSslRecordException;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.concurrent.Future;
import org.slf4j.Logger;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.X509Certificate;

/**
 * Builds the SSL contexts of every Granary channel from {@link TlsSettings} (JDK provider: no native
 * library) and puts {@link SslHandler}s at the head of Netty pipelines. Clients verify the server's
 * certificate against the trust anchors and its host name or address (the certificate's subject
 * alternative names). Stateless and thread safe; build a context once per server or engine.
 */
public final class TlsContexts
{
    private TlsContexts()
    {
    }

    /**
     * A server context builder (for gRPC to add its ALPN settings), or null when TLS is disabled.
     *
     * @throws IllegalArgumentException when the settings or files are bad for a server.
     */
    public static SslContextBuilder serverBuilder(final TlsSettings settings)
    {
        if (!settings.validateForServer().isEnabled())
        {
            return null;
        }
        final TlsMaterial material = TlsMaterial.load(settings);
        final SslContextBuilder builder = SslContextBuilder.forServer(material.privateKey(), material.certChain())
            .sslProvider(SslProvider.JDK)
            .clientAuth(clientAuth(settings.clientAuth()));
        if (material.trustCerts() != null)
        {
            builder.trustManager(material.trustCerts());
        }
        return builder;
    }

    /** A client context builder, or null when TLS is disabled. @throws IllegalArgumentException for bad settings. */
    public static SslContextBuilder clientBuilder(final TlsSettings settings)
    {
        if (!settings.validateForClient().isEnabled())
        {
            return null;
        }
        final TlsMaterial material = TlsMaterial.load(settings);
        final SslContextBuilder builder = SslContextBuilder.forClient()
            .sslProvider(SslProvider.JDK)
            .endpointIdentificationAlgorithm("HTTPS");
        if (material.trustCerts() != null)
        {
            builder.trustManager(material.trustCerts());
        }
        if (material.hasKeyPair())
        {
            builder.keyManager(material.privateKey(), material.certChain());
        }
        return builder;
    }

    /** The server context of a framed (non-gRPC) port, or null when TLS is disabled. */
    public static SslContext serverContext(final TlsSettings settings)
    {
        return build(serverBuilder(settings));
    }

    /** The client context of a framed (non-gRPC) connection, or null when TLS is disabled. */
    public static SslContext clientContext(final TlsSettings settings)
    {
        return build(clientBuilder(settings));
    }

    /** Builds {@code builder} (null stays null); an SSLException becomes an IllegalArgumentException. */
    public static SslContext build(final SslContextBuilder builder)
    {
        if (builder == null)
        {
            return null;
        }
        try
        {
            return builder.build();
        }
        catch (final SSLException ex)
        {
            throw new IllegalArgumentException("cannot set up TLS: " + ex.getMessage(), ex);
        }
    }

    /**
     * A JDK context for blocking client sockets (the lookup client), or null when TLS is disabled. Callers
     * must turn on host name verification on each socket ({@code SSLParameters.setEndpointIdentificationAlgorithm}).
     */
    public static SSLContext jdkClientContext(final TlsSettings settings)
    {
        if (!settings.validateForClient().isEnabled())
        {
            return null;
        }
        final TlsMaterial material = TlsMaterial.load(settings);
        try
        {
            KeyManagerFactory keyManagers = null;
            if (material.hasKeyPair())
            {
                final KeyStore keys = KeyStore.getInstance("PKCS12");
                keys.load(null, null);
                keys.setKeyEntry("granary", material.privateKey(), new char[0], material.certChain());
                keyManagers = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                keyManagers.init(keys, new char[0]);
            }
            final TrustManagerFactory trustManagers =
                TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            if (material.trustCerts() == null)
            {
                trustManagers.init((KeyStore)null);
            }
            else
            {
                final KeyStore anchors = KeyStore.getInstance("PKCS12");
                anchors.load(null, null);
                int i = 0;
                for (final X509Certificate cert : material.trustCerts())
                {
                    anchors.setCertificateEntry("ca" + i++, cert);
                }
                trustManagers.init(anchors);
            }
            final SSLContext context = SSLContext.getInstance("TLS");
            context.init(keyManagers == null ? null : keyManagers.getKeyManagers(), trustManagers.getTrustManagers(),
                null);
            return context;
        }
        catch (final GeneralSecurityException | IOException ex)
        {
            throw new IllegalArgumentException("cannot set up TLS: " + ex.getMessage(), ex);
        }
    }

    /**
     * Puts a server-side TLS handler first in {@code channel}'s pipeline and logs a failed handshake once,
     * saying why (e.g. a plain-text or untrusted client). Call from the channel initializer.
     */
    public static SslHandler addServerHandler(
        final Channel channel, final SslContext context, final Logger log, final String portName)
    {
        final SslHandler handler = context.newHandler(channel.alloc());
        channel.pipeline().addFirst("tls", handler);
        logFailedHandshake(handler.handshakeFuture(), channel, log, portName + " port: client");
        return handler;
    }

    /**
     * Puts a client-side TLS handler first in {@code channel}'s pipeline; {@code host} is what the server's
     * certificate must name (host name or address) and is sent as SNI when it is a name.
     */
    public static SslHandler addClientHandler(
        final Channel channel, final SslContext context, final String host, final int port, final Logger log,
        final String peerName)
    {
        final SslHandler handler = context.newHandler(channel.alloc(), host, port);
        channel.pipeline().addFirst("tls", handler);
        logFailedHandshake(handler.handshakeFuture(), channel, log, peerName);
        return handler;
    }

    private static void logFailedHandshake(
        final Future<Channel> handshake, final Channel channel, final Logger log, final String who)
    {
        handshake.addListener(f ->
        {
            if (f.isSuccess())
            {
                return;
            }
            final Throwable cause = f.cause();
            if (cause instanceof ClosedChannelException)
            {
                log.debug("TLS handshake with {} {} did not finish: connection closed", who, channel.remoteAddress());
            }
            else
            {
                log.warn("TLS handshake with {} {} failed: {}", who, channel.remoteAddress(), describe(cause));
            }
        });
    }

    /** A one-line reason for a failed handshake, naming the usual misconfigurations. */
    public static String describe(final Throwable cause)
    {
        Throwable root = cause;
        while (root.getCause() != null && root.getCause() != root)
        {
            if (root instanceof NotSslRecordException)
            {
                break;
            }
            root = root.getCause();
        }
        if (root instanceof NotSslRecordException || cause instanceof NotSslRecordException)
        {
            return "the peer does not speak TLS (plain-text client or server?)";
        }
        final String message = String.valueOf(root.getMessage());
        if (message.contains("PKIX") || message.contains("unable to find valid certification path"))
        {
            return "the peer's certificate does not chain to a trusted CA (--tls-ca): " + message;
        }
        if (message.contains("No subject alternative") || message.contains("No name matching"))
        {
            return "the peer's certificate does not name the address it was reached at: " + message;
        }
        if (message.contains("Empty client certificate chain") || message.contains("null cert chain"))
        {
            return "the client presented no certificate but one is required (--tls-client-auth require)";
        }
        return root.getClass().getSimpleName() + ": " + message;
    }

    private static ClientAuth clientAuth(final TlsSettings.ClientAuth clientAuth)
    {
        switch (clientAuth)
        {
            case OPTIONAL: return ClientAuth.OPTIONAL;
            case REQUIRE: return ClientAuth.REQUIRE;
            default: return ClientAuth.NONE;
        }
    }
}
