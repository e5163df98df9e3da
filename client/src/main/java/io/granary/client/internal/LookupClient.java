package io.granary.client.internal;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;

import static io.granary.protocol.LookupDescriptor.*;

/**
 * Client side of the master's framed lookup port: each call borrows a pooled blocking socket,
 * writes one frame and reads the reply on the calling thread — no event-loop hand-off, so a
 * lookup costs one loopback round trip plus the master's work. A connection that failed or timed
 * out is discarded; a call on a stale pooled connection is retried once on a fresh one (lookups
 * only read and lease, so a repeat is harmless). Every call keeps to one deadline, connects and
 * retries included. Thread safe.
 */
final class LookupClient implements AutoCloseable
{
    private static final int MAX_IDLE = 16;

    private final String host;
    private final int port;
    private final int timeoutMs;
    private final SSLContext tls;
    private final ConcurrentLinkedDeque<Connection> idle = new ConcurrentLinkedDeque<>();
    private final AtomicInteger idleCount = new AtomicInteger();
    private volatile boolean closed;

    LookupClient(final String host, final int port, final long timeoutMs)
    {
        this(host, port, timeoutMs, null);
    }

    /** @param tls TLS for every connection (the master's certificate must name {@code host}), or null. */
    LookupClient(final String host, final int port, final long timeoutMs, final SSLContext tls)
    {
        this.tls = tls;
        this.host = host;
        this.port = port;
        this.timeoutMs = (int)Math.min(Integer.MAX_VALUE, Math.max(1, timeoutMs));
    }

    String address()
    {
        return host + ":" + port;
    }

    /** Writes a request message's protobuf wire form into a frame buffer. */
    @FunctionalInterface
    interface Payload
    {
        void writeTo(WireBuffer out) throws IOException;
    }

    /** Turns a reply's protobuf bytes into the caller's form (a protobuf {@link Parser}, or a decoder of its own). */
    @FunctionalInterface
    interface Decoder<T>
    {
        T decode(byte[] bytes, int offset, int length) throws InvalidProtocolBufferException;
    }

    /** Sends {@code request} as {@code method} and parses the reply with {@code parser}. */
    <T> T call(final String rpc, final int method, final MessageLite request, final Parser<T> parser)
    {
        return call(rpc, method, out -> out.writeMessage(request), parser, deadlineFromNow());
    }

    /** {@link #call(String, int, MessageLite, Parser)} finishing by {@code deadlineNs} (System.nanoTime). */
    <T> T call(final String rpc, final int method, final MessageLite request, final Parser<T> parser,
        final long deadlineNs)
    {
        return call(rpc, method, out -> out.writeMessage(request), parser::parseFrom, deadlineNs, null);
    }

    /**
     * {@link #call(String, int, MessageLite, Parser, long)} that runs {@code whileWaiting} (may be null) on this
     * thread after the request was sent and before the reply is read: work that overlaps the master's handling. It
     * runs again if the call is sent again on a fresh connection; pass a task that does its work once.
     */
    <T> T call(final String rpc, final int method, final MessageLite request, final Decoder<T> decoder,
        final long deadlineNs, final Runnable whileWaiting)
    {
        return call(rpc, method, out -> out.writeMessage(request), decoder, deadlineNs, whileWaiting);
    }

    /** Sends a payload written by {@code request} as {@code method} and parses the reply. */
    <T> T call(final String rpc, final int method, final Payload request, final Parser<T> parser)
    {
        return call(rpc, method, request, parser::parseFrom, deadlineFromNow(), null);
    }

    /** {@link #call(String, int, Payload, Parser)} finishing by {@code deadlineNs} (System.nanoTime). */
    <T> T call(final String rpc, final int method, final Payload request, final Parser<T> parser,
        final long deadlineNs)
    {
        return call(rpc, method, request, parser::parseFrom, deadlineNs, null);
    }

    private long deadlineFromNow()
    {
        return System.nanoTime() + timeoutMs * 1_000_000L;
    }

    /**
     * Sends a payload written by {@code request} as {@code method} and parses the reply, all by {@code deadlineNs};
     * {@code whileWaiting} (may be null) runs between sending and reading, each time the request is sent.
     *
     * @throws GranaryException RPC_TIMEOUT when the deadline passes, RPC_FAIL (cause: the IOException) when the
     *                          port cannot be reached or the connection breaks.
     */
    <T> T call(final String rpc, final int method, final Payload request, final Decoder<T> decoder,
        final long deadlineNs, final Runnable whileWaiting)
    {
        for (int attempt = 0; ; attempt++)
        {
            final Connection pooled = idle.pollFirst();
            final boolean reused = pooled != null;
            if (reused)
            {
                idleCount.decrementAndGet();
            }
            Connection c = null;
            try
            {
                final int remainingMs = remainingMs(deadlineNs);
                if (remainingMs <= 0)
                {
                    if (pooled != null)
                    {
                        release(pooled);
                    }
                    throw new SocketTimeoutException("deadline passed");
                }
                c = reused ? pooled : new Connection(remainingMs);
                c.timeout(remainingMs(deadlineNs));
                final T reply = c.call(method, request, decoder, whileWaiting);
                release(c);
                return reply;
            }
            catch (final SocketTimeoutException ex)
            {
                discard(c);
                throw new GranaryException(ErrorCode.RPC_TIMEOUT,
                    rpc + " to master lookup port " + address() + ": no answer within " + timeoutMs + " ms", ex);
            }
            catch (final IOException ex)
            {
                discard(c);
                if (reused && attempt == 0)
                {
                    continue; // the pooled connection went stale: try once on a fresh one
                }
                throw new GranaryException(ErrorCode.RPC_FAIL,
                    rpc + " to master lookup port " + address() + ": " + ex.getMessage(), ex);
            }
            catch (final RuntimeException ex)
            {
                discard(c);
                throw ex;
            }
        }
    }

    private static int remainingMs(final long deadlineNs)
    {
        final long remainingNs = deadlineNs - System.nanoTime();
        return remainingNs <= 0 ? 0 : (int)Math.min(Integer.MAX_VALUE, Math.max(1, remainingNs / 1_000_000L));
    }

    private void release(final Connection c)
    {
        if (closed || idleCount.incrementAndGet() > MAX_IDLE)
        {
            if (!closed)
            {
                idleCount.decrementAndGet();
            }
            c.close();
            return;
        }
        idle.offerFirst(c);
        if (closed && idle.remove(c))
        {
            c.close(); // close() ran while we were returning it
        }
    }

    private static void discard(final Connection c)
    {
        if (c != null)
        {
            c.close();
        }
    }

    @Override
    public void close()
    {
        closed = true;
        Connection c;
        while ((c = idle.pollFirst()) != null)
        {
            c.close();
        }
    }

    /** One blocking connection, used by one caller at a time. */
    private final class Connection
    {
        private final Socket socket;
        private final OutputStream out;
        private final InputStream in;
        private final WireBuffer frame = new WireBuffer(16 << 10);
        private long nextRequestId = 1;

        Connection(final int connectTimeoutMs) throws IOException
        {
            final Socket plain = new Socket();
            Socket s = plain;
            try
            {
                plain.setTcpNoDelay(true);
                plain.setSoTimeout(connectTimeoutMs);
                plain.connect(new InetSocketAddress(host, port), connectTimeoutMs);
                if (tls != null)
                {
                    s = startTls(plain);
                }
                out = s.getOutputStream();
                in = s.getInputStream();
            }
            catch (final IOException ex)
            {
                s.close();
                throw ex;
            }
            socket = s;
        }

        /** Layers TLS over the connected socket and handshakes now (within the socket timeout). */
        private Socket startTls(final Socket plain) throws IOException
        {
            final SSLSocket secure = (SSLSocket)tls.getSocketFactory().createSocket(plain, host, port, true);
            final SSLParameters parameters = secure.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS"); // the certificate must name the host
            secure.setSSLParameters(parameters);
            secure.startHandshake();
            return secure;
        }

        void timeout(final int readTimeoutMs) throws IOException
        {
            if (readTimeoutMs <= 0)
            {
                throw new SocketTimeoutException("deadline passed");
            }
            socket.setSoTimeout(readTimeoutMs);
        }

        <T> T call(final int method, final Payload request, final Decoder<T> decoder, final Runnable whileWaiting)
            throws IOException
        {
            frame.reset(HEADER_LENGTH);
            request.writeTo(frame);
            final byte[] buffer = frame.array();
            final int end = frame.position();
            final long requestId = nextRequestId++;
            putInt(buffer, 0, end - LENGTH_FIELD_LENGTH);
            buffer[VERSION_OFFSET] = VERSION;
            buffer[METHOD_OFFSET] = (byte)method;
            buffer[STATUS_OFFSET] = 0;
            buffer[STATUS_OFFSET + 1] = 0;
            putLong(buffer, REQUEST_ID_OFFSET, requestId);
            out.write(buffer, 0, end);
            out.flush();
            if (whileWaiting != null)
            {
                whileWaiting.run();
            }

            // Read as much as the socket has (usually the whole reply) instead of the length first.
            frame.reset(0);
            byte[] reply = frame.array();
            int have = 0;
            while (have < HEADER_LENGTH)
            {
                have += readSome(reply, have, reply.length - have);
            }
            final int frameLength = getInt(reply, 0);
            if (frameLength < HEADER_LENGTH - LENGTH_FIELD_LENGTH || frameLength > MAX_FRAME_LENGTH)
            {
                throw new IOException("bad lookup reply length " + frameLength);
            }
            final int total = LENGTH_FIELD_LENGTH + frameLength;
            if (have > total)
            {
                throw new IOException("lookup reply longer than its frame (" + have + " > " + total + " bytes)");
            }
            if (reply.length < total)
            {
                frame.reset(have);
                frame.ensure(total - have);
                reply = frame.array();
            }
            while (have < total)
            {
                have += readSome(reply, have, total - have);
            }
            final int version = reply[VERSION_OFFSET] & 0xFF;
            final int replyMethod = reply[METHOD_OFFSET] & 0xFF;
            final int status = ((reply[STATUS_OFFSET] & 0xFF) << 8) | (reply[STATUS_OFFSET + 1] & 0xFF);
            final long replyId = getLong(reply, REQUEST_ID_OFFSET);
            if (version != VERSION || replyMethod != (method | RESPONSE_BIT) || replyId != requestId)
            {
                throw new IOException("lookup reply out of step (version " + version + ", method " + replyMethod +
                    ", id " + replyId + " for " + requestId + ")");
            }
            final int payloadOffset = HEADER_LENGTH;
            final int payloadLength = total - HEADER_LENGTH;
            if (status != STATUS_OK)
            {
                final String text = new String(reply, payloadOffset, payloadLength, StandardCharsets.UTF_8);
                throw new GranaryException(status == STATUS_MALFORMED ? ErrorCode.INVALID_PARAMS : ErrorCode.RPC_FAIL,
                    "master lookup port refused the call (status " + status + "): " + text);
            }
            try
            {
                return decoder.decode(reply, payloadOffset, payloadLength);
            }
            catch (final InvalidProtocolBufferException ex)
            {
                throw new IOException("unparseable lookup reply", ex);
            }
        }

        private int readSome(final byte[] into, final int at, final int max) throws IOException
        {
            final int n = in.read(into, at, max);
            if (n < 0)
            {
                throw new java.io.EOFException("master closed the lookup connection");
            }
            return n;
        }

        void close()
        {
            try
            {
                socket.close();
            }
            catch (final IOException ignored)
            {
                // nothing left to do with a connection we are dropping
            }
        }
    }

    private static void putInt(final byte[] b, final int at, final int v)
    {
        b[at] = (byte)(v >>> 24);
        b[at + 1] = (byte)(v >>> 16);
        b[at + 2] = (byte)(v >>> 8);
        b[at + 3] = (byte)v;
    }

    private static void putLong(final byte[] b, final int at, final long v)
    {
        putInt(b, at, (int)(v >>> 32));
        putInt(b, at + 4, (int)v);
    }

    private static int getInt(final byte[] b, final int at)
    {
        return ((b[at] & 0xFF) << 24) | ((b[at + 1] & 0xFF) << 16) | ((b[at + 2] & 0xFF) << 8) | (b[at + 3] & 0xFF);
    }

    private static long getLong(final byte[] b, final int at)
    {
        long v = 0;
        for (int i = 0; i < 8; i++)
        {
            v = (v << 8) | (b[at + i] & 0xFF);
        }
        return v;
    }
}
