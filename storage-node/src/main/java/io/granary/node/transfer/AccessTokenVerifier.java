package io.granary.node.transfer;

import io.granary.common.Clock;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameHeader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.Supplier;

import static io.granary.proto.ErrorCode.ACCESS_DENIED_VALUE;
import static io.granary.proto.ErrorCode.TOKEN_EXPIRED_VALUE;

/**
 * The storage node's side of data-plane access control: holds the data-token key the master handed over when the
 * node mounted its segments and decides, for each READ or WRITE frame and before any byte moves, whether the frame's
 * token grants it. Without a key every frame passes (the master does not issue tokens); with one, a frame passes only
 * with a token that verifies under the key, has not expired, is for this operation, and whose grant holds the frame's
 * range. Thread safe: the key is swapped atomically, and each connection verifies through its own {@link Checker}.
 */
public final class AccessTokenVerifier
{
    private static final Logger LOG = LoggerFactory.getLogger(AccessTokenVerifier.class);

    private final Clock clock;
    private volatile byte[] key;
    private volatile Consumer<byte[]> keyListener = k -> { };
    /** Counts of frames checked elsewhere (the native server, in C): verified, missing, invalid, expired. */
    private volatile Supplier<long[]> externalCounts = () -> NO_COUNTS;
    private static final long[] NO_COUNTS = new long[4];

    private final LongAdder verified = new LongAdder();
    private final LongAdder refusedMissing = new LongAdder();
    private final LongAdder refusedInvalid = new LongAdder();
    private final LongAdder refusedExpired = new LongAdder();

    /** A verifier without a key: every frame passes until {@link #updateKey} installs one. */
    public AccessTokenVerifier(final Clock clock)
    {
        this.clock = clock;
    }

    /**
     * Installs the key the master sent with MountSegment, or removes it when {@code keyOrEmpty} is null or empty
     * (the master issues no tokens). Connections use the new key from their next frame on.
     *
     * @throws IllegalArgumentException for a key that is neither empty nor {@value AccessTokenCodec#KEY_LENGTH} bytes.
     */
    public synchronized void updateKey(final byte[] keyOrEmpty)
    {
        if (keyOrEmpty != null && keyOrEmpty.length != 0 && keyOrEmpty.length != AccessTokenCodec.KEY_LENGTH)
        {
            throw new IllegalArgumentException("a data-token key has " + AccessTokenCodec.KEY_LENGTH + " bytes, was " +
                keyOrEmpty.length);
        }
        final byte[] next = keyOrEmpty == null || keyOrEmpty.length == 0 ? null : keyOrEmpty.clone();
        final byte[] previous = key;
        if (previous == null ? next == null : next != null && AccessTokenCodec.sameKey(previous, next))
        {
            return;
        }
        key = next;
        keyListener.accept(next == null ? null : next.clone());
        LOG.info(next == null ? "data tokens off: frames without an access token are served" :
            previous == null ? "data tokens on: every READ and WRITE needs an access token from the master" :
            "data-token key replaced by the master; tokens signed with the old key are refused");
    }

    /**
     * Told the new key (null: tokens off) whenever it changes, and once at once with the current one; the native
     * transfer server verifies tokens in C with it.
     */
    public synchronized void keyListener(final Consumer<byte[]> listener)
    {
        keyListener = listener;
        final byte[] current = key;
        listener.accept(current == null ? null : current.clone());
    }

    /** Adds the counts of frames checked outside this class (verified, missing, invalid, expired) to its own. */
    public void externalCounts(final Supplier<long[]> counts)
    {
        externalCounts = counts;
    }

    /** True while the node has a key and refuses frames without a valid token. */
    public boolean tokensRequired()
    {
        return key != null;
    }

    /** The clock tokens expire by. */
    public Clock clock()
    {
        return clock;
    }

    /** A checker for one connection; use it from that connection's event loop only. */
    public Checker newChecker()
    {
        return new Checker();
    }

    /** Frames whose token verified. */
    public long verified()
    {
        return verified.sum() + externalCounts.get()[0];
    }

    /** Frames refused for carrying no token while tokens are required. */
    public long refusedMissing()
    {
        return refusedMissing.sum() + externalCounts.get()[1];
    }

    /** Frames refused for a token that does not verify or does not grant the frame's range. */
    public long refusedInvalid()
    {
        return refusedInvalid.sum() + externalCounts.get()[2];
    }

    /** Frames refused for an expired token. */
    public long refusedExpired()
    {
        return refusedExpired.sum() + externalCounts.get()[3];
    }

    /**
     * Verifies the frames of one connection; owns a MAC instance for the current key and remembers the last few tokens
     * it verified (the frames of a put share one: every slice of a WRITE and its COMMIT; reads of a hot extent reuse
     * theirs), so that a repeat costs a comparison instead of an HMAC. A remembered token still has its expiry checked
     * on every frame, and the memory is dropped when the key changes. Not thread safe.
     */
    public final class Checker
    {
        private byte[] codecKey;
        private AccessTokenCodec codec;
        private final VerifiedTokens recent = new VerifiedTokens();

        private Checker()
        {
        }

        /**
         * Checks a decoded READ or WRITE request header.
         *
         * @return 0 when the frame may proceed, ACCESS_DENIED or TOKEN_EXPIRED otherwise.
         */
        public int check(final FrameHeader header)
        {
            final byte[] current = key;
            if (current == null)
            {
                return 0;
            }
            if (!header.hasToken())
            {
                refusedMissing.increment();
                return ACCESS_DENIED_VALUE;
            }
            // The frame's range must lie inside the grant: [offset - delta, offset - delta + grantLength).
            if (header.grantLength == 0 || header.length > header.grantLength ||
                header.grantDelta > header.grantLength - header.length || header.offset < header.grantDelta)
            {
                refusedInvalid.increment();
                return ACCESS_DENIED_VALUE;
            }
            final AccessTokenCodec verifier = codecFor(current);
            final long grantOffset = header.offset - header.grantDelta;
            if (!recent.contains(header.opcode, header.segmentId, grantOffset, header.grantLength,
                header.tokenExpirySec, header.tokenMac))
            {
                if (!verifier.verify(header.opcode, header.segmentId, grantOffset, header.grantLength,
                    header.tokenExpirySec, header.tokenMac))
                {
                    refusedInvalid.increment();
                    return ACCESS_DENIED_VALUE;
                }
                recent.add(header.opcode, header.segmentId, grantOffset, header.grantLength, header.tokenExpirySec,
                    header.tokenMac);
            }
            if (!AccessTokenCodec.isLive(header.tokenExpirySec, clock.epochMillis()))
            {
                refusedExpired.increment();
                return TOKEN_EXPIRED_VALUE;
            }
            verified.increment();
            return 0;
        }

        private AccessTokenCodec codecFor(final byte[] current)
        {
            if (current != codecKey)
            {
                codec = new AccessTokenCodec(current);
                codecKey = current;
                recent.clear(); // verified under the old key
            }
            return codec;
        }
    }

    @Override
    public String toString()
    {
        return "AccessTokenVerifier{required=" + tokensRequired() + ", verified=" + verified() + ", missing=" +
            refusedMissing() + ", invalid=" + refusedInvalid() + ", expired=" + refusedExpired() + '}';
    }
}
