package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.common.tls.TlsContexts;
import io.granary.common.tls.TlsSettings;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.transfer.TransferEngines;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransfer;
import io.granary.transfer.natives.NativeTransferServer;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.ImmediateEventExecutor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.ToLongFunction;

/**
 * The storage node's TCP transfer server: accepts client connections and serves READ, WRITE, COMMIT and
 * PING frames against the node's segments and their ledgers (one {@link FrameHandler} per connection). Started and closed by
 * one owner thread; the counters may be read from any thread.
 */
public final class TransferServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(TransferServer.class);
    private static final int SOCKET_BUFFER_BYTES = 4 << 20;
    private static final WriteBufferWaterMark WRITE_BUFFER_WATER_MARK = new WriteBufferWaterMark(2 << 20, 8 << 20);
    private static final long SHUTDOWN_TIMEOUT_MS = 3_000;

    private final String host;
    private final int requestedPort;
    private final SegmentRegistry registry;
    private final int maxFrameBytes;
    private final AccessTokenVerifier tokenVerifier;
    private final boolean epoll;
    private final SslContext sslContext;
    private final EventLoopGroup group;
    private final TransportKind transport;
    private final int ioThreads;
    private boolean localTransfers = true;
    private volatile NativeTransferServer nativeServer;
    private final ChannelGroup connections =
        new DefaultChannelGroup("granary-transfer", ImmediateEventExecutor.INSTANCE);
    private Channel serverChannel;
    private int port;
    private boolean closed;

    private final LongAdder bytesIn = new LongAdder();
    private final LongAdder bytesOut = new LongAdder();
    private final LongAdder requests = new LongAdder();
    private final LongAdder readVectors = new LongAdder();
    private final LongAdder writeVectors = new LongAdder();
    private final LongAdder errorResponses = new LongAdder();
    private final LongAdder protocolErrors = new LongAdder();
    private final LongAdder connectionsOpened = new LongAdder();
    private final LongAdder connectionsClosed = new LongAdder();
    private final LongAdder backpressurePauses = new LongAdder();
    private final TransferMetrics metrics;

    /**
     * A server without access control until a key is installed in {@link #tokenVerifier()}.
     *
     * @param port          0 for an ephemeral port.
     * @param maxFrameBytes longest range a single frame may carry; longer frames close the connection.
     */
    public TransferServer(
        final String host,
        final int port,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final int ioThreads,
        final boolean preferEpoll)
    {
        this(host, port, registry, maxFrameBytes, ioThreads, preferEpoll, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), TlsSettings.DISABLED);
    }

    /**
     * @param tls TLS for every connection ({@link TlsSettings#DISABLED}: plain text).
     * @throws IllegalArgumentException when the TLS files are unusable.
     */
    public TransferServer(
        final String host,
        final int port,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final int ioThreads,
        final boolean preferEpoll,
        final TlsSettings tls)
    {
        this(host, port, registry, maxFrameBytes, ioThreads, preferEpoll, TransferMetrics.NONE,
            new AccessTokenVerifier(Clock.SYSTEM), tls);
    }

    /** @param tokenVerifier checks every READ and WRITE frame's access token once it holds a key. */
    public TransferServer(
        final String host,
        final int port,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final int ioThreads,
        final boolean preferEpoll,
        final AccessTokenVerifier tokenVerifier)
    {
        this(host, port, registry, maxFrameBytes, ioThreads, preferEpoll, TransferMetrics.NONE, tokenVerifier,
            TlsSettings.DISABLED);
    }

    /**
     * @param port          0 for an ephemeral port.
     * @param maxFrameBytes longest range a single frame may carry; longer frames close the connection.
     * @param metrics       the latency histograms the frame handlers record into.
     * @param tokenVerifier checks every READ and WRITE frame's access token once it holds a key.
     * @param tls           TLS for every connection ({@link TlsSettings#DISABLED}: plain text).
     * @throws IllegalArgumentException when the TLS files are unusable.
     */
    public TransferServer(
        final String host,
        final int port,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final int ioThreads,
        final boolean preferEpoll,
        final TransferMetrics metrics,
        final AccessTokenVerifier tokenVerifier,
        final TlsSettings tls)
    {
        this(host, port, registry, maxFrameBytes, ioThreads, preferEpoll, metrics, tokenVerifier, tls,
            TransportKind.JAVA);
    }

    /**
     * @param transport {@link TransportKind#JAVA} (Netty), {@link TransportKind#NATIVE} (the C server of
     *                  native-transfer: plain TCP, and RDMA_CONNECT answered where a device exists),
     *                  {@link TransportKind#RDMA} (the same, refused without a device) or {@link TransportKind#AUTO}
     *                  (native when its library loads and TLS is off, else Java).
     * @throws IllegalArgumentException when the TLS files are unusable.
     * @throws IllegalStateException when the requested transport is not available here.
     */
    public TransferServer(
        final String host,
        final int port,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final int ioThreads,
        final boolean preferEpoll,
        final TransferMetrics metrics,
        final AccessTokenVerifier tokenVerifier,
        final TlsSettings tls,
        final TransportKind transport)
    {
        // RDMA is served by the native server: it answers RDMA_CONNECT with a queue pair on the segment whenever a
        // device exists (with either kind asked for); resolving RDMA here only checks that there is one.
        final TransportKind resolved = TransferEngines.resolve(transport, tls.isEnabled());
        this.transport = resolved == TransportKind.RDMA ? TransportKind.NATIVE : resolved;
        this.sslContext = TlsContexts.serverContext(tls);
        this.metrics = metrics;
        this.tokenVerifier = tokenVerifier;
        this.host = host;
        this.requestedPort = port;
        this.registry = registry;
        this.maxFrameBytes = maxFrameBytes;
        this.ioThreads = ioThreads;
        this.epoll = preferEpoll && Epoll.isAvailable();
        final IoHandlerFactory ioHandlerFactory = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.group = this.transport == TransportKind.NATIVE ? null : new MultiThreadIoEventLoopGroup(
            ioThreads, new DefaultThreadFactory("granary-node-transfer", true), ioHandlerFactory);
    }

    /**
     * Whether the native server answers LOCAL_CONNECT from clients on this host (docs/protocol.md; default true); the
     * Java server refuses it either way. Before {@link #start()}.
     */
    public TransferServer localTransfers(final boolean localTransfers)
    {
        this.localTransfers = localTransfers;
        return this;
    }

    /** Binds and starts serving. @throws IllegalStateException when the address cannot be bound. */
    public TransferServer start()
    {
        if (transport == TransportKind.NATIVE)
        {
            return startNative();
        }
        final ServerBootstrap bootstrap = new ServerBootstrap()
            .group(group)
            .channel(epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class)
            .option(ChannelOption.SO_BACKLOG, 1024)
            .option(ChannelOption.SO_REUSEADDR, true)
            .option(ChannelOption.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childOption(ChannelOption.SO_KEEPALIVE, true)
            .childOption(ChannelOption.SO_SNDBUF, SOCKET_BUFFER_BYTES)
            .childOption(ChannelOption.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            // Read big chunks: fewer syscalls and buffer hand-offs per MiB than growing from 2 KiB.
            .childOption(ChannelOption.RECVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(64 << 10, 1 << 20, 4 << 20))
            .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, WRITE_BUFFER_WATER_MARK)
            .childHandler(new ChannelInitializer<>()
            {
                @Override
                protected void initChannel(final Channel ch)
                {
                    connections.add(ch);
                    // In-place receive needs the socket's bytes to be the frames': never behind TLS.
                    ch.pipeline().addLast(
                        new FrameHandler(TransferServer.this, registry, maxFrameBytes, !tlsEnabled()));
                    if (sslContext != null)
                    {
                        installTls(ch);
                    }
                }
            });
        final ChannelFuture bound = bootstrap.bind(host, requestedPort).awaitUninterruptibly();
        if (!bound.isSuccess())
        {
            group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                .awaitUninterruptibly(SHUTDOWN_TIMEOUT_MS);
            throw new IllegalStateException(
                "cannot bind the transfer server to " + host + ":" + requestedPort + ": " + bound.cause(),
                bound.cause());
        }
        serverChannel = bound.channel();
        port = ((InetSocketAddress)serverChannel.localAddress()).getPort();
        if (!MemoryCopier.ZERO_COPY_READS)
        {
            LOG.warn("READs copy once: start the JVM with --add-opens java.base/java.nio=ALL-UNNAMED " +
                "-Dio.netty.tryReflectionSetAccessible=true to send segment memory without copying");
        }
        LOG.info("transfer server listening on {}:{} ({} transport{}, max frame {} bytes)",
            host, port, epoll ? "epoll" : "nio", sslContext == null ? "" : ", TLS", maxFrameBytes);
        return this;
    }

    /**
     * Serves through the native server on {@code ioThreads} event loops: segment memory and the token key are copied
     * into its tables now and on every change; WRITE ledger updates and COMMITs come back through a
     * {@link NativeFrameHandler} per loop (the ledger and the metrics they share are thread safe).
     */
    private TransferServer startNative()
    {
        nativeServer = new NativeTransferServer(host, requestedPort, maxFrameBytes, tokenVerifier.clock() != Clock.SYSTEM,
            ioThreads, localTransfers, loop -> new NativeFrameHandler(registry, tokenVerifier, maxFrameBytes, metrics));
        port = nativeServer.port();
        registry.changeListener(this::publishSegments);
        tokenVerifier.keyListener(nativeServer::tokenKey);
        final NativeTransferServer server = nativeServer;
        tokenVerifier.externalCounts(() ->
        {
            final NativeTransferServer.Stats stats = server.stats();
            return new long[] {stats.tokensVerified(), stats.tokensMissing(), stats.tokensInvalid(),
                stats.tokensExpired()};
        });
        LOG.info("transfer server listening on {}:{} (native epoll transport, {}, {} event loops, max frame {} bytes)",
            host, port, NativeTransfer.version(), ioThreads, maxFrameBytes);
        return this;
    }

    private void publishSegments()
    {
        final NativeTransferServer server = nativeServer;
        if (server == null)
        {
            return;
        }
        final List<Segment> segments = registry.segments();
        final int[] ids = new int[segments.size()];
        final long[] addresses = new long[ids.length];
        final long[] sizes = new long[ids.length];
        for (int i = 0; i < ids.length; i++)
        {
            ids[i] = segments.get(i).id();
            addresses[i] = segments.get(i).address();
            sizes[i] = segments.get(i).sizeBytes();
        }
        server.segments(ids, addresses, sizes);
    }

    /** The transport serving the frames: {@link TransportKind#JAVA} or {@link TransportKind#NATIVE}. */
    public TransportKind transport()
    {
        return transport;
    }

    /**
     * Puts the TLS handler in front of the frame handler. Frames are then decrypted into the TLS handler's own
     * buffers, so a receive path that reads the socket straight into segment memory must stay off here.
     */
    private void installTls(final Channel ch)
    {
        TlsContexts.addServerHandler(ch, sslContext, LOG, "transfer");
    }

    /** True when every connection speaks TLS. */
    public boolean tlsEnabled()
    {
        return sslContext != null;
    }

    public String host()
    {
        return host;
    }

    /** The bound port (the ephemeral one when started with port 0). */
    public int port()
    {
        return port;
    }

    /** The access-token check of this server's frames (install or remove the key there). */
    public AccessTokenVerifier tokenVerifier()
    {
        return tokenVerifier;
    }

    /** A counter of the Java server plus the same counter of the native server, when one runs. */
    private long withNative(final LongAdder javaCount, final ToLongFunction<NativeTransferServer.Stats> nativeCount)
    {
        final NativeTransferServer server = nativeServer;
        return javaCount.sum() + (server == null ? 0 : nativeCount.applyAsLong(server.stats()));
    }

    public long bytesIn()
    {
        return withNative(bytesIn, NativeTransferServer.Stats::bytesIn);
    }

    public long bytesOut()
    {
        return withNative(bytesOut, NativeTransferServer.Stats::bytesOut);
    }

    /** Requests served (READ, WRITE, PING frames and every entry of a READV or WRITEV), including rejected ones. */
    public long requests()
    {
        return withNative(requests, NativeTransferServer.Stats::requests);
    }

    /** READV frames served (each also counts its entries as requests). */
    public long readVectors()
    {
        return withNative(readVectors, NativeTransferServer.Stats::readVectors);
    }

    /** WRITEV frames served (each also counts its entries as requests). */
    public long writeVectors()
    {
        return withNative(writeVectors, NativeTransferServer.Stats::writeVectors);
    }

    /** Requests answered with a non-OK status. */
    public long errorResponses()
    {
        return withNative(errorResponses, NativeTransferServer.Stats::errorResponses);
    }

    /** Connections closed because of an undecodable frame. */
    public long protocolErrors()
    {
        return withNative(protocolErrors, NativeTransferServer.Stats::protocolErrors);
    }

    public long openConnections()
    {
        return withNative(connectionsOpened, NativeTransferServer.Stats::connectionsOpened) -
            withNative(connectionsClosed, NativeTransferServer.Stats::connectionsClosed);
    }

    public long connectionsOpened()
    {
        return withNative(connectionsOpened, NativeTransferServer.Stats::connectionsOpened);
    }

    /** Times a connection stopped reading because its responses were not leaving fast enough. */
    public long backpressurePauses()
    {
        return backpressurePauses.sum();
    }

    /** Response bytes queued on all connections and not yet written to their sockets (the node's queue depth). */
    public long queuedBytes()
    {
        long bytes = 0;
        for (final Channel ch : connections)
        {
            final io.netty.channel.ChannelOutboundBuffer buffer = ch.unsafe().outboundBuffer();
            bytes += buffer == null ? 0 : buffer.totalPendingWriteBytes();
        }
        return bytes;
    }

    TransferMetrics metrics()
    {
        return metrics;
    }

    void onBackpressurePause()
    {
        backpressurePauses.increment();
    }

    void onBytesIn(final long bytes)
    {
        bytesIn.add(bytes);
    }

    void onBytesOut(final long bytes)
    {
        bytesOut.add(bytes);
    }

    void onReadVector()
    {
        readVectors.increment();
    }

    void onWriteVector()
    {
        writeVectors.increment();
    }

    void onRequest()
    {
        requests.increment();
    }

    void onErrorResponse()
    {
        errorResponses.increment();
    }

    void onProtocolError()
    {
        protocolErrors.increment();
    }

    void onConnectionOpened()
    {
        connectionsOpened.increment();
    }

    void onConnectionClosed()
    {
        connectionsClosed.increment();
    }

    /** Stops accepting, closes every connection and stops the event loops (bounded wait); idempotent. */
    @Override
    public void close()
    {
        if (!closed)
        {
            closed = true;
            if (nativeServer != null)
            {
                nativeServer.close();
            }
            if (serverChannel != null)
            {
                serverChannel.close().awaitUninterruptibly(SHUTDOWN_TIMEOUT_MS);
            }
            connections.close().awaitUninterruptibly(SHUTDOWN_TIMEOUT_MS);
            if (group != null)
            {
                group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                    .awaitUninterruptibly(SHUTDOWN_TIMEOUT_MS + 1_000);
            }
        }
    }

    /** True once the event loops stopped: no thread of this server can touch segment memory any more. */
    public boolean isTerminated()
    {
        if (transport == TransportKind.NATIVE)
        {
            return nativeServer == null || nativeServer.isTerminated();
        }
        return group.isTerminated();
    }
}
