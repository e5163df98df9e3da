package io.granary.node.transfer;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;

/** A blocking-socket client that speaks (or mangles) the frame protocol byte by byte, for server tests. */
final class RawClient implements AutoCloseable
{
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    RawClient(final int port) throws IOException
    {
        socket = new Socket(InetAddress.getLoopbackAddress(), port);
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(10_000);
        in = new DataInputStream(socket.getInputStream());
        out = socket.getOutputStream();
    }

    static byte[] header(
        final int opcode, final long requestId, final int segmentId, final long offset, final long length)
    {
        final ByteBuf buf = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        try
        {
            FrameHeader.encode(buf, opcode, 0, requestId, segmentId, 0, offset, length, 0, null);
            final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
            buf.readBytes(bytes);
            return bytes;
        }
        finally
        {
            buf.release();
        }
    }

    /** The 64 header bytes of {@code header}, token fields included. */
    static byte[] header(final FrameHeader header)
    {
        final ByteBuf buf = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        try
        {
            header.encode(buf);
            final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
            buf.readBytes(bytes);
            return bytes;
        }
        finally
        {
            buf.release();
        }
    }

    void send(final byte[] bytes) throws IOException
    {
        out.write(bytes);
        out.flush();
    }

    /** Sends one byte per write call, to split headers and payloads across reads on the server. */
    void sendByteByByte(final byte[] bytes) throws IOException
    {
        for (final byte b : bytes)
        {
            out.write(b);
            out.flush();
        }
    }

    FrameHeader readHeader() throws IOException
    {
        final byte[] bytes = new byte[FrameDescriptor.HEADER_LENGTH];
        in.readFully(bytes);
        final ByteBuf buf = Unpooled.wrappedBuffer(bytes);
        try
        {
            final FrameHeader header = new FrameHeader();
            if (header.decode(buf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT) != FrameHeader.DECODE_OK)
            {
                throw new IOException("undecodable response " + header);
            }
            return header;
        }
        finally
        {
            buf.release();
        }
    }

    byte[] readPayload(final int length) throws IOException
    {
        final byte[] bytes = new byte[length];
        in.readFully(bytes);
        return bytes;
    }

    /** True when the server closed the connection (EOF or reset) before sending anything more. */
    boolean closedByServer()
    {
        try
        {
            return in.read() == -1;
        }
        catch (final IOException ex)
        {
            return true;
        }
    }

    @Override
    public void close() throws IOException
    {
        socket.close();
    }
}
