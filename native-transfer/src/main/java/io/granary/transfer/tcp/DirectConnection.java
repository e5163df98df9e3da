package io.granary.transfer.tcp;

import io.granary.proto.ErrorCode;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.collection.LongObjectHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;

import static io.granary.proto.ErrorCode.RPC_TIMEOUT_VALUE;
import static io.granary.proto.ErrorCode.TRANSFER_FAIL_VALUE;

/**
 * One non-blocking connection of a {@link CallerLoop} to a storage node, driven by the loop's thread: frames are
 * pipelined with request ids and written with gathering writes straight from the caller's buffers; answers are read
 * into a small staging buffer, except payloads big enough to be worth a system call of their own, which the socket
 * reads straight into the caller's buffers (one scattering read for the entries of a READV answer). Small READs
 * queued together leave as one READV, small WRITE_COMMITs as one WRITEV. Answers are matched by id and checked
 * exactly as the Netty engine checks them. Confined to the thread driving its loop.
 */
final class DirectConnection
{
    private static final Logger LOG = LoggerFactory.getLogger(DirectConnection.class);

    /** Payload parts at least this long are read by the socket straight into the caller's buffers. */
    static final int MIN_DIRECT_READ_BYTES = 16 << 10;
    /** A queued WRITE payload of at least this many bytes goes out at once (the caller computes its CRC meanwhile). */
    static final int EAGER_WRITE_BYTES = 64 << 10;
    private static final int STAGING_BYTES = 128 << 10;
    private static final int HEADER_ARENA_BYTES = 128 << 10;
    private static final int MAX_GATHER = 512;
    private static final int MAX_SCATTER = 1024;

    private enum ReadState
    {
        HEADER, PAYLOAD, VECTOR_STATUS, VECTOR_DATA, WRITE_VECTOR_STATUS, DISCARD
    }

    final String endpoint;
    /** Which of the loop's connections to {@link #endpoint} this is (0: the first, which small frames use). */
    final int lane;
    private final InetSocketAddress address;
    private final int maxVectorEntries;
    private final long transferTimeoutNs;
    private final SocketChannel channel;
    private final SelectionKey key;
    private boolean open;
    private boolean broken;
    private boolean timedOut;
    private long connectDeadlineNs;
    /** Taken from the pool for this call and not answered since: a failure now means it had gone stale. */
    private boolean unproven;
    private final CallerLoop loop;

    // Outbound: buffers in wire order; header bytes come from the arena until the queue drains.
    private final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
    private final ByteBuffer[] gather = new ByteBuffer[MAX_GATHER];
    private final ByteBuffer arena = ByteBuffer.allocateDirect(HEADER_ARENA_BYTES);
    private final ByteBuf arenaBuf = Unpooled.wrappedBuffer(arena.duplicate());
    private int arenaPosition;
    private long queuedPayloadBytes;
    private final ArrayList<DirectFrame.Slice> pendingReads = new ArrayList<>();
    private long pendingReadBytes;
    private final ArrayList<DirectFrame.Slice> pendingWrites = new ArrayList<>();
    private long pendingWriteBytes;
    private long pendingWriteTable;

    // Frames sent and not answered, by id; and in send order, for timeouts (deadlines grow with the order).
    private final LongObjectHashMap<DirectFrame> inflight = new LongObjectHashMap<>();
    private final ArrayDeque<DirectFrame> sent = new ArrayDeque<>();
    private long nextRequestId = 1;
    private long lastResponseId;

    // Inbound.
    private final ByteBuffer in = ByteBuffer.allocateDirect(STAGING_BYTES);
    private final ByteBuf inBuf = Unpooled.wrappedBuffer(in.duplicate().clear());
    private final FrameHeader header = new FrameHeader();
    private final ByteBuffer[] scatter = new ByteBuffer[MAX_SCATTER];
    private ReadState readState = ReadState.HEADER;
    private long payloadLeft;
    private DirectFrame.Slice payloadSlice;
    private DirectFrame.Vector vector;
    private DirectFrame.WriteVector writeVector;
    private byte[] vectorStatuses;
    private int vectorStatusFill;
    private int vectorEntry;

    /**
     * Opens a non-blocking connection registered with {@code selector}.
     *
     * @throws IOException when the socket cannot even be created or the connect fails at once.
     */
    DirectConnection(
        final CallerLoop loop,
        final String endpoint,
        final int lane,
        final InetSocketAddress address,
        final Selector selector,
        final int maxVectorEntries,
        final long transferTimeoutNs,
        final long connectTimeoutNs,
        final long nowNs) throws IOException
    {
        this.loop = loop;
        this.endpoint = endpoint;
        this.lane = lane;
        this.address = address;
        this.maxVectorEntries = maxVectorEntries;
        this.transferTimeoutNs = transferTimeoutNs;
        in.limit(0);
        final SocketChannel ch = SocketChannel.open();
        try
        {
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
            ch.setOption(StandardSocketOptions.SO_SNDBUF, NettyTransferEngine.SOCKET_BUFFER_BYTES);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, NettyTransferEngine.SOCKET_BUFFER_BYTES);
            open = ch.connect(address);
            key = ch.register(selector, open ? SelectionKey.OP_READ : SelectionKey.OP_CONNECT, this);
        }
        catch (final IOException | RuntimeException ex)
        {
            ch.close();
            throw ex;
        }
        this.channel = ch;
        this.connectDeadlineNs = nowNs + connectTimeoutNs;
    }

    boolean isBroken()
    {
        return broken;
    }

    /** Nothing sent and unanswered, nothing queued: the connection may serve another call. */
    boolean isIdle()
    {
        return inflight.isEmpty() && out.isEmpty() && pendingReads.isEmpty() && pendingWrites.isEmpty() &&
            readState == ReadState.HEADER && !in.hasRemaining();
    }

    /** True when it may go back to the pool: healthy, idle, and no request on it ever timed out. */
    boolean isReusable()
    {
        return open && !broken && !timedOut && isIdle();
    }

    /**
     * A pooled connection about to serve a new call: false when the peer closed it (or sent bytes nobody asked for)
     * while it sat idle; it is then closed. If it breaks before its first answer of this call (the node went away
     * and its FIN was still on the way), what it carried is sent again on a fresh connection.
     */
    boolean stillUsable()
    {
        if (broken)
        {
            return false;
        }
        if (!open)
        {
            return true;
        }
        try
        {
            in.clear();
            final int read = channel.read(in);
            in.flip();
            if (read == 0)
            {
                unproven = true;
                return true;
            }
        }
        catch (final IOException ex)
        {
            // closed below
        }
        LOG.debug("the pooled connection to {} was closed by the node while idle", endpoint);
        close();
        return false;
    }

    /**
     * Queues a frame of a transfer; small READs wait to leave together as a READV, small WRITE_COMMITs as a WRITEV
     * (a full vector leaves first).
     */
    void enqueue(final DirectFrame.Slice slice)
    {
        if (broken)
        {
            slice.finish(TRANSFER_FAIL_VALUE);
            return;
        }
        if (slice.opcode == Opcode.READ && maxVectorEntries > 1 && slice.length > 0 &&
            slice.length <= VectorRead.MAX_ENTRY_BYTES)
        {
            if (pendingReads.size() == maxVectorEntries || pendingReadBytes + slice.length > VectorRead.MAX_VECTOR_BYTES)
            {
                sendPendingReads();
            }
            pendingReads.add(slice);
            pendingReadBytes += slice.length;
            return;
        }
        if (maxVectorEntries > 1 && DirectFrame.WriteVector.fits(slice))
        {
            final long table = DirectFrame.WriteVector.tableBytes(slice);
            if (pendingWrites.size() == maxVectorEntries ||
                pendingWriteBytes + slice.length > VectorRead.MAX_VECTOR_BYTES ||
                pendingWriteTable + table > FrameDescriptor.MAX_WRITEV_TABLE)
            {
                sendPendingWrites();
                if (queuedPayloadBytes >= EAGER_WRITE_BYTES)
                {
                    flush();
                }
            }
            pendingWrites.add(slice);
            pendingWriteBytes += slice.length;
            pendingWriteTable += table;
            return;
        }
        sendPendingReads(); // keep the wire order of what the caller queued
        sendPendingWrites();
        send(slice);
        if (slice.carriesPayload())
        {
            queuedPayloadBytes += slice.length;
            if (queuedPayloadBytes >= EAGER_WRITE_BYTES)
            {
                flush();
            }
        }
    }

    /** Writes whatever the socket takes of the queued frames (pending READs and WRITE_COMMITs first become frames). */
    void flush()
    {
        sendPendingReads();
        sendPendingWrites();
        if (!open || broken || out.isEmpty())
        {
            return;
        }
        try
        {
            while (!out.isEmpty())
            {
                int n = 0;
                for (final Iterator<ByteBuffer> it = out.iterator(); it.hasNext() && n < MAX_GATHER; )
                {
                    gather[n++] = it.next();
                }
                channel.write(gather, 0, n);
                for (int i = 0; i < n && !gather[i].hasRemaining(); i++)
                {
                    out.poll();
                }
                final boolean stalled = !gather[n - 1].hasRemaining() ? false : true;
                java.util.Arrays.fill(gather, 0, n, null);
                if (stalled)
                {
                    break; // the socket buffer is full: wait until it is writable
                }
            }
        }
        catch (final IOException ex)
        {
            fail(TRANSFER_FAIL_VALUE, "write to " + endpoint + " failed: " + ex);
            return;
        }
        if (out.isEmpty())
        {
            arenaPosition = 0;
            queuedPayloadBytes = 0;
            key.interestOps(SelectionKey.OP_READ);
        }
        else
        {
            key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        }
    }

    /** The selector found this connection ready. */
    void onReady(final SelectionKey ready)
    {
        if (broken)
        {
            return;
        }
        if (!open && ready.isConnectable())
        {
            try
            {
                if (!channel.finishConnect())
                {
                    return;
                }
            }
            catch (final IOException ex)
            {
                fail(TRANSFER_FAIL_VALUE, "connect to " + endpoint + " failed: " + ex);
                return;
            }
            open = true;
            key.interestOps(SelectionKey.OP_READ);
            flush();
            return;
        }
        if (ready.isReadable())
        {
            onReadable();
        }
        if (!broken && ready.isValid() && ready.isWritable())
        {
            flush();
        }
    }

    /** Times out overdue frames (and a connect that takes too long); returns the earliest deadline still open. */
    long checkTimeouts(final long nowNs)
    {
        if (broken)
        {
            return Long.MAX_VALUE;
        }
        if (!open && nowNs - connectDeadlineNs >= 0)
        {
            fail(TRANSFER_FAIL_VALUE, "connect to " + endpoint + " timed out");
            return Long.MAX_VALUE;
        }
        DirectFrame head;
        while ((head = sent.peek()) != null)
        {
            if (head.done)
            {
                sent.poll();
                continue;
            }
            if (nowNs - head.deadlineNs < 0)
            {
                return open ? head.deadlineNs : Math.min(head.deadlineNs, connectDeadlineNs);
            }
            sent.poll();
            inflight.remove(head.requestId);
            timedOut = true;
            head.finish(RPC_TIMEOUT_VALUE);
            if (!out.isEmpty() && (head.opcode() == Opcode.WRITE || head.opcode() == Opcode.COMMIT ||
                head.opcode() == Opcode.WRITE_COMMIT || head.opcode() == Opcode.WRITEV))
            {
                // Its payload may still be queued, and the caller gets its buffer back now: drop the connection.
                fail(TRANSFER_FAIL_VALUE, "write to " + endpoint + " stalled");
                return Long.MAX_VALUE;
            }
        }
        return open ? Long.MAX_VALUE : connectDeadlineNs;
    }

    /** Closes the connection and finishes everything on it with {@code status}. */
    void fail(final int status, final String reason)
    {
        if (broken)
        {
            return;
        }
        broken = true;
        if (!inflight.isEmpty() || !pendingReads.isEmpty() || !pendingWrites.isEmpty())
        {
            LOG.debug("direct connection to {} failed with {} pending: {}", endpoint,
                inflight.size() + pendingReads.size() + pendingWrites.size(), reason);
        }
        key.cancel();
        try
        {
            channel.close();
        }
        catch (final IOException ex)
        {
            LOG.debug("closing the connection to {}: {}", endpoint, ex.toString());
        }
        out.clear();
        if (unproven && status == TRANSFER_FAIL_VALUE && !timedOut)
        {
            // A stale pooled connection: nothing reached the node's memory through it in this call (no answer came),
            // and every frame is safe to send again (a WRITE puts the same bytes in the same place).
            final ArrayList<DirectFrame.Slice> again = new ArrayList<>();
            for (final DirectFrame frame : sent)
            {
                if (!frame.done && frame instanceof DirectFrame.Entries)
                {
                    final DirectFrame.Entries v = (DirectFrame.Entries)frame;
                    again.addAll(java.util.Arrays.asList(v.slices).subList(0, v.count));
                }
                else if (!frame.done)
                {
                    again.add((DirectFrame.Slice)frame);
                }
            }
            again.addAll(pendingReads);
            again.addAll(pendingWrites);
            inflight.clear();
            sent.clear();
            pendingReads.clear();
            clearPendingWrites();
            LOG.debug("pooled connection to {} had gone stale ({}); sending {} frames again", endpoint, reason,
                again.size());
            loop.resend(endpoint, lane, again);
            return;
        }
        final ArrayList<DirectFrame> frames = new ArrayList<>(inflight.values());
        inflight.clear();
        sent.clear();
        for (final DirectFrame frame : frames)
        {
            frame.finish(status);
        }
        for (final DirectFrame.Slice slice : pendingReads)
        {
            slice.finish(status);
        }
        pendingReads.clear();
        for (final DirectFrame.Slice slice : pendingWrites)
        {
            slice.finish(status);
        }
        clearPendingWrites();
        if (payloadSlice != null)
        {
            payloadSlice.finish(status); // answered, its payload cut short
            payloadSlice = null;
        }
        if (vector != null)
        {
            vector.finish(status);
            vector = null;
        }
        if (writeVector != null)
        {
            writeVector.finish(status); // its answer cut short
            writeVector = null;
        }
    }

    /** Closes the connection for good; whatever it carried fails with TRANSFER_FAIL (never sent again). */
    void close()
    {
        unproven = false;
        fail(TRANSFER_FAIL_VALUE, "closed");
    }

    // ------------------------------------------------------------------------------------------------ sending

    private void sendPendingReads()
    {
        final int count = pendingReads.size();
        if (count == 0)
        {
            return;
        }
        if (count == 1)
        {
            send(pendingReads.get(0));
        }
        else
        {
            send(new DirectFrame.Vector(pendingReads.toArray(new DirectFrame.Slice[0]), count, pendingReadBytes));
        }
        pendingReads.clear();
        pendingReadBytes = 0;
    }

    /**
     * The small WRITE_COMMITs waiting on the connection become frames: one alone goes as it is, more as one WRITEV
     * whose values are sent straight from the callers' buffers.
     */
    private void sendPendingWrites()
    {
        final int count = pendingWrites.size();
        if (count == 0)
        {
            return;
        }
        if (count == 1)
        {
            send(pendingWrites.get(0));
        }
        else
        {
            send(new DirectFrame.WriteVector(pendingWrites.toArray(new DirectFrame.Slice[0]), count,
                pendingWriteBytes, pendingWriteTable));
        }
        queuedPayloadBytes += pendingWriteBytes;
        clearPendingWrites();
    }

    private void clearPendingWrites()
    {
        pendingWrites.clear();
        pendingWriteBytes = 0;
        pendingWriteTable = 0;
    }

    private void send(final DirectFrame frame)
    {
        frame.requestId = nextRequestId++;
        frame.deadlineNs = System.nanoTime() + transferTimeoutNs;
        inflight.put(frame.requestId, frame);
        sent.add(frame);
        out.add(encodeHeaders(frame));
        if (frame instanceof DirectFrame.Slice && ((DirectFrame.Slice)frame).carriesPayload())
        {
            final DirectFrame.Slice slice = (DirectFrame.Slice)frame;
            if (slice.record != null)
            {
                out.add(slice.record.duplicate());
            }
            out.add(slice.local.duplicate());
        }
        else if (frame instanceof DirectFrame.WriteVector)
        {
            final DirectFrame.WriteVector v = (DirectFrame.WriteVector)frame;
            for (int i = 0; i < v.count; i++)
            {
                out.add(v.slices[i].local.duplicate()); // the table went with the header
            }
        }
    }

    private ByteBuffer encodeHeaders(final DirectFrame frame)
    {
        final int bytes = frame.headerBytes();
        if (arenaPosition + bytes <= HEADER_ARENA_BYTES)
        {
            arenaBuf.setIndex(arenaPosition, arenaPosition);
            frame.encode(arenaBuf);
            final ByteBuffer view = arena.duplicate();
            view.limit(arenaPosition + bytes).position(arenaPosition);
            arenaPosition += bytes;
            return view;
        }
        final ByteBuf heap = Unpooled.buffer(bytes, bytes);
        frame.encode(heap);
        return heap.nioBuffer();
    }

    // ------------------------------------------------------------------------------------------------ receiving

    private void onReadable()
    {
        try
        {
            while (!broken)
            {
                switch (readState)
                {
                    case HEADER:
                        if (in.remaining() < FrameDescriptor.HEADER_LENGTH)
                        {
                            if (!fill(headerReadLimit()))
                            {
                                return;
                            }
                            continue;
                        }
                        inBuf.setIndex(in.position(), in.limit());
                        final int decoded = header.decode(inBuf, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
                        in.position(in.position() + FrameDescriptor.HEADER_LENGTH);
                        if (decoded != FrameHeader.DECODE_OK || !Opcode.isResponse(header.opcode))
                        {
                            protocolError(decoded != FrameHeader.DECODE_OK ? FrameHeader.decodeErrorText(decoded) :
                                "request opcode in a response stream");
                            return;
                        }
                        onHeader();
                        break;
                    case PAYLOAD:
                        if (!readPayload())
                        {
                            return;
                        }
                        break;
                    case VECTOR_STATUS:
                        if (!readVectorStatuses())
                        {
                            return;
                        }
                        break;
                    case VECTOR_DATA:
                        if (!readVectorData())
                        {
                            return;
                        }
                        break;
                    case WRITE_VECTOR_STATUS:
                        if (!readWriteVectorStatuses())
                        {
                            return;
                        }
                        break;
                    case DISCARD:
                    default:
                        if (!discard())
                        {
                            return;
                        }
                        break;
                }
            }
        }
        catch (final IOException ex)
        {
            fail(TRANSFER_FAIL_VALUE, "read from " + endpoint + " failed: " + ex);
        }
    }

    /** When the next answer is probably a big READ, read its header alone so that its payload lands in place. */
    private int headerReadLimit()
    {
        final DirectFrame next = inflight.get(lastResponseId + 1);
        if (next instanceof DirectFrame.Slice && ((DirectFrame.Slice)next).opcode == Opcode.READ &&
            ((DirectFrame.Slice)next).length >= MIN_DIRECT_READ_BYTES)
        {
            return FrameDescriptor.HEADER_LENGTH - in.remaining();
        }
        return 0;
    }

    /**
     * Reads more bytes into the staging buffer, at most {@code limit} (0 = as many as fit).
     *
     * @return false when the socket had none (wait for the selector); the connection fails on end of stream.
     */
    private boolean fill(final int limit) throws IOException
    {
        in.compact();
        if (limit > 0)
        {
            in.limit(Math.min(in.capacity(), in.position() + limit));
        }
        final int read;
        try
        {
            read = channel.read(in);
        }
        finally
        {
            in.flip();
        }
        if (read < 0)
        {
            fail(TRANSFER_FAIL_VALUE, "connection closed by " + endpoint);
            return false;
        }
        return read > 0;
    }

    private void onHeader()
    {
        unproven = false;
        final long id = header.requestId;
        if (id <= 0 || id >= nextRequestId)
        {
            protocolError("response " + header + " to a request id this connection never sent");
            return;
        }
        lastResponseId = id;
        final DirectFrame frame = inflight.remove(id);
        final boolean hasPayload = header.hasPayload();
        if (frame != null && (header.opcode != (frame.opcode() | Opcode.RESPONSE_BIT) || !frame.echoedBy(header) ||
            (hasPayload && !acceptsPayload(frame, header.length))))
        {
            frame.finish(TRANSFER_FAIL_VALUE);
            protocolError("response " + header + " does not echo its request " + frame);
            return;
        }
        if (header.status > 0 || (header.status < 0 && ErrorCode.forNumber(header.status) == null))
        {
            if (frame != null)
            {
                frame.finish(TRANSFER_FAIL_VALUE);
            }
            protocolError("response " + header + " carries an unknown status");
            return;
        }
        if (!hasPayload || header.length == 0)
        {
            if (frame != null)
            {
                frame.finish(header.status);
            }
            return;
        }
        payloadLeft = header.length;
        if (frame instanceof DirectFrame.Slice)
        {
            payloadSlice = (DirectFrame.Slice)frame;
            readState = ReadState.PAYLOAD;
        }
        else if (frame instanceof DirectFrame.Vector)
        {
            vector = (DirectFrame.Vector)frame;
            vectorStatuses = new byte[vector.count * FrameDescriptor.VECTOR_STATUS_LENGTH];
            vectorStatusFill = 0;
            readState = ReadState.VECTOR_STATUS;
        }
        else if (frame instanceof DirectFrame.WriteVector)
        {
            writeVector = (DirectFrame.WriteVector)frame;
            vectorStatuses = new byte[writeVector.count * FrameDescriptor.VECTOR_STATUS_LENGTH];
            vectorStatusFill = 0;
            readState = ReadState.WRITE_VECTOR_STATUS;
        }
        else
        {
            readState = ReadState.DISCARD; // the request timed out: skip its bytes
        }
    }

    private static boolean acceptsPayload(final DirectFrame frame, final long length)
    {
        if (frame instanceof DirectFrame.Entries)
        {
            return ((DirectFrame.Entries)frame).acceptsPayload(length);
        }
        return frame.opcode() == Opcode.READ && length == ((DirectFrame.Slice)frame).length;
    }

    /** A READ answer's payload into the slice's buffer; false when the socket has nothing more for now. */
    private boolean readPayload() throws IOException
    {
        final DirectFrame.Slice slice = payloadSlice;
        if (slice == null || slice.done)
        {
            readState = ReadState.DISCARD; // timed out meanwhile: the caller's buffer is no longer ours
            payloadSlice = null;
            return true;
        }
        final ByteBuffer dst = slice.local;
        if (in.hasRemaining())
        {
            payloadLeft -= copyStaged(dst, (int)Math.min(in.remaining(), payloadLeft));
        }
        else if (payloadLeft >= MIN_DIRECT_READ_BYTES)
        {
            if (!consumed(channel.read(dst)))
            {
                return false;
            }
        }
        else if (!fill(0))
        {
            return false;
        }
        if (payloadLeft == 0)
        {
            payloadSlice = null;
            readState = ReadState.HEADER;
            slice.finish(0);
        }
        return true;
    }

    /**
     * Accounts a read the socket made straight into the caller's buffers: false when it had nothing for now, or the
     * stream ended (the connection then fails).
     */
    private boolean consumed(final long read)
    {
        if (read < 0)
        {
            fail(TRANSFER_FAIL_VALUE, "connection closed by " + endpoint);
            return false;
        }
        payloadLeft -= read;
        return read > 0;
    }

    private int copyStaged(final ByteBuffer dst, final int count)
    {
        final int limit = in.limit();
        in.limit(in.position() + count);
        dst.put(in);
        in.limit(limit);
        return count;
    }

    /**
     * Moves a vector answer's status bytes from the staging buffer (reading more when it is empty) into
     * {@link #vectorStatuses}.
     *
     * @return false when the socket had nothing for now.
     */
    private boolean takeStatuses() throws IOException
    {
        if (!in.hasRemaining() && !fill(0))
        {
            return false;
        }
        final int n = Math.min(in.remaining(), vectorStatuses.length - vectorStatusFill);
        in.get(vectorStatuses, vectorStatusFill, n);
        vectorStatusFill += n;
        payloadLeft -= n;
        return true;
    }

    private boolean readVectorStatuses() throws IOException
    {
        final DirectFrame.Vector v = vector;
        if (!takeStatuses())
        {
            return false;
        }
        if (vectorStatusFill < vectorStatuses.length)
        {
            return true;
        }
        long expected = 0;
        for (int i = 0; i < v.count; i++)
        {
            if (vectorStatus(i) == 0)
            {
                expected += v.slices[i].length;
            }
        }
        if (expected != payloadLeft)
        {
            // The vector's reads fail; the frame length still holds, so the stream stays in sync past its bytes.
            LOG.debug("READV answer from {} announced {} entry bytes for statuses worth {}", endpoint, payloadLeft,
                expected);
            v.finish(TRANSFER_FAIL_VALUE);
            vector = null;
            vectorStatuses = null;
            readState = ReadState.DISCARD;
            return true;
        }
        for (int i = 0; i < v.count; i++)
        {
            final int status = vectorStatus(i);
            if (status != 0)
            {
                if (status > 0 || ErrorCode.forNumber(status) == null)
                {
                    protocolError("READV answer carries an unknown status " + status);
                    return false;
                }
                if (!v.done)
                {
                    v.slices[i].finish(status);
                }
            }
        }
        vectorEntry = nextGoodEntry(-1);
        if (payloadLeft == 0)
        {
            endVector();
        }
        else
        {
            readState = ReadState.VECTOR_DATA;
        }
        return true;
    }

    /**
     * A WRITEV answer's statuses (its whole payload): once all are in, each entry completes with its own; a status
     * that is no ErrorCode number closes the connection (every entry fails with TRANSFER_FAIL).
     */
    private boolean readWriteVectorStatuses() throws IOException
    {
        final DirectFrame.WriteVector v = writeVector;
        if (!takeStatuses())
        {
            return false;
        }
        if (vectorStatusFill < vectorStatuses.length)
        {
            return true;
        }
        for (int i = 0; i < v.count; i++)
        {
            final int status = vectorStatus(i);
            if (status > 0 || (status < 0 && ErrorCode.forNumber(status) == null))
            {
                protocolError("WRITEV answer carries an unknown status " + status); // fails writeVector too
                return false;
            }
        }
        writeVector = null;
        readState = ReadState.HEADER;
        for (int i = 0; i < v.count; i++)
        {
            v.slices[i].finish(vectorStatus(i)); // a vector that timed out meanwhile has finished its entries
        }
        vectorStatuses = null;
        v.finish(TRANSFER_FAIL_VALUE); // every entry is answered by now; this only marks the vector done
        return true;
    }

    private int vectorStatus(final int i)
    {
        final int at = i * FrameDescriptor.VECTOR_STATUS_LENGTH;
        return ((vectorStatuses[at] & 0xFF) << 24) | ((vectorStatuses[at + 1] & 0xFF) << 16) |
            ((vectorStatuses[at + 2] & 0xFF) << 8) | (vectorStatuses[at + 3] & 0xFF);
    }

    private int nextGoodEntry(final int from)
    {
        int i = from + 1;
        while (i < vector.count && vectorStatus(i) != 0)
        {
            i++;
        }
        return i;
    }

    private boolean readVectorData() throws IOException
    {
        final DirectFrame.Vector v = vector;
        if (v.done)
        {
            readState = ReadState.DISCARD; // timed out meanwhile
            vector = null;
            return true;
        }
        if (in.hasRemaining())
        {
            final ByteBuffer dst = v.slices[vectorEntry].local;
            payloadLeft -= copyStaged(dst, Math.min(in.remaining(), dst.remaining()));
        }
        else if (payloadLeft >= MIN_DIRECT_READ_BYTES)
        {
            // One scattering read puts the next entries straight into their buffers.
            int n = 0;
            for (int i = vectorEntry; i < v.count && n < MAX_SCATTER; i = nextGoodEntry(i))
            {
                scatter[n++] = v.slices[i].local;
            }
            final long read;
            try
            {
                read = channel.read(scatter, 0, n);
            }
            finally
            {
                java.util.Arrays.fill(scatter, 0, n, null);
            }
            if (!consumed(read))
            {
                return false;
            }
        }
        else if (!fill(0))
        {
            return false;
        }
        while (vectorEntry < v.count && !v.slices[vectorEntry].local.hasRemaining())
        {
            v.slices[vectorEntry].finish(0);
            vectorEntry = nextGoodEntry(vectorEntry);
        }
        if (payloadLeft == 0)
        {
            endVector();
        }
        return true;
    }

    private void endVector()
    {
        final DirectFrame.Vector v = vector;
        vector = null;
        vectorStatuses = null;
        readState = ReadState.HEADER;
        v.finish(TRANSFER_FAIL_VALUE); // every entry is answered by now; this only marks the vector done
    }

    private boolean discard() throws IOException
    {
        if (payloadLeft == 0)
        {
            readState = ReadState.HEADER;
            return true;
        }
        if (!in.hasRemaining() && !fill(0))
        {
            return false;
        }
        final int n = (int)Math.min(in.remaining(), payloadLeft);
        in.position(in.position() + n);
        payloadLeft -= n;
        if (payloadLeft == 0)
        {
            readState = ReadState.HEADER;
        }
        return true;
    }

    private void protocolError(final String reason)
    {
        LOG.warn("closing the direct connection to {}: {}", endpoint, reason);
        fail(TRANSFER_FAIL_VALUE, reason);
    }

    @Override
    public String toString()
    {
        return "direct connection to " + endpoint + " (" + address + ")";
    }
}
