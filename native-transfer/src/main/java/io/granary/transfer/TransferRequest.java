package io.granary.transfer;

import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * One READ or WRITE between local memory and an extent of a remote segment.
 *
 * <p>{@code local} is used from its position for {@code length} bytes; the engine never changes
 * its position or limit. A READ fills it, a WRITE sends it. Direct buffers avoid a copy.
 *
 * <p>A WRITE may carry a {@link #commit() commit record} (the payload of a COMMIT frame, see
 * {@code io.granary.protocol.CommitRecord}): once every byte is in place the engine sends it for the same
 * extent, so the node records the extent as complete in its ledger. A WRITE of length 0 with a commit
 * record sends the COMMIT alone. The record may be given as a future that completes after submit (the client
 * fills in the value's CRC32C while the bytes are on their way): the engine sends the COMMIT once both the bytes
 * are out and the future is complete; a future that completes exceptionally fails the transfer with
 * INTERNAL_ERROR and no COMMIT is sent.
 *
 * <p>An access token grants one extent of the segment (the <em>grant</em>, by default exactly the requested
 * range); the request must lie inside it. The engine sends the token with every frame of the transfer together
 * with the frame's place in the grant, so that a node can check a slice of a big transfer against a token that
 * covers the whole extent (docs/protocol.md, "Access tokens"). A COMMIT carries the same token and grant.
 */
public final class TransferRequest
{
    public enum Op
    {
        READ, WRITE
    }

    private final Op op;
    private final String endpoint;
    private final int segmentId;
    private final long remoteOffset;
    private final int length;
    private final ByteBuffer local;
    private final byte[] accessToken;
    private final CompletableFuture<byte[]> commit;
    private final long grantOffset;
    private final long grantLength;
    /** Set before submit by the one thread that makes the request; read by the engine. */
    private boolean wantsReceivedCrc32c;
    /** Set by the engine before it completes the transfer's future, read after it (the future orders the two). */
    private boolean hasReceivedCrc32c;
    private int receivedCrc32c;

    /** A request whose token (if any) grants exactly its own range. */
    public TransferRequest(
        final Op op,
        final String endpoint,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final byte[] accessToken)
    {
        this(op, endpoint, segmentId, remoteOffset, local, length, accessToken, remoteOffset, length, (byte[])null);
    }

    /**
     * A request whose token (if any) grants exactly its own range.
     *
     * @param commit COMMIT payload to send once the WRITE succeeded, or null; only with {@link Op#WRITE}.
     */
    public TransferRequest(
        final Op op,
        final String endpoint,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final byte[] accessToken,
        final byte[] commit)
    {
        this(op, endpoint, segmentId, remoteOffset, local, length, accessToken, remoteOffset, length, commit);
    }

    /**
     * A request whose token grants the extent {@code [grantOffset, grantOffset + grantLength)}, which holds the
     * requested range (an engine refuses the request with INVALID_PARAMS when it does not).
     */
    public TransferRequest(
        final Op op,
        final String endpoint,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final byte[] accessToken,
        final long grantOffset,
        final long grantLength)
    {
        this(op, endpoint, segmentId, remoteOffset, local, length, accessToken, grantOffset, grantLength, (byte[])null);
    }

    /** A grant as above and, for a WRITE, an optional COMMIT payload known now. */
    public TransferRequest(
        final Op op,
        final String endpoint,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final byte[] accessToken,
        final long grantOffset,
        final long grantLength,
        final byte[] commit)
    {
        this(op, endpoint, segmentId, remoteOffset, local, length, accessToken, grantOffset, grantLength,
            commit == null ? null : CompletableFuture.completedFuture(commit));
    }

    /**
     * The full form: a grant as above and, for a WRITE, an optional COMMIT payload that may complete later
     * (null: no COMMIT).
     */
    public TransferRequest(
        final Op op,
        final String endpoint,
        final int segmentId,
        final long remoteOffset,
        final ByteBuffer local,
        final int length,
        final byte[] accessToken,
        final long grantOffset,
        final long grantLength,
        final CompletableFuture<byte[]> commit)
    {
        this.op = Objects.requireNonNull(op, "op");
        if (commit != null && op != Op.WRITE)
        {
            throw new IllegalArgumentException("only a WRITE carries a commit record");
        }
        this.commit = commit;
        this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
        this.segmentId = segmentId;
        if (remoteOffset < 0 || length < 0)
        {
            throw new IllegalArgumentException("negative offset or length");
        }
        this.remoteOffset = remoteOffset;
        this.local = Objects.requireNonNull(local, "local");
        if (length > local.remaining())
        {
            throw new IllegalArgumentException("length " + length + " exceeds local buffer remaining " + local.remaining());
        }
        this.length = length;
        this.accessToken = accessToken;
        this.grantOffset = grantOffset;
        this.grantLength = grantLength;
    }

    public static TransferRequest read(
        final String endpoint, final int segmentId, final long remoteOffset, final ByteBuffer into, final int length)
    {
        return new TransferRequest(Op.READ, endpoint, segmentId, remoteOffset, into, length, null);
    }

    public static TransferRequest write(
        final String endpoint, final int segmentId, final long remoteOffset, final ByteBuffer from, final int length)
    {
        return new TransferRequest(Op.WRITE, endpoint, segmentId, remoteOffset, from, length, null);
    }

    public Op op()
    {
        return op;
    }

    /** host:port of the storage node's transfer server. */
    public String endpoint()
    {
        return endpoint;
    }

    public int segmentId()
    {
        return segmentId;
    }

    public long remoteOffset()
    {
        return remoteOffset;
    }

    public int length()
    {
        return length;
    }

    public ByteBuffer local()
    {
        return local;
    }

    /** Opaque token the master issued for this extent, or null. */
    public byte[] accessToken()
    {
        return accessToken;
    }

    /** The COMMIT payload sent after the WRITE succeeded (possibly not complete yet), or null for none. */
    public CompletableFuture<byte[]> commit()
    {
        return commit;
    }

    /** Offset of the extent the access token grants (the request's own offset unless given). */
    public long grantOffset()
    {
        return grantOffset;
    }

    /** Length of the extent the access token grants (the request's own length unless given). */
    public long grantLength()
    {
        return grantLength;
    }

    /** True when {@code [remoteOffset, remoteOffset + length)} lies inside the grant (checked without overflow). */
    public boolean withinGrant()
    {
        return grantOffset >= 0 && grantLength >= 0 && remoteOffset >= grantOffset &&
            remoteOffset - grantOffset <= grantLength && length <= grantLength - (remoteOffset - grantOffset);
    }

    /**
     * Asks the engine for the CRC32C of the bytes a READ delivers, computed while they arrive (call before submit).
     * An engine that can ({@code NativeTransferEngine} over TCP) reports it through {@link #hasReceivedCrc32c()};
     * any other leaves that false, and the caller computes the checksum itself.
     *
     * @return this request.
     * @throws IllegalStateException for a WRITE.
     */
    public TransferRequest requestReceivedCrc32c()
    {
        if (op != Op.READ)
        {
            throw new IllegalStateException("only a READ receives bytes to checksum");
        }
        wantsReceivedCrc32c = true;
        return this;
    }

    /** True when {@link #requestReceivedCrc32c()} was called. */
    public boolean wantsReceivedCrc32c()
    {
        return wantsReceivedCrc32c;
    }

    /**
     * For engines: the CRC32C of every byte this READ delivered, recorded before its future completes with OK. Only
     * for a request that {@link #wantsReceivedCrc32c() wants it}.
     */
    public void receivedCrc32c(final int crc32c)
    {
        if (!wantsReceivedCrc32c)
        {
            throw new IllegalStateException("no CRC32C was asked for");
        }
        receivedCrc32c = crc32c;
        hasReceivedCrc32c = true;
    }

    /** True once the engine recorded the CRC32C of the bytes delivered (read it after the future completed with OK). */
    public boolean hasReceivedCrc32c()
    {
        return hasReceivedCrc32c;
    }

    /** The CRC32C the engine recorded; meaningful only when {@link #hasReceivedCrc32c()}. */
    public int receivedCrc32c()
    {
        return receivedCrc32c;
    }

    @Override
    public String toString()
    {
        return op + (commit != null ? "+COMMIT " : " ") + endpoint + " seg=" + Integer.toUnsignedString(segmentId) +
            " off=" + remoteOffset + " len=" + length;
    }
}
