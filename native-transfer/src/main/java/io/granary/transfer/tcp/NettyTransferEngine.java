package io.granary.transfer.tcp;

import io.granary.common.tls.TlsContexts;
import io.granary.protocol.FrameDescriptor;
import io.granary.transfer.AdmissionStats;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.handler.ssl.SslContext;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * Java TCP {@link TransferEngine} over Netty: per storage node a {@link PeerConnection} of a few
 * persistent lanes on which frames are pipelined, big transfers split into slices across lanes, and a
 * bounded queue with pending admissions in front of them. Thread safe; submit never blocks; futures
 * complete on the engine's event loops (one shared group).
 */
public final class NettyTransferEngine implements TransferEngine, AdmissionStats
{
    private static final Logger LOG = LoggerFactory.getLogger(NettyTransferEngine.class);

    /** Socket buffers big enough for a few MiB in flight per lane (the kernel caps them at net.core.*mem_max). */
    static final int SOCKET_BUFFER_BYTES = 4 << 20;
    static final WriteBufferWaterMark WRITE_BUFFER_WATER_MARK = new WriteBufferWaterMark(4 << 20, 16 << 20);
    /** An access token in a request is the header's token fields verbatim: expiry (4 bytes) then MAC. */
    public static final int ACCESS_TOKEN_LENGTH = FrameDescriptor.ACCESS_TOKEN_LENGTH;
    private static final long SHUTDOWN_TIMEOUT_MS = 3_000;

    private final TransferConfig config;
    private final SslContext sslContext;
    private final boolean epoll;
    private final EventLoopGroup group;
    private final Bootstrap bootstrap;
    private final ConcurrentHashMap<String, PeerConnection> peers = new ConcurrentHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AdmissionCounters counters = new AdmissionCounters();

    /** @throws IllegalArgumentException for a bad setting, including unusable TLS files. */
    public NettyTransferEngine(final TransferConfig config)
    {
        this.config = config.copy().conclude();
        this.sslContext = TlsContexts.clientContext(this.config.tls());
        this.epoll = this.config.preferEpoll() && Epoll.isAvailable();
        final IoHandlerFactory ioHandlerFactory = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.group = new MultiThreadIoEventLoopGroup(
            this.config.ioThreads(), new DefaultThreadFactory("granary-transfer", true), ioHandlerFactory);
        this.bootstrap = new Bootstrap()
            .group(group)
            .channel(epoll ? EpollSocketChannel.class : NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.SO_KEEPALIVE, true)
            .option(ChannelOption.SO_SNDBUF, SOCKET_BUFFER_BYTES)
            .option(ChannelOption.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            // Read big chunks: fewer syscalls and buffer hand-offs per MiB than growing from 2 KiB.
            .option(ChannelOption.RECVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(64 << 10, 1 << 20, 4 << 20))
            .option(ChannelOption.WRITE_BUFFER_WATER_MARK, WRITE_BUFFER_WATER_MARK)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS,
                (int)Math.min(Integer.MAX_VALUE, this.config.connectTimeoutMs()));
        LOG.debug("Java TCP transfer engine started: {} transport{}, {} I/O threads, {} lanes per peer, " +
            "{} queued frames and {} pending admissions per peer, admission timeout {} ms",
            epoll ? "epoll" : "nio", sslContext == null ? "" : " with TLS", this.config.ioThreads(),
            this.config.lanesPerPeer(),
            this.config.maxQueuedTransfersPerPeer(), this.config.maxPendingAdmissionsPerPeer(),
            this.config.admissionTimeoutMs());
    }

    @Override
    public TransportKind kind()
    {
        return TransportKind.JAVA;
    }

    /** True when every lane speaks TLS (frames are then decrypted into the TLS handler's own buffers). */
    public boolean tlsEnabled()
    {
        return sslContext != null;
    }

    /** "epoll" or "nio": the Netty transport underneath. */
    public String transportName()
    {
        return epoll ? "epoll" : "nio";
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        if (closed.get())
        {
            return completed(TRANSFER_FAIL_VALUE);
        }

        final byte[] token = request.accessToken();
        final FrameToken frameToken =
            token == null ? null : FrameToken.of(token, request.grantOffset(), request.grantLength());
        if ((token != null && (frameToken == null || !request.withinGrant())) ||
            (request.op() == TransferRequest.Op.READ && request.local().isReadOnly()))
        {
            return completed(INVALID_PARAMS_VALUE);
        }

        PeerConnection peer = peers.get(request.endpoint());
        if (peer == null)
        {
            final InetSocketAddress address = parseEndpoint(request.endpoint());
            if (address == null)
            {
                return completed(INVALID_PARAMS_VALUE);
            }
            if (address.isUnresolved())
            {
                return completed(TRANSFER_FAIL_VALUE); // not cached: name resolution may work later
            }
            peer = peers.computeIfAbsent(request.endpoint(), endpoint -> new PeerConnection(
                endpoint, address, group, bootstrap, config, counters, sslContext));
        }

        final CompletableFuture<Integer> future = peer.submit(request, frameToken);
        if (closed.get())
        {
            peer.close(); // raced with close(): make sure nothing is left behind on a fresh lane
        }
        return future;
    }

    /** Frames (slices) admitted to {@code endpoint} and not yet completed (0 for an unknown peer). */
    public int outstandingFrames(final String endpoint)
    {
        final PeerConnection peer = peers.get(endpoint);
        return peer == null ? 0 : peer.outstandingFrames();
    }

    /** Transfers to {@code endpoint} waiting for room in its queue (0 for an unknown peer). */
    public int pendingAdmissions(final String endpoint)
    {
        final PeerConnection peer = peers.get(endpoint);
        return peer == null ? 0 : peer.pendingAdmissions();
    }

    /** Transfers admitted to a peer's queue so far, at once or after waiting; all peers. */
    @Override
    public long admittedTransfers()
    {
        return counters.admitted.sum();
    }

    /** Transfers refused at once with UNAVAILABLE_IN_CURRENT_STATUS: queue and pending admissions full. */
    @Override
    public long rejectedQueueFull()
    {
        return counters.rejectedQueueFull.sum();
    }

    /** Pending admissions that failed with UNAVAILABLE_IN_CURRENT_STATUS after the admission timeout. */
    @Override
    public long rejectedAdmissionTimeout()
    {
        return counters.rejectedAdmissionTimeout.sum();
    }

    @Override
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        for (final PeerConnection peer : peers.values())
        {
            peer.close();
        }
        final boolean terminated = group.shutdownGracefully(0, SHUTDOWN_TIMEOUT_MS, TimeUnit.MILLISECONDS)
            .awaitUninterruptibly(SHUTDOWN_TIMEOUT_MS + 1_000, TimeUnit.MILLISECONDS);
        if (!terminated)
        {
            LOG.warn("transfer engine event loops did not stop within {} ms", SHUTDOWN_TIMEOUT_MS);
        }
    }

    /** Parses "host:port" or "[v6]:port"; null when malformed. The host is resolved here, once per peer. */
    public static InetSocketAddress parseEndpoint(final String endpoint)
    {
        final int colon = endpoint.lastIndexOf(':');
        if (colon <= 0 || colon == endpoint.length() - 1)
        {
            return null;
        }
        String host = endpoint.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]"))
        {
            host = host.substring(1, host.length() - 1);
        }
        if (host.isEmpty())
        {
            return null;
        }
        final int port;
        try
        {
            port = Integer.parseInt(endpoint.substring(colon + 1));
        }
        catch (final NumberFormatException ex)
        {
            return null;
        }
        if (port < 1 || port > 65535)
        {
            return null;
        }
        return new InetSocketAddress(host, port);
    }

    private static CompletableFuture<Integer> completed(final int status)
    {
        return CompletableFuture.completedFuture(status);
    }
}
