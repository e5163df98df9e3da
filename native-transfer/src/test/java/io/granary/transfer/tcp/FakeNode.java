package io.granary.transfer.tcp;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A scripted storage node on blocking sockets for engine tests: records request headers as they arrive
 * and answers them (or not) according to its mode, in order per connection. READ responses carry bytes
 * whose value is the low byte of their remote offset, so tests can check where every byte landed. A READV or WRITEV
 * is recorded entry by entry and answered as one frame, every entry OK.
 */
final class FakeNode implements AutoCloseable
{
    enum Mode
    {
        /** Reads every frame, answers none. */
        SILENT,
        /** Reads frames, answers each (in order per connection) once the gate opens or the test lets it. */
        ANSWER,
        /** Closes the first connection at once, answers on later ones. */
        DROP_FIRST_CONNECTION,
        /** Accepts but never reads. */
        NO_READ
    }

    private static final FrameHeader END_OF_STREAM = new FrameHeader();
    /** The READ entries of each READV header being answered (the header itself is what the responder queues). */
    private final Map<FrameHeader, List<FrameHeader>> vectors = new ConcurrentHashMap<>();
    /** Every WRITEV header received, with its connection (its entries are recorded as WRITE_COMMIT requests). */
    private final Queue<Received> writeVectors = new ConcurrentLinkedQueue<>();

    /** A request header and the number of the connection it came on (1 = first accepted). */
    record Received(int connection, FrameHeader header)
    {
    }

    private final Mode mode;
    private final ServerSocket serverSocket;
    /** One permit per response; fair, so that connections waiting to answer take turns. */
    private final Semaphore gate = new Semaphore(0, true);
    private final AtomicBoolean gateOpen = new AtomicBoolean();
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final List<Thread> threads = new CopyOnWriteArrayList<>();
    private final Queue<FrameHeader> requests = new ConcurrentLinkedQueue<>();
    private final Queue<Received> received = new ConcurrentLinkedQueue<>();
    private final Queue<Received> answered = new ConcurrentLinkedQueue<>();
    private final AtomicInteger connections = new AtomicInteger();
    private final CountDownLatch closedByPeer = new CountDownLatch(1);

    FakeNode(final Mode mode) throws IOException
    {
        this.mode = mode;
        serverSocket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        if (mode != Mode.ANSWER)
        {
            openGate(); // only ANSWER waits for the test to open the gate
        }
        start(this::acceptLoop, "fake-node-accept");
    }

    String endpoint()
    {
        return "127.0.0.1:" + serverSocket.getLocalPort();
    }

    /** Lets every response, held or future, go. */
    void openGate()
    {
        if (gateOpen.compareAndSet(false, true))
        {
            gate.release(Integer.MAX_VALUE / 2);
        }
    }

    /** Lets {@code responses} more responses go (whichever connections are first in line). */
    void answer(final int responses)
    {
        gate.release(responses);
    }

    int connections()
    {
        return connections.get();
    }

    /** Closes every accepted connection (the node keeps listening), as a restarted node would. */
    void dropConnections() throws IOException
    {
        for (final Socket socket : sockets)
        {
            socket.close();
        }
    }

    Queue<FrameHeader> requests()
    {
        return requests;
    }

    /** Every request header in arrival order, with its connection. */
    Queue<Received> received()
    {
        return received;
    }

    /** Every WRITEV header in arrival order, with its connection; {@link #received} holds its entries. */
    Queue<Received> writeVectors()
    {
        return writeVectors;
    }

    /** Every request header answered so far (recorded just before its response is written), with its connection. */
    Queue<Received> answered()
    {
        return answered;
    }

    /** Waits until a client closed a connection (EOF). */
    boolean awaitClosedByPeer(final long timeoutMs) throws InterruptedException
    {
        return closedByPeer.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    private void start(final Runnable task, final String name)
    {
        final Thread t = new Thread(task, name);
        t.setDaemon(true);
        threads.add(t);
        t.start();
    }

    private void acceptLoop()
    {
        try
        {
            while (!serverSocket.isClosed())
            {
                final Socket socket = serverSocket.accept();
                sockets.add(socket);
                final int number = connections.incrementAndGet();
                if (mode == Mode.DROP_FIRST_CONNECTION && number == 1)
                {
                    socket.close();
                    continue;
                }
                if (mode != Mode.NO_READ)
                {
                    start(() -> serve(socket, number), "fake-node-conn-" + number);
                }
            }
        }
        catch (final IOException ex)
        {
            // closed
        }
    }

    /** Reads every frame as it arrives; a responder thread answers them in order as permits allow. */
    private void serve(final Socket socket, final int number)
    {
        final byte[] headerBytes = new byte[FrameDescriptor.HEADER_LENGTH];
        final ByteBuf headerBuf = Unpooled.wrappedBuffer(headerBytes);
        final BlockingQueue<FrameHeader> toAnswer = new LinkedBlockingQueue<>();
        try
        {
            final DataInputStream in = new DataInputStream(socket.getInputStream());
            final OutputStream out = socket.getOutputStream();
            if (mode != Mode.SILENT)
            {
                start(() -> answerInOrder(toAnswer, out, number), "fake-node-answer");
            }
            while (true)
            {
                in.readFully(headerBytes);
                headerBuf.setIndex(0, headerBytes.length);
                final FrameHeader header = new FrameHeader();
                header.decode(headerBuf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                if (header.opcode == Opcode.READV)
                {
                    // Record each READ entry as a request of its own; answer the vector as one frame.
                    final List<FrameHeader> entries = new ArrayList<>();
                    for (long i = 0; i < header.length / FrameDescriptor.HEADER_LENGTH; i++)
                    {
                        in.readFully(headerBytes);
                        headerBuf.setIndex(0, headerBytes.length);
                        final FrameHeader entry = new FrameHeader();
                        entry.decode(headerBuf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                        entries.add(entry);
                        requests.add(entry);
                    }
                    vectors.put(header, entries);
                    toAnswer.add(header);
                    continue;
                }
                if (header.opcode == Opcode.WRITEV)
                {
                    // Record each WRITE_COMMIT entry as a request of its own; answer the vector as one frame.
                    writeVectors.add(new Received(number, header));
                    for (int i = 0; i < header.flags; i++)
                    {
                        in.readFully(headerBytes);
                        headerBuf.setIndex(0, headerBytes.length);
                        final FrameHeader entry = new FrameHeader();
                        entry.decode(headerBuf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                        requests.add(entry);
                        received.add(new Received(number, entry));
                    }
                    in.skipNBytes(header.length - (long)header.flags * FrameDescriptor.HEADER_LENGTH);
                    toAnswer.add(header);
                    continue;
                }
                requests.add(header);
                received.add(new Received(number, header));
                if (header.hasPayload())
                {
                    in.skipNBytes(header.length + (header.opcode == Opcode.WRITE_COMMIT ? header.flags : 0));
                }
                toAnswer.add(header);
            }
        }
        catch (final EOFException ex)
        {
            closedByPeer.countDown();
        }
        catch (final IOException ex)
        {
            // closed
        }
        finally
        {
            toAnswer.add(END_OF_STREAM);
            headerBuf.release();
        }
    }

    private void answerInOrder(final BlockingQueue<FrameHeader> toAnswer, final OutputStream out, final int number)
    {
        try
        {
            FrameHeader header;
            while ((header = toAnswer.take()) != END_OF_STREAM)
            {
                gate.acquire();
                answered.add(new Received(number, header));
                respond(out, header);
            }
        }
        catch (final IOException | InterruptedException ex)
        {
            // closed
        }
    }

    private void respond(final OutputStream out, final FrameHeader request) throws IOException
    {
        final List<FrameHeader> entries = vectors.remove(request);
        if (entries != null)
        {
            respondToVector(out, request, entries);
            return;
        }
        if (request.opcode == Opcode.WRITEV)
        {
            respondToWriteVector(out, request);
            return;
        }
        final int responseOpcode = request.opcode | Opcode.RESPONSE_BIT;
        final boolean payload = request.opcode == Opcode.READ;
        final ByteBuf frame = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH + (payload ? (int)request.length : 0));
        try
        {
            FrameHeader.encode(frame, responseOpcode, 0, request.requestId, request.segmentId, 0, request.offset,
                request.length, 0, null);
            if (payload)
            {
                for (long i = 0; i < request.length; i++)
                {
                    frame.writeByte((int)(request.offset + i));
                }
            }
            out.write(frame.array(), frame.arrayOffset(), frame.readableBytes());
            out.flush();
        }
        finally
        {
            frame.release();
        }
    }

    /** Every entry succeeds: statuses 0, then each entry's bytes (the low byte of their remote offset). */
    private static void respondToVector(final OutputStream out, final FrameHeader request, final List<FrameHeader> entries)
        throws IOException
    {
        long payload = (long)entries.size() * FrameDescriptor.VECTOR_STATUS_LENGTH;
        for (final FrameHeader entry : entries)
        {
            payload += entry.length;
        }
        final ByteBuf frame = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH + (int)payload);
        try
        {
            FrameHeader.encode(frame, Opcode.READV_RESPONSE, 0, request.requestId, 0, 0, 0, payload, 0, null);
            for (int i = 0; i < entries.size(); i++)
            {
                frame.writeInt(0);
            }
            for (final FrameHeader entry : entries)
            {
                for (long i = 0; i < entry.length; i++)
                {
                    frame.writeByte((int)(entry.offset + i));
                }
            }
            out.write(frame.array(), frame.arrayOffset(), frame.readableBytes());
            out.flush();
        }
        finally
        {
            frame.release();
        }
    }

    /** Every entry succeeds: a status 0 per entry. */
    private static void respondToWriteVector(final OutputStream out, final FrameHeader request) throws IOException
    {
        final int statuses = request.flags * FrameDescriptor.VECTOR_STATUS_LENGTH;
        final ByteBuf frame = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH + statuses);
        try
        {
            FrameHeader.encode(frame, Opcode.WRITEV_RESPONSE, 0, request.requestId, 0, 0, 0, statuses, 0, null);
            frame.writeZero(statuses);
            out.write(frame.array(), frame.arrayOffset(), frame.readableBytes());
            out.flush();
        }
        finally
        {
            frame.release();
        }
    }

    @Override
    public void close() throws Exception
    {
        openGate();
        serverSocket.close();
        for (final Socket socket : sockets)
        {
            socket.close();
        }
        for (final Thread thread : threads)
        {
            thread.join(5_000);
        }
    }
}
