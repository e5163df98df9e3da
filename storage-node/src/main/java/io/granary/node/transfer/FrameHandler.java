package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.CommitRecord;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.HeaderAssembler;
import io.granary.protocol.Opcode;
import io.granary.protocol.QpInfo;
import io.granary.transfer.tcp.InPlaceReceiveAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS_VALUE;

/**
 * Serves the frames of one client connection: a state machine that reads a 64-byte header, checks the
 * access token, segment and range before any byte moves, streams WRITE payloads straight into segment memory and
 * sends READ payloads from it without copying. A WRITE first removes the ledger entries its range overlaps; a
 * COMMIT (checked like a WRITE of its extent, token included) records its extent in the segment's ledger unless a
 * WRITE of that extent failed on this connection. A WRITE_COMMIT is a WRITE and its COMMIT in one frame, a READV many
 * READs and a WRITEV many WRITE_COMMITs, each answered once. An RDMA_CONNECT is checked and answered UNAVAILABLE:
 * this server has no RDMA transport (the native server's answer where no device exists), and a LOCAL_CONNECT likewise
 * (same-host copies are the native server's). Runs on the connection's event loop only.
 */
final class FrameHandler extends ChannelInboundHandlerAdapter implements InPlaceReceiveAllocator.Receiver
{
    private static final Logger LOG = LoggerFactory.getLogger(FrameHandler.class);

    private final TransferServer server;
    private final SegmentRegistry registry;
    private final int maxFrameBytes;
    private final FrameHeader header = new FrameHeader();
    private final AccessTokenVerifier verifier;
    private final AccessTokenVerifier.Checker tokens;
    private HeaderAssembler headers;
    private boolean broken;
    private boolean flushPending;

    // The WRITE whose payload is arriving; writeAddress 0 means discard (rejected request).
    private long writeRemaining;
    private long writeAddress;
    private int writeStatus;
    private long writeRequestId;
    private int writeSegmentId;
    private long writeOffset;
    private long writeLength;
    private long writeStartNs;
    // A view over segment memory handed to the socket read; the next channelRead of it only counts bytes.
    private ByteBuf inPlace;
    private boolean lastWriteLarge;
    // The WRITE is a WRITE_COMMIT's: its record is in commitPayload, checked and recorded once the bytes are in.
    private boolean writeCommit;
    // The COMMIT payload arriving is the record at the head of a WRITE_COMMIT (its WRITE part follows).
    private boolean recordPending;

    // The COMMIT whose payload is arriving; commitPayload null means discard (too long).
    private long commitRemaining;
    private byte[] commitPayload;
    private int commitFilled;
    private long commitRequestId;
    private int commitSegmentId;
    private long commitOffset;
    private long commitLength;
    // The COMMIT's header, kept to check its token as a WRITE of the committed extent once the record is in.
    private final FrameHeader commitHeader = new FrameHeader();
    /**
     * WRITEs refused on this connection, by (segment, offset): a COMMIT of an extent one of them started in (the
     * value's WRITE or a slice of it) must be refused too. Bounded.
     */
    private final Map<Long, FailedWrite> failedWrites = new LinkedHashMap<>(16, 0.75f, false)
    {
        @Override
        protected boolean removeEldestEntry(final Map.Entry<Long, FailedWrite> eldest)
        {
            return size() > MAX_FAILED_WRITES_REMEMBERED;
        }
    };
    private static final int MAX_FAILED_WRITES_REMEMBERED = 4096;

    // The READV whose entries are arriving; vectorEntries null means discard (malformed vector).
    private final FrameHeader entry = new FrameHeader();
    private long vectorRemaining;
    private long vectorRequestId;
    private ByteBuf vectorEntries;
    private final boolean receiveInPlace;

    // The WRITEV whose payload is arriving (docs/protocol.md, "WRITEV"): first its table, collected in writevTable
    // (null: the vector is refused whole and writevRemaining bytes are discarded), then its values one by one as
    // WRITE payloads (writeAddress, writeRemaining) while writevStatuses is set.
    private long writevRequestId;
    private long writevRemaining;
    private ByteBuf writevTable;
    private int writevCount;
    private long writevValueBytes;
    private int[] writevStatuses;
    private long[] writevAddresses;
    private long[] writevLengths;
    private int writevNext;

    // The RDMA_CONNECT whose record is arriving; rdmaRecord null means discard (not a 64-byte record).
    private long rdmaRemaining;
    private byte[] rdmaRecord;
    private int rdmaFilled;
    private long rdmaRequestId;
    private int rdmaSegmentId;
    private boolean rdmaHeaderValid;

    /** @param receiveInPlace let WRITE payloads land in segment memory straight from the socket (not with TLS). */
    FrameHandler(
        final TransferServer server,
        final SegmentRegistry registry,
        final int maxFrameBytes,
        final boolean receiveInPlace)
    {
        this.server = server;
        this.registry = registry;
        this.maxFrameBytes = maxFrameBytes;
        this.receiveInPlace = receiveInPlace && MemoryCopier.ZERO_COPY_READS;
        this.verifier = server.tokenVerifier();
        this.tokens = verifier.newChecker();
    }

    @Override
    public void handlerAdded(final ChannelHandlerContext ctx)
    {
        headers = new HeaderAssembler(ctx.alloc());
        if (receiveInPlace)
        {
            ctx.channel().config().setRecvByteBufAllocator(new InPlaceReceiveAllocator(this));
        }
    }

    @Override
    public int nextReadLimit()
    {
        // After a large WRITE the next frame is likely another one: read its header alone, then the
        // payload in place. Streams of small frames keep reading in big batches.
        return lastWriteLarge && writeRemaining == 0 && !broken ? FrameDescriptor.HEADER_LENGTH : 0;
    }

    @Override
    public ByteBuf inPlaceBuffer()
    {
        if (broken || writeAddress == 0 || writeRemaining < InPlaceReceiveAllocator.MIN_IN_PLACE_BYTES)
        {
            return null;
        }
        inPlace = Unpooled.wrappedBuffer(writeAddress, (int)writeRemaining, false).clear();
        return inPlace;
    }

    @Override
    public void handlerRemoved(final ChannelHandlerContext ctx)
    {
        if (headers != null)
        {
            headers.release();
            headers = null;
        }
        if (vectorEntries != null)
        {
            vectorEntries.release();
            vectorEntries = null;
        }
        if (writevTable != null)
        {
            writevTable.release();
            writevTable = null;
        }
    }

    @Override
    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
        final ByteBuf in = (ByteBuf)msg;
        if (in == inPlace)
        {
            inPlace = null;
            receivedInPlace(ctx, in);
            return;
        }
        try
        {
            if (broken)
            {
                return;
            }
            server.onBytesIn(in.readableBytes());
            while (in.isReadable())
            {
                if (writeRemaining > 0)
                {
                    consumeWritePayload(ctx, in);
                    continue;
                }
                if (commitRemaining > 0)
                {
                    consumeCommitPayload(ctx, in);
                    continue;
                }
                if (vectorRemaining > 0)
                {
                    consumeVectorEntries(ctx, in);
                    continue;
                }
                if (writevRemaining > 0)
                {
                    consumeWritevBytes(ctx, in);
                    continue;
                }
                if (rdmaRemaining > 0)
                {
                    consumeRdmaRecord(ctx, in);
                    continue;
                }

                int result = headers.decodeNext(in, header, maxFrameBytes);
                if (result == HeaderAssembler.NEED_MORE)
                {
                    break;
                }
                if (result == FrameHeader.DECODE_OK && !Opcode.isRequest(header.opcode))
                {
                    result = FrameHeader.DECODE_BAD_OPCODE;
                }
                if (result != FrameHeader.DECODE_OK)
                {
                    // The stream cannot be resynchronised: say why once and hang up.
                    broken = true;
                    server.onProtocolError();
                    LOG.warn("closing transfer connection from {}: {} ({}, max frame {} bytes)",
                        ctx.channel().remoteAddress(), FrameHeader.decodeErrorText(result), header, maxFrameBytes);
                    ctx.close();
                    return;
                }
                onRequest(ctx);
            }
        }
        finally
        {
            in.release();
        }
    }

    private void onRequest(final ChannelHandlerContext ctx)
    {
        if (header.opcode != Opcode.READV && header.opcode != Opcode.WRITEV)
        {
            server.onRequest(); // a READV or WRITEV counts its entries once they are in
        }
        switch (header.opcode)
        {
            case Opcode.READ:
                onRead(ctx);
                break;

            case Opcode.WRITE:
                onWrite(ctx);
                break;

            case Opcode.COMMIT:
                onCommit(ctx);
                break;

            case Opcode.READV:
                onReadv(ctx);
                break;

            case Opcode.RDMA_CONNECT:
                onRdmaConnect(ctx);
                break;

            case Opcode.WRITE_COMMIT:
                onWriteCommit(ctx);
                break;

            case Opcode.WRITEV:
                onWritev(ctx);
                break;

            case Opcode.LOCAL_CONNECT:
                onLocalConnect(ctx);
                break;

            default:
                respond(ctx, Opcode.PING_RESPONSE, header.requestId, header.segmentId, 0, header.offset, header.length);
                break;
        }
    }

    /**
     * A LOCAL_CONNECT (docs/protocol.md): no payload; INVALID_PARAMS for a nonzero status, offset or length, else
     * UNAVAILABLE: this server never hands out segment addresses (same-host copies are the native server's).
     */
    private void onLocalConnect(final ChannelHandlerContext ctx)
    {
        lastWriteLarge = false;
        final boolean wellFormed = header.status == 0 && header.offset == 0 && header.length == 0;
        server.onErrorResponse();
        respond(ctx, Opcode.LOCAL_CONNECT_RESPONSE, header.requestId, header.segmentId,
            wellFormed ? UNAVAILABLE_IN_CURRENT_STATUS_VALUE : INVALID_PARAMS_VALUE, 0, 0);
    }

    private void onRead(final ChannelHandlerContext ctx)
    {
        final long startNs = System.nanoTime();
        lastWriteLarge = false;
        final Segment segment = registry.get(header.segmentId);
        final int status = check(segment, header);
        respond(ctx, Opcode.READ_RESPONSE, header.requestId, header.segmentId, status, header.offset, header.length);
        if (status == 0)
        {
            final int length = (int)header.length;
            ctx.write(MemoryCopier.readView(ctx.alloc(), segment.address() + header.offset, length), ctx.voidPromise());
            server.onBytesOut(length);
        }
        server.metrics().recordRead(System.nanoTime() - startNs);
    }

    private void onWrite(final ChannelHandlerContext ctx)
    {
        writeStartNs = System.nanoTime();
        startWrite(ctx, 0, false);
    }

    /**
     * A WRITE_COMMIT (docs/protocol.md, "WRITE_COMMIT"): its record ({@code flags} bytes) arrives first and is kept
     * as a COMMIT's payload would be; then its WRITE part is checked and received as a WRITE frame's; the record is
     * checked and recorded once the bytes are in, and one answer says how both went.
     */
    private void onWriteCommit(final ChannelHandlerContext ctx)
    {
        writeStartNs = System.nanoTime();
        lastWriteLarge = false;
        expectCommitPayload(header.flags);
        recordPending = true;
        if (commitRemaining == 0)
        {
            finishCommit(ctx);
        }
    }

    /**
     * The WRITE part of a WRITE or WRITE_COMMIT in {@link #header}: {@code refusal} when nonzero, else the checks of
     * a WRITE (the token as a WRITE token), then the ledger forgets what the range held; the bytes go to segment
     * memory, or are discarded when refused.
     */
    private void startWrite(final ChannelHandlerContext ctx, final int refusal, final boolean withCommit)
    {
        writeCommit = withCommit;
        final Segment segment = registry.get(header.segmentId);
        if (refusal != 0)
        {
            server.onErrorResponse();
            writeStatus = refusal;
        }
        else
        {
            writeStatus = admitWrite(segment, header);
        }
        writeAddress = writeStatus == 0 ? segment.address() + header.offset : 0;
        writeRemaining = header.length;
        writeRequestId = header.requestId;
        writeSegmentId = header.segmentId;
        writeOffset = header.offset;
        writeLength = header.length;
        lastWriteLarge = writeAddress != 0 && writeRemaining >= InPlaceReceiveAllocator.MIN_IN_PLACE_BYTES;
        if (writeRemaining == 0)
        {
            finishWrite(ctx);
        }
    }

    /**
     * The WRITE part of a WRITE, WRITE_COMMIT or WRITEV entry before any of its bytes move: the checks of a WRITE
     * (the token as a WRITE token, whatever the request's opcode), then the ledger forgets what the range held.
     *
     * @return 0 when the bytes may go to {@code segment}'s memory, else the status to answer.
     */
    private int admitWrite(final Segment segment, final FrameHeader request)
    {
        final int opcode = request.opcode;
        request.opcode = Opcode.WRITE;
        final int status = check(segment, request);
        request.opcode = opcode;
        return status == 0 ? invalidateLedger(segment, request) : status;
    }

    /**
     * Validation of one request (a READ, a WRITE, a READV or WRITEV entry) before any byte moves: status 0, then
     * access token, then segment known, then range non-empty and inside it.
     */
    private int check(final Segment segment, final FrameHeader request)
    {
        if (request.status != 0)
        {
            server.onErrorResponse();
            return INVALID_PARAMS_VALUE;
        }
        final int tokenStatus = checkToken(request);
        if (tokenStatus != 0)
        {
            server.onErrorResponse();
            return tokenStatus;
        }
        if (segment == null)
        {
            server.onErrorResponse();
            return SEGMENT_NOT_FOUND_VALUE;
        }
        if (request.length == 0 || !segment.contains(request.offset, request.length))
        {
            server.onErrorResponse();
            return INVALID_PARAMS_VALUE;
        }
        return 0;
    }

    /** A READV header: its payload is the entries, collected (at most 64 KiB) and answered once complete. */
    private void onReadv(final ChannelHandlerContext ctx)
    {
        lastWriteLarge = false;
        final long length = header.length;
        vectorRequestId = header.requestId;
        vectorRemaining = length;
        // A request's status is 0; a vector header that says otherwise is refused whole, like a bad length.
        final boolean wellFormed = header.status == 0 && length > 0 && length % FrameDescriptor.HEADER_LENGTH == 0 &&
            length / FrameDescriptor.HEADER_LENGTH <= FrameDescriptor.MAX_VECTOR_ENTRIES;
        vectorEntries = wellFormed ? ctx.alloc().buffer((int)length, (int)length) : null;
        if (length == 0)
        {
            finishReadv(ctx);
        }
    }

    /**
     * Takes up to {@code remaining} of {@code in}'s readable bytes into {@code into}, or discards them when it is null.
     * @return how many were taken.
     */
    private static int collect(final ByteBuf in, final ByteBuf into, final long remaining)
    {
        final int count = (int)Math.min(remaining, in.readableBytes());
        if (into != null)
        {
            into.writeBytes(in, in.readerIndex(), count);
        }
        in.skipBytes(count);
        return count;
    }

    private void consumeVectorEntries(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        vectorRemaining -= collect(in, vectorEntries, vectorRemaining);
        if (vectorRemaining == 0)
        {
            finishReadv(ctx);
        }
    }

    /**
     * Checks every entry as a READ of its own, then answers: the status of each entry, then the bytes of the
     * good ones straight from segment memory. A malformed vector, or one whose answer would exceed the frame
     * limit, gets a header-only INVALID_PARAMS answer; the connection stays in sync either way.
     */
    private void finishReadv(final ChannelHandlerContext ctx)
    {
        final ByteBuf entries = vectorEntries;
        vectorEntries = null;
        server.onReadVector();
        if (entries == null)
        {
            server.onErrorResponse();
            respond(ctx, Opcode.READV_RESPONSE, vectorRequestId, 0, INVALID_PARAMS_VALUE, 0, 0);
            return;
        }
        try
        {
            final int n = entries.readableBytes() / FrameDescriptor.HEADER_LENGTH;
            final long[] addresses = new long[n];
            final int[] lengths = new int[n];
            final ByteBuf statuses = ctx.alloc().buffer(n * FrameDescriptor.VECTOR_STATUS_LENGTH);
            long responseBytes = (long)n * FrameDescriptor.VECTOR_STATUS_LENGTH;
            for (int i = 0; i < n; i++)
            {
                server.onRequest();
                final int decoded = entry.decode(entries, maxFrameBytes);
                int status = INVALID_PARAMS_VALUE;
                if (decoded == FrameHeader.DECODE_OK && entry.opcode == Opcode.READ)
                {
                    final Segment segment = registry.get(entry.segmentId);
                    status = check(segment, entry);
                    if (status == 0)
                    {
                        addresses[i] = segment.address() + entry.offset;
                        lengths[i] = (int)entry.length;
                        responseBytes += lengths[i];
                    }
                }
                else
                {
                    server.onErrorResponse();
                }
                statuses.writeInt(status);
            }
            if (responseBytes > maxFrameBytes)
            {
                statuses.release();
                server.onErrorResponse();
                respond(ctx, Opcode.READV_RESPONSE, vectorRequestId, 0, INVALID_PARAMS_VALUE, 0, 0);
                return;
            }
            respond(ctx, Opcode.READV_RESPONSE, vectorRequestId, 0, 0, 0, responseBytes);
            ctx.write(statuses, ctx.voidPromise());
            server.onBytesOut(statuses.readableBytes());
            for (int i = 0; i < n; i++)
            {
                if (lengths[i] > 0)
                {
                    ctx.write(MemoryCopier.readView(ctx.alloc(), addresses[i], lengths[i]), ctx.voidPromise());
                    server.onBytesOut(lengths[i]);
                }
            }
        }
        finally
        {
            entries.release();
        }
    }

    /**
     * A WRITEV header (docs/protocol.md, "WRITEV"): what the header alone shows is checked first (status 0, 1..1024
     * entries in {@code flags}, a table length in {@code offset} that holds their headers and fits both
     * {@link FrameDescriptor#MAX_WRITEV_TABLE} and the frame); then the table is collected, or the whole payload
     * discarded and the vector refused.
     */
    private void onWritev(final ChannelHandlerContext ctx)
    {
        lastWriteLarge = false;
        writeStartNs = System.nanoTime();
        writevRequestId = header.requestId;
        final int n = header.flags;
        final long table = header.offset;
        final long length = header.length;
        final boolean wellFormed = header.status == 0 && n >= 1 && n <= FrameDescriptor.MAX_VECTOR_ENTRIES &&
            table >= (long)n * FrameDescriptor.HEADER_LENGTH && table <= FrameDescriptor.MAX_WRITEV_TABLE &&
            table <= length;
        writevRemaining = wellFormed ? table : length;
        if (!wellFormed)
        {
            if (writevRemaining == 0)
            {
                refuseWritev(ctx);
            }
            return;
        }
        writevCount = n;
        writevValueBytes = length - table;
        writevTable = ctx.alloc().buffer((int)table, (int)table);
    }

    /** Bytes of a WRITEV's table (collected), or of a refused WRITEV (discarded). */
    private void consumeWritevBytes(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        writevRemaining -= collect(in, writevTable, writevRemaining);
        if (writevRemaining == 0)
        {
            if (writevTable != null)
            {
                startWritevValues(ctx);
            }
            else
            {
                refuseWritev(ctx);
            }
        }
    }

    /**
     * A WRITEV's table is in: if it is well formed, every entry's WRITE part is checked (and the ledger forgets its
     * range) before any value byte moves, then the values arrive in entry order; else the values are discarded and the
     * vector refused whole.
     */
    private void startWritevValues(final ChannelHandlerContext ctx)
    {
        final ByteBuf table = writevTable;
        final int n = writevCount;
        if (!writevTableValid(table, n, writevValueBytes))
        {
            table.release();
            writevTable = null;
            writevRemaining = writevValueBytes;
            if (writevRemaining == 0)
            {
                refuseWritev(ctx);
            }
            return;
        }
        final int[] statuses = new int[n];
        final long[] addresses = new long[n];
        final long[] lengths = new long[n];
        for (int i = 0; i < n; i++)
        {
            server.onRequest();
            decodeWritevEntry(table, i);
            final Segment segment = registry.get(entry.segmentId);
            statuses[i] = admitWrite(segment, entry);
            addresses[i] = statuses[i] == 0 ? segment.address() + entry.offset : 0;
            lengths[i] = entry.length;
        }
        writevStatuses = statuses;
        writevAddresses = addresses;
        writevLengths = lengths;
        writevNext = 0;
        nextWritevValue(ctx);
    }

    /**
     * The whole-vector checks of a WRITEV's table: every entry decodes as a WRITE_COMMIT with a record of 1..16 KiB
     * and a value of at least one byte, the records fill the table after the headers exactly, and the values the
     * {@code valueBytes} after it.
     */
    private boolean writevTableValid(final ByteBuf table, final int n, final long valueBytes)
    {
        long recordBytes = 0;
        long values = 0;
        for (int i = 0; i < n; i++)
        {
            if (decodeWritevEntry(table, i) != FrameHeader.DECODE_OK || entry.opcode != Opcode.WRITE_COMMIT ||
                entry.flags == 0 || entry.flags > FrameDescriptor.MAX_COMMIT_PAYLOAD || entry.length == 0)
            {
                return false;
            }
            recordBytes += entry.flags;
            values += entry.length;
        }
        return (long)n * FrameDescriptor.HEADER_LENGTH + recordBytes == table.writerIndex() && values == valueBytes;
    }

    /** Decodes entry {@code index} of a WRITEV's table into {@link #entry}. */
    private int decodeWritevEntry(final ByteBuf table, final int index)
    {
        table.readerIndex(index * FrameDescriptor.HEADER_LENGTH);
        return entry.decode(table, maxFrameBytes);
    }

    /**
     * The next WRITEV value is received as a WRITE payload (into segment memory, or discarded when its entry was
     * refused); after the last one, the records.
     */
    private void nextWritevValue(final ChannelHandlerContext ctx)
    {
        if (writevNext < writevCount)
        {
            final int i = writevNext++;
            writeAddress = writevAddresses[i];
            writeRemaining = writevLengths[i];
            return;
        }
        finishWritev(ctx);
    }

    /**
     * Every value of a WRITEV is in: each accepted entry's record is checked and recorded as its WRITE_COMMIT's would
     * be (its token as the WRITE token of the committed extent, the record, the ledger's budget), in entry order; then
     * one answer carries every entry's status.
     */
    private void finishWritev(final ChannelHandlerContext ctx)
    {
        final ByteBuf table = writevTable;
        final int[] statuses = writevStatuses;
        final int n = writevCount;
        server.onWriteVector();
        writevTable = null;
        writevStatuses = null;
        writevAddresses = null;
        writevLengths = null;
        try
        {
            int recordAt = n * FrameDescriptor.HEADER_LENGTH;
            for (int i = 0; i < n; i++)
            {
                decodeWritevEntry(table, i);
                final int recordLength = entry.flags;
                if (statuses[i] == 0)
                {
                    final byte[] record = new byte[recordLength];
                    table.getBytes(recordAt, record);
                    final int segmentId = entry.segmentId;
                    final long offset = entry.offset;
                    // Checked as a COMMIT of the extent: the entry's header as a WRITE, its token and grant.
                    entry.opcode = Opcode.WRITE;
                    entry.flags = 0;
                    statuses[i] = commitStatus(entry, record, tokens, 0, registry, segmentId, offset, 0);
                    if (statuses[i] != 0)
                    {
                        server.onErrorResponse();
                    }
                }
                recordAt += recordLength;
            }
        }
        finally
        {
            table.release();
        }
        final ByteBuf answer = ctx.alloc().buffer(n * FrameDescriptor.VECTOR_STATUS_LENGTH);
        for (final int status : statuses)
        {
            answer.writeInt(status);
        }
        respond(ctx, Opcode.WRITEV_RESPONSE, writevRequestId, 0, 0, 0, answer.readableBytes());
        ctx.write(answer, ctx.voidPromise());
        server.onBytesOut(n * FrameDescriptor.VECTOR_STATUS_LENGTH);
    }

    /** A WRITEV refused whole, its payload consumed: a header-only INVALID_PARAMS answer. */
    private void refuseWritev(final ChannelHandlerContext ctx)
    {
        server.onWriteVector();
        server.onErrorResponse();
        respond(ctx, Opcode.WRITEV_RESPONSE, writevRequestId, 0, INVALID_PARAMS_VALUE, 0, 0);
    }

    /** An RDMA_CONNECT header: its payload (a QP-information record) is collected, then answered. */
    private void onRdmaConnect(final ChannelHandlerContext ctx)
    {
        lastWriteLarge = false;
        rdmaRequestId = header.requestId;
        rdmaSegmentId = header.segmentId;
        rdmaHeaderValid = header.status == 0 && header.offset == 0;
        rdmaRemaining = header.length;
        rdmaFilled = 0;
        rdmaRecord = header.length == QpInfo.LENGTH ? new byte[QpInfo.LENGTH] : null;
        if (rdmaRemaining == 0)
        {
            finishRdmaConnect(ctx);
        }
    }

    private void consumeRdmaRecord(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(rdmaRemaining, in.readableBytes());
        if (rdmaRecord != null)
        {
            in.readBytes(rdmaRecord, rdmaFilled, count);
            rdmaFilled += count;
        }
        else
        {
            in.skipBytes(count);
        }
        rdmaRemaining -= count;
        if (rdmaRemaining == 0)
        {
            finishRdmaConnect(ctx);
        }
    }

    private void finishRdmaConnect(final ChannelHandlerContext ctx)
    {
        final int status = rdmaConnectStatus(rdmaHeaderValid, rdmaSegmentId, rdmaRecord, verifier, registry);
        rdmaRecord = null;
        server.onErrorResponse();
        respond(ctx, Opcode.RDMA_CONNECT_RESPONSE, rdmaRequestId, rdmaSegmentId, status, 0, 0);
    }

    /**
     * The answer to an RDMA_CONNECT, in the native server's order (docs/protocol.md, "RDMA: queue-pair information"):
     * INVALID_PARAMS for a nonzero status or offset or a record that is not 64 bytes, does not decode or names another
     * segment than the header; ACCESS_DENIED while data tokens are on (one-sided operations would bypass them);
     * SEGMENT_NOT_FOUND; and UNAVAILABLE for a well-formed request, since this server has no RDMA transport.
     */
    private static int rdmaConnectStatus(
        final boolean headerValid,
        final int segmentId,
        final byte[] record,
        final AccessTokenVerifier verifier,
        final SegmentRegistry registry)
    {
        final QpInfo remote = record == null ? null : QpInfo.decode(record, 0, record.length);
        if (!headerValid || remote == null || remote.segmentId() != segmentId)
        {
            return INVALID_PARAMS_VALUE;
        }
        if (verifier.tokensRequired())
        {
            return ACCESS_DENIED_VALUE;
        }
        if (registry.get(segmentId) == null)
        {
            return SEGMENT_NOT_FOUND_VALUE;
        }
        return UNAVAILABLE_IN_CURRENT_STATUS_VALUE;
    }

    /**
     * Access control (docs/protocol.md, "Access tokens"): once the master gave this node a key, the frame's token must
     * grant this operation on a range holding the frame's; 0 or ACCESS_DENIED / TOKEN_EXPIRED.
     */
    private int checkToken(final FrameHeader request)
    {
        return tokens.check(request);
    }

    /** WRITE payload bytes the socket read put straight into segment memory: only count them. */
    private void receivedInPlace(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = in.readableBytes();
        in.release(); // a view over segment memory: frees nothing
        if (broken || count == 0)
        {
            return;
        }
        server.onBytesIn(count);
        writeAddress += count;
        writeRemaining -= count;
        if (writeRemaining == 0)
        {
            finishWrite(ctx);
        }
    }

    private void consumeWritePayload(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(writeRemaining, in.readableBytes());
        if (writeAddress != 0)
        {
            MemoryCopier.copyToAddress(in, in.readerIndex(), writeAddress, count);
            writeAddress += count;
        }
        in.skipBytes(count);
        writeRemaining -= count;
        if (writeRemaining == 0)
        {
            finishWrite(ctx);
        }
    }

    private void finishWrite(final ChannelHandlerContext ctx)
    {
        server.metrics().recordWrite(System.nanoTime() - writeStartNs);
        writeAddress = 0;
        if (writevStatuses != null)
        {
            // A WRITEV entry's value is in (or discarded): the next one, or the records once the last is in.
            nextWritevValue(ctx);
            return;
        }
        if (writeCommit)
        {
            // A refused WRITE_COMMIT is not remembered as a failed WRITE: its COMMIT went with it.
            writeCommit = false;
            int status = writeStatus;
            if (status == 0)
            {
                status = commitStatus(commitHeader, commitPayload, tokens, 0, registry, commitSegmentId, commitOffset, 0);
                if (status != 0)
                {
                    server.onErrorResponse();
                }
            }
            commitPayload = null;
            respond(ctx, Opcode.WRITE_COMMIT_RESPONSE, writeRequestId, writeSegmentId, status, writeOffset,
                writeLength);
            return;
        }
        rememberWriteOutcome(writeSegmentId, writeOffset, writeStatus);
        respond(ctx, Opcode.WRITE_RESPONSE, writeRequestId, writeSegmentId, writeStatus, writeOffset, writeLength);
    }

    /** Before a WRITE moves bytes: the ledger forgets what the range held (or the segment was re-keyed). */
    private int invalidateLedger(final Segment segment, final FrameHeader request)
    {
        if (segment.ledger().beforeWrite(request.segmentId, request.offset, request.length))
        {
            return 0;
        }
        server.onErrorResponse();
        return SEGMENT_NOT_FOUND_VALUE;
    }

    private record FailedWrite(int segmentId, long offset, int status)
    {
    }

    private void rememberWriteOutcome(final int segmentId, final long offset, final int status)
    {
        final long extent = extentKey(segmentId, offset);
        if (status != 0)
        {
            failedWrites.put(extent, new FailedWrite(segmentId, offset, status));
        }
        else if (!failedWrites.isEmpty())
        {
            failedWrites.remove(extent);
        }
    }

    private static long extentKey(final int segmentId, final long offset)
    {
        return offset * 0x9E3779B97F4A7C15L ^ segmentId;
    }

    private void onCommit(final ChannelHandlerContext ctx)
    {
        expectCommitPayload(header.length);
        if (commitRemaining == 0)
        {
            finishCommit(ctx);
        }
    }

    /** Sets up the receipt of a commit record of {@code length} bytes for the COMMIT or WRITE_COMMIT in {@link #header}. */
    private void expectCommitPayload(final long length)
    {
        commitRequestId = header.requestId;
        commitSegmentId = header.segmentId;
        commitOffset = header.offset;
        commitLength = header.length;
        commitRemaining = length;
        commitHeader.set(Opcode.WRITE, header.requestId, header.segmentId, header.offset, 0);
        commitHeader.status = header.status;
        commitHeader.grantDelta = header.grantDelta;
        commitHeader.grantLength = header.grantLength;
        commitHeader.tokenExpirySec = header.tokenExpirySec;
        System.arraycopy(header.tokenMac, 0, commitHeader.tokenMac, 0, header.tokenMac.length);
        commitFilled = 0;
        commitPayload = length > 0 && length <= FrameDescriptor.MAX_COMMIT_PAYLOAD ? new byte[(int)length] : null;
    }

    private void consumeCommitPayload(final ChannelHandlerContext ctx, final ByteBuf in)
    {
        final int count = (int)Math.min(commitRemaining, in.readableBytes());
        if (commitPayload != null)
        {
            in.readBytes(commitPayload, commitFilled, count);
            commitFilled += count;
        }
        else
        {
            in.skipBytes(count);
        }
        commitRemaining -= count;
        if (commitRemaining == 0)
        {
            finishCommit(ctx);
        }
    }

    private void finishCommit(final ChannelHandlerContext ctx)
    {
        if (recordPending)
        {
            // A WRITE_COMMIT's record is in (null: empty or too long, refused before any byte moves): its WRITE next.
            recordPending = false;
            startWrite(ctx, commitPayload == null ? INVALID_PARAMS_VALUE : 0, true);
            return;
        }
        final int status = commitStatus();
        commitPayload = null;
        if (status != 0)
        {
            server.onErrorResponse();
        }
        respond(ctx, Opcode.COMMIT_RESPONSE, commitRequestId, commitSegmentId, status, commitOffset, commitLength);
    }

    /**
     * Validates a COMMIT and records it: status, payload, then the token as for a WRITE of the committed extent
     * (a client may tie to its key only an extent it may write), segment, range, then the outcome of its WRITE here.
     */
    private int commitStatus()
    {
        final FailedWrite failed = failedWrites.isEmpty() ? null : failedWriteIn(commitSegmentId, commitOffset,
            commitExtentEnd(commitOffset, commitPayload));
        final int status = commitStatus(commitHeader, commitPayload, tokens, 0, registry, commitSegmentId,
            commitOffset, failed == null ? 0 : failed.status());
        if (failed != null && status == failed.status())
        {
            failedWrites.remove(extentKey(failed.segmentId(), failed.offset()));
        }
        return status;
    }

    /** The first remembered refused WRITE that started inside {@code [offset, end)} of the segment, or null. */
    private FailedWrite failedWriteIn(final int segmentId, final long offset, final long end)
    {
        for (final FailedWrite failed : failedWrites.values())
        {
            if (failed.segmentId() == segmentId && Long.compareUnsigned(failed.offset(), offset) >= 0 &&
                Long.compareUnsigned(failed.offset(), end) < 0)
            {
                return failed;
            }
        }
        return null;
    }

    /** offset + max(1, the record's value length), at most 2^64 - 1 unsigned; offset + 1 without a record. */
    private static long commitExtentEnd(final long offset, final byte[] payload)
    {
        long span = 1;
        if (payload != null && payload.length >= FrameDescriptor.COMMIT_VALUE_LENGTH_OFFSET + Long.BYTES &&
            payload[FrameDescriptor.COMMIT_FORMAT_OFFSET] == 1)
        {
            final long valueLength = ByteBuffer.wrap(payload).getLong(FrameDescriptor.COMMIT_VALUE_LENGTH_OFFSET);
            span = valueLength != 0 ? valueLength : 1;
        }
        return Long.compareUnsigned(span, -1L - offset) > 0 ? -1L : offset + span;
    }

    /**
     * The checks and the ledger update of one COMMIT, shared by the Java and the native server (docs/protocol.md,
     * "COMMIT"): {@code commitHeader} is the COMMIT's header as a WRITE (its token and grant), {@code payload} the
     * record or null when it was too long, {@code failedWriteStatus} the status of a refused WRITE of the same extent
     * on the connection (0 if none). {@code tokens} checks the frame's token; null when the native server checked it
     * already, its verdict being {@code checkedTokenStatus}.
     */
    static int commitStatus(
        final FrameHeader commitHeader,
        final byte[] payload,
        final AccessTokenVerifier.Checker tokens,
        final int checkedTokenStatus,
        final SegmentRegistry registry,
        final int segmentId,
        final long offset,
        final int failedWriteStatus)
    {
        return commitStatus(commitHeader, payload, payload == null ? 0 : payload.length, tokens, checkedTokenStatus,
            registry, segmentId, offset, failedWriteStatus);
    }

    /** {@link #commitStatus} of a record in the first {@code payloadLength} bytes of {@code payload}. */
    static int commitStatus(
        final FrameHeader commitHeader,
        final byte[] payload,
        final int payloadLength,
        final AccessTokenVerifier.Checker tokens,
        final int checkedTokenStatus,
        final SegmentRegistry registry,
        final int segmentId,
        final long offset,
        final int failedWriteStatus)
    {
        if (commitHeader.status != 0)
        {
            return INVALID_PARAMS_VALUE;
        }
        final CommitRecord record = payload == null ? null : CommitRecord.decode(payload, 0, payloadLength);
        if (record == null)
        {
            return INVALID_PARAMS_VALUE;
        }
        commitHeader.length = Math.max(1, record.valueLength());
        final int tokenStatus = tokens != null ? tokens.check(commitHeader) : checkedTokenStatus;
        if (tokenStatus != 0)
        {
            return tokenStatus;
        }
        final Segment segment = registry.get(segmentId);
        if (segment == null)
        {
            return SEGMENT_NOT_FOUND_VALUE;
        }
        if (!segment.contains(offset, Math.max(1, record.valueLength())))
        {
            return INVALID_PARAMS_VALUE;
        }
        if (failedWriteStatus != 0)
        {
            return failedWriteStatus;
        }
        return segment.ledger().commit(segmentId, offset, record, Clock.SYSTEM.epochMillis());
    }

    private void respond(
        final ChannelHandlerContext ctx,
        final int opcode,
        final long requestId,
        final int segmentId,
        final int status,
        final long offset,
        final long length)
    {
        final ByteBuf out = ctx.alloc().directBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
        FrameHeader.encode(out, opcode, 0, requestId, segmentId, status, offset, length, 0, null);
        ctx.write(out, ctx.voidPromise());
        server.onBytesOut(FrameDescriptor.HEADER_LENGTH);
        flushPending = true;
    }

    @Override
    public void channelReadComplete(final ChannelHandlerContext ctx)
    {
        // One flush for every response produced by this read batch (pipelined requests).
        if (flushPending)
        {
            flushPending = false;
            ctx.flush();
        }
        if (!ctx.channel().isWritable() && ctx.channel().config().isAutoRead())
        {
            ctx.channel().config().setAutoRead(false);
            server.onBackpressurePause();
        }
        ctx.fireChannelReadComplete();
    }

    @Override
    public void channelWritabilityChanged(final ChannelHandlerContext ctx)
    {
        if (ctx.channel().isWritable())
        {
            ctx.channel().config().setAutoRead(true);
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelActive(final ChannelHandlerContext ctx)
    {
        server.onConnectionOpened();
        ctx.fireChannelActive();
    }

    @Override
    public void channelInactive(final ChannelHandlerContext ctx)
    {
        server.onConnectionClosed();
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        if (!broken)
        {
            // Once per connection: after a reset every queued write fails the same way.
            broken = true;
            LOG.debug("transfer connection from {} failed: {}", ctx.channel().remoteAddress(), cause.toString());
        }
        ctx.close();
    }
}
