package io.granary.common.tls;

import io.grpc.netty.GrpcSslContexts;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;

/**
 * SSL contexts for the gRPC control plane: {@link TlsContexts}' contexts with gRPC's HTTP/2 ALPN settings
 * (JDK provider). Stateless and thread safe.
 */
public final class GrpcTls
{
    private GrpcTls()
    {
    }

    /** For NettyServerBuilder.sslContext; null when TLS is disabled. @throws IllegalArgumentException for bad files. */
    public static SslContext serverContext(final TlsSettings settings)
    {
        return configure(TlsContexts.serverBuilder(settings));
    }

    /** For NettyChannelBuilder.sslContext; null when TLS is disabled. @throws IllegalArgumentException for bad files. */
    public static SslContext clientContext(final TlsSettings settings)
    {
        return configure(TlsContexts.clientBuilder(settings));
    }

    private static SslContext configure(final SslContextBuilder builder)
    {
        return builder == null ? null : TlsContexts.build(GrpcSslContexts.configure(builder, SslProvider.JDK));
    }
}
