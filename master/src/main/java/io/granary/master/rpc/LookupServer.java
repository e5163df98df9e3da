package io.granary.master.rpc;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import io.granary.common.tls.TlsContexts;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.KeyRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.ssl.SslContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

import static io.granary.protocol.LookupDescriptor.*;

/**
 * The master's framed lookup port: the calls on every request's critical path (ExistKey,
 * BatchExistKey, BatchProbeKey, GetReplicaList, PutStart/PutEnd/PutRevoke and their batches) as
 * protobuf messages in small length-prefixed frames over TCP, handled inline on the event loop. Same semantics as the gRPC calls (both go
 * through {@link MasterRequestHandler}); no HTTP/2 framing, no thread hand-off.
 */
public final class LookupServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(LookupServer.class);

    private final Channel serverChannel;
    private final MasterRequestHandler handler;
    private final java.util.concurrent.atomic.LongAdder requests = new java.util.concurrent.atomic.LongAdder();
    private final RpcMetrics metrics;

    public LookupServer(
        final String host,
        final int port,
        final EventLoopGroup bossGroup,
        final EventLoopGroup workerGroup,
        final Class<? extends ServerChannel> channelType,
        final MasterRequestHandler handler)
    {
        this(host, port, bossGroup, workerGroup, channelType, handler, RpcMetrics.NONE, null);
    }

    /** @param metrics per-call latency and failures of this transport. */
    public LookupServer(
        final String host,
        final int port,
        final EventLoopGroup bossGroup,
        final EventLoopGroup workerGroup,
        final Class<? extends ServerChannel> channelType,
        final MasterRequestHandler handler,
        final RpcMetrics metrics)
    {
        this(host, port, bossGroup, workerGroup, channelType, handler, metrics, null);
    }

    /**
     * @param metrics per-call latency and failures of this transport.
     * @param sslContext TLS for every connection, or null for plain text.
     */
    public LookupServer(
        final String host,
        final int port,
        final EventLoopGroup bossGroup,
        final EventLoopGroup workerGroup,
        final Class<? extends ServerChannel> channelType,
        final MasterRequestHandler handler,
        final RpcMetrics metrics,
        final SslContext sslContext)
    {
        this.handler = handler;
        this.metrics = metrics;
        final ServerBootstrap bootstrap = new ServerBootstrap()
            .group(bossGroup, workerGroup)
            .channel(channelType)
            .option(ChannelOption.SO_BACKLOG, 256)
            .option(ChannelOption.SO_REUSEADDR, true) // a restarted master binds its port again at once
            .childOption(ChannelOption.TCP_NODELAY, true)
            // A 640-key request is ~20 KiB: read it in one syscall instead of growing from 2 KiB.
            .childOption(ChannelOption.RECVBUF_ALLOCATOR, new AdaptiveRecvByteBufAllocator(4096, 64 << 10, 1 << 20))
            .childHandler(new ChannelInitializer<SocketChannel>()
            {
                @Override
                protected void initChannel(final SocketChannel ch)
                {
                    ch.pipeline()
                        .addLast(new LengthFieldBasedFrameDecoder(MAX_FRAME_LENGTH, 0, LENGTH_FIELD_LENGTH, 0,
                            LENGTH_FIELD_LENGTH))
                        .addLast(new FrameHandler());
                    if (sslContext != null)
                    {
                        TlsContexts.addServerHandler(ch, sslContext, LOG, "lookup");
                    }
                }
            });
        try
        {
            serverChannel = bootstrap.bind(new InetSocketAddress(host, port)).sync().channel();
        }
        catch (final Exception ex)
        {
            throw new UncheckedIOException("cannot bind the lookup port " + host + ":" + port,
                ex instanceof IOException ? (IOException)ex : new IOException(ex));
        }
    }

    public int port()
    {
        return ((InetSocketAddress)serverChannel.localAddress()).getPort();
    }

    /** Lookup requests received (well-formed headers). */
    public long requests()
    {
        return requests.sum();
    }

    @Override
    public void close()
    {
        serverChannel.close().syncUninterruptibly();
    }

    /** Decodes one frame (length already stripped), calls the handler, writes the reply; flushes per read batch. */
    private final class FrameHandler extends ChannelInboundHandlerAdapter
    {
        private final BatchRequestDecoder decoder = new BatchRequestDecoder();
        private final BatchReplicaAnswer answer = new BatchReplicaAnswer();

        @Override
        public void channelRead(final ChannelHandlerContext ctx, final Object msg)
        {
            final ByteBuf frame = (ByteBuf)msg;
            try
            {
                if (frame.readableBytes() < HEADER_LENGTH - LENGTH_FIELD_LENGTH)
                {
                    LOG.warn("lookup frame of {} bytes from {} is shorter than a header; closing",
                        frame.readableBytes(), ctx.channel().remoteAddress());
                    ctx.close();
                    return;
                }
                final int version = frame.readUnsignedByte();
                final int method = frame.readUnsignedByte();
                frame.skipBytes(2);
                final long requestId = frame.readLong();
                if (version != VERSION)
                {
                    writeError(ctx, method, requestId, STATUS_BAD_VERSION, "unsupported lookup protocol version " + version);
                    return;
                }
                requests.increment();
                final MasterRpc rpc = rpcOf(method);
                if (rpc == null)
                {
                    writeError(ctx, method, requestId, STATUS_UNKNOWN_METHOD, "unknown lookup method " + method);
                    return;
                }
                final long startNs = System.nanoTime();
                final Object response;
                try
                {
                    response = dispatch(method, frame, decoder, answer);
                }
                catch (final InvalidProtocolBufferException ex)
                {
                    metrics.recordFailure(rpc, startNs);
                    writeError(ctx, method, requestId, STATUS_MALFORMED, "malformed request: " + ex.getMessage());
                    return;
                }
                catch (final RuntimeException ex)
                {
                    metrics.recordFailure(rpc, startNs);
                    LOG.error("lookup method {} failed unexpectedly", method, ex);
                    writeError(ctx, method, requestId, STATUS_INTERNAL, String.valueOf(ex));
                    return;
                }
                finally
                {
                    decoder.trim();
                }
                metrics.record(rpc, startNs, response);
                final WireAnswer wire = response instanceof WireAnswer ? (WireAnswer)response : null;
                final int size = wire != null ? wire.serializedSize() : ((MessageLite)response).getSerializedSize();
                final ByteBuf out = ctx.alloc().directBuffer(HEADER_LENGTH + size);
                writeHeader(out, HEADER_LENGTH - LENGTH_FIELD_LENGTH + size, method, STATUS_OK, requestId);
                final CodedOutputStream cos = CodedOutputStream.newInstance(out.nioBuffer(HEADER_LENGTH, size));
                if (wire != null)
                {
                    wire.writeTo(cos);
                }
                else
                {
                    ((MessageLite)response).writeTo(cos);
                }
                cos.flush();
                out.writerIndex(HEADER_LENGTH + size);
                ctx.write(out, ctx.voidPromise());
            }
            catch (final IOException ex)
            {
                LOG.error("lookup reply encoding failed", ex);
                ctx.close();
            }
            finally
            {
                frame.release();
            }
        }

        @Override
        public void channelReadComplete(final ChannelHandlerContext ctx)
        {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
        {
            if (cause instanceof TooLongFrameException)
            {
                LOG.warn("lookup frame from {} above {} bytes; closing", ctx.channel().remoteAddress(), MAX_FRAME_LENGTH);
            }
            else
            {
                LOG.debug("lookup connection {} failed", ctx.channel().remoteAddress(), cause);
            }
            ctx.close();
        }
    }

    /** The call a lookup method number stands for, or null for an unknown method. */
    static MasterRpc rpcOf(final int method)
    {
        switch (method)
        {
            case METHOD_EXIST_KEY: return MasterRpc.EXIST_KEY;
            case METHOD_BATCH_EXIST_KEY: return MasterRpc.BATCH_EXIST_KEY;
            case METHOD_BATCH_PROBE_KEY: return MasterRpc.BATCH_PROBE_KEY;
            case METHOD_GET_REPLICA_LIST: return MasterRpc.GET_REPLICA_LIST;
            case METHOD_BATCH_GET_REPLICA_LIST: return MasterRpc.BATCH_GET_REPLICA_LIST;
            case METHOD_PUT_START: return MasterRpc.PUT_START;
            case METHOD_PUT_END: return MasterRpc.PUT_END;
            case METHOD_PUT_REVOKE: return MasterRpc.PUT_REVOKE;
            case METHOD_BATCH_PUT_START: return MasterRpc.BATCH_PUT_START;
            case METHOD_BATCH_PUT_END: return MasterRpc.BATCH_PUT_END;
            case METHOD_BATCH_PUT_REVOKE: return MasterRpc.BATCH_PUT_REVOKE;
            default: return null;
        }
    }

    /**
     * An answer written straight to the wire in protobuf's encoding without a message object ({@link
     * BatchReplicaAnswer}); its whole-request code is {@link #code}.
     */
    public interface WireAnswer
    {
        int code();

        int serializedSize();

        void writeTo(CodedOutputStream out) throws IOException;
    }

    /** The answer: a protobuf message, or a {@link WireAnswer} for the batches the handler writes directly. */
    private Object dispatch(
        final int method, final ByteBuf payload, final BatchRequestDecoder decoder, final BatchReplicaAnswer answer)
        throws InvalidProtocolBufferException
    {
        switch (method)
        {
            case METHOD_EXIST_KEY:
                return handler.existKey(KeyRequest.parseFrom(payload.nioBuffer()));
            case METHOD_BATCH_EXIST_KEY:
                decoder.decodeBatchKeys(payload);
                return handler.batchExistKey(decoder.tenant, decoder.keys);
            case METHOD_BATCH_PROBE_KEY:
                decoder.decodeBatchProbe(payload);
                return handler.batchProbeKey(decoder.tenant, decoder.mode, decoder.candidateSize, decoder.keys,
                    decoder.withReplicas, decoder.replicasFrom, decoder.replicasCount, decoder.sharedGrants);
            case METHOD_GET_REPLICA_LIST:
                return handler.getReplicaList(KeyRequest.parseFrom(payload.nioBuffer()));
            case METHOD_BATCH_GET_REPLICA_LIST:
                decoder.decodeBatchKeys(payload);
                return handler.batchGetReplicaList(decoder.tenant, decoder.keys, decoder.sharedGrants, answer);
            case METHOD_PUT_START:
                return handler.putStart(PutStartRequest.parseFrom(payload.nioBuffer()));
            case METHOD_PUT_END:
                return handler.putEnd(PutEndRequest.parseFrom(payload.nioBuffer()));
            case METHOD_PUT_REVOKE:
                return handler.putRevoke(PutRevokeRequest.parseFrom(payload.nioBuffer()));
            case METHOD_BATCH_PUT_START:
                decoder.decodeBatchPutStart(payload);
                return handler.batchPutStart(decoder.tenant, decoder.clientId, decoder.keys, decoder.lengths,
                    decoder.lengthCount, decoder.options, decoder.perKeyOptions, decoder.avoidNodeIds,
                    decoder.sharedGrants, answer);
            case METHOD_BATCH_PUT_END:
                decoder.decodeBatchKeys(payload);
                return handler.batchPutEnd(decoder.tenant, decoder.clientId, decoder.keys, decoder.crcs,
                    decoder.crcCount);
            case METHOD_BATCH_PUT_REVOKE:
                return handler.batchPutRevoke(BatchKeysRequest.parseFrom(payload.nioBuffer()));
            default:
                return null;
        }
    }

    private static void writeHeader(
        final ByteBuf out, final int frameLength, final int method, final int status, final long requestId)
    {
        out.writeInt(frameLength);
        out.writeByte(VERSION);
        out.writeByte(method | RESPONSE_BIT);
        out.writeShort(status);
        out.writeLong(requestId);
    }

    private static void writeError(
        final ChannelHandlerContext ctx, final int method, final long requestId, final int status, final String message)
    {
        final byte[] text = message.getBytes(StandardCharsets.UTF_8);
        final ByteBuf out = ctx.alloc().buffer(HEADER_LENGTH + text.length);
        writeHeader(out, HEADER_LENGTH - LENGTH_FIELD_LENGTH + text.length, method, status, requestId);
        out.writeBytes(text);
        ctx.write(out, ctx.voidPromise());
    }
}
