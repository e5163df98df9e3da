package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.node.segment.Segment;
import io.granary.node.segment.SegmentRegistry;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.granary.transfer.natives.NativeTransferServer;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;

import static io.granary.proto.ErrorCode.INTERNAL_ERROR_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.SEGMENT_NOT_FOUND_VALUE;

/**
 * The storage node's decisions for the native transfer server: the ledger before a WRITE's bytes move, and the
 * whole COMMIT check (shared with {@link FrameHandler}); decode, status, token, segment and range of READ, WRITE and
 * READV frames are checked in C in the same order. One per event loop of the native server, called on that loop's
 * thread only (its header and token checker are its own; the registry, ledger and metrics are thread safe).
 */
final class NativeFrameHandler implements NativeTransferServer.Handler
{
    private static final Logger LOG = LoggerFactory.getLogger(NativeFrameHandler.class);

    private final SegmentRegistry registry;
    private final AccessTokenVerifier.Checker tokens;
    private final int maxFrameBytes;
    private final FrameHeader header = new FrameHeader();
    /** A WRITEV entry's record, copied out of the upcall's buffer. */
    private final byte[] record = new byte[FrameDescriptor.MAX_COMMIT_PAYLOAD];
    private final Clock clock;
    private final TransferMetrics metrics;

    NativeFrameHandler(
        final SegmentRegistry registry,
        final AccessTokenVerifier verifier,
        final int maxFrameBytes,
        final TransferMetrics metrics)
    {
        this.registry = registry;
        this.metrics = metrics;
        this.clock = verifier.clock();
        this.tokens = verifier.newChecker();
        this.maxFrameBytes = maxFrameBytes;
    }

    @Override
    public int onWrite(final int segmentId, final long offset, final int length)
    {
        try
        {
            final Segment segment = registry.get(segmentId);
            // The ledger forgets what the range held, or the segment was re-keyed since the lookup.
            return segment != null && segment.ledger().beforeWrite(segmentId, offset, Integer.toUnsignedLong(length)) ?
                0 : SEGMENT_NOT_FOUND_VALUE;
        }
        catch (final RuntimeException ex)
        {
            LOG.error("ledger update before a WRITE failed", ex);
            return INTERNAL_ERROR_VALUE;
        }
    }

    @Override
    public int onCommit(final byte[] headerBytes, final byte[] payload, final int failedWriteStatus,
        final int tokenStatus)
    {
        try
        {
            header.decode(Unpooled.wrappedBuffer(headerBytes), maxFrameBytes);
            return commit(payload, payload == null ? 0 : payload.length, tokenStatus, failedWriteStatus);
        }
        catch (final RuntimeException ex)
        {
            LOG.error("COMMIT check failed", ex);
            return INTERNAL_ERROR_VALUE;
        }
    }

    /**
     * A WRITEV's COMMITs in one upcall: each checked as {@link #onCommit} checks one, its header read in place and its
     * record copied into one reused array instead of two new arrays per entry.
     */
    @Override
    public void onCommitVector(final ByteBuffer entries, final int count)
    {
        final ByteBuf in = Unpooled.wrappedBuffer(entries);
        int at = count * 4;
        for (int i = 0; i < count; i++)
        {
            int status;
            final int tokenStatus = entries.getInt(at + VECTOR_COMMIT_HEADER);
            final int length = entries.getInt(at + VECTOR_COMMIT_HEADER + 4);
            try
            {
                if (length < 0 || length > FrameDescriptor.MAX_COMMIT_PAYLOAD)
                {
                    status = INVALID_PARAMS_VALUE;
                }
                else
                {
                    header.decode(in.readerIndex(at), maxFrameBytes);
                    entries.get(at + VECTOR_COMMIT_HEADER + 8, record, 0, length);
                    status = commit(record, length, tokenStatus, 0);
                }
            }
            catch (final RuntimeException ex)
            {
                LOG.error("COMMIT check failed", ex);
                status = INTERNAL_ERROR_VALUE;
            }
            entries.putInt(i * 4, status);
            at += VECTOR_COMMIT_HEADER + 8 + Math.max(0, length);
        }
    }

    /** The COMMIT whose header is decoded in {@link #header}, its record the first {@code length} bytes of payload. */
    private int commit(final byte[] payload, final int length, final int tokenStatus, final int failedWriteStatus)
    {
        final int segmentId = header.segmentId;
        final long offset = header.offset;
        // Checked as a WRITE of the committed extent: its token and grant, with the record's length.
        header.opcode = Opcode.WRITE;
        // The native server checked the token in C when it could read the record's value length.
        return FrameHandler.commitStatus(header, payload, length,
            tokenStatus == COMMIT_TOKEN_UNCHECKED ? tokens : null, tokenStatus, registry, segmentId, offset,
            failedWriteStatus);
    }

    @Override
    public void onLatencies(final long[] samples)
    {
        for (final long sample : samples)
        {
            final long nanos = sample & ((1L << 62) - 1);
            if (sample >>> 62 == 1)
            {
                metrics.recordRead(nanos);
            }
            else
            {
                metrics.recordWrite(nanos);
            }
        }
    }

    @Override
    public long epochMillis()
    {
        return clock.epochMillis();
    }

    @Override
    public void onClose(final String peer, final String reason)
    {
        if (reason != null)
        {
            LOG.warn("closing transfer connection from {}: {} (max frame {} bytes)", peer, reason, maxFrameBytes);
        }
        else
        {
            LOG.debug("transfer connection from {} closed", peer);
        }
    }
}
