package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.common.Clock;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.transfer.TransferRequest;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * Reads one value from one of its replicas, moving to the next replica when a transfer fails or the bytes do not
 * match the value's checksum. Each attempt asks the {@link ReplicaSelector} for the best replica not yet tried. A node
 * that refuses the access token (expired, or signed with a key it no longer holds) makes the read ask the master for
 * a fresh replica list once and go on with its tokens. A read that finishes after the read lease ran out is
 * LEASE_EXPIRED (the extent may have been reused meanwhile). Used by one thread at a time: {@link #target}, then
 * {@link #run}, after which the attempts hand the state on to each other (submit, completion, verification, failover),
 * never touching it concurrently.
 */
final class ReadOperation
{
    private static final long NO_DEADLINE = Long.MAX_VALUE;
    private static final int CHECKSUM_MISMATCH = ErrorCode.CHECKSUM_MISMATCH.code();
    /**
     * Values from this size on are checksummed by the transfer engine while their bytes arrive, where it can: a second
     * pass after the transfer would read memory that has left the nearest caches, and sits on the get's critical path
     * (16 us of a 1 MiB get). Smaller ones are checksummed here, right after they landed and are still in cache: the
     * JDK's CRC32C takes 67 ns for 4 KiB, less than the engine's per-value work (4 KiB x 128 gets lost ~15 % when the
     * engine did them).
     */
    static final long ENGINE_CHECKSUM_MIN_BYTES = 64 << 10;

    /** Asks the master for the key's replica list again (a blocking call, made on a client thread). */
    @FunctionalInterface
    interface ReplicaRefresher
    {
        GetReplicaListResponse refresh(String key);
    }

    private final String key;
    private final long length;
    private final boolean checksums;
    private List<ReplicaExtent> untried;
    private long leaseDeadlineNs;
    private boolean verify;
    private int expectedCrc;
    /** What each failed attempt said, for the error; created on the first failure (most reads have none). */
    private StringBuilder failures;
    /** Every replica tried so far timed out (a stalled node): the read then fails with RPC_TIMEOUT. */
    private boolean allTimedOut = true;
    private final CompletableFuture<OpFailure> outcome = new CompletableFuture<>();
    /** Replicas that failed other than by refusing the token; created on the first such failure. */
    private Set<String> failedReplicas;
    private ByteBuffer dst;
    private ReplicaExtent current;
    /** The transfer of the current attempt (its engine may have checksummed the bytes while they arrived). */
    private TransferRequest currentRequest;
    private boolean done;
    private OpFailure failure;
    private boolean refreshed;
    private int mismatches;
    private int otherFailures;
    private int lastTokenRefusal;
    private TransferDispatcher transfers;
    private ReplicaSelector selector;
    private Clock clock;
    private Executor failover;
    private ReplicaRefresher refresher;

    private ReadOperation(final String key, final long length, final boolean checksums)
    {
        this.key = key;
        this.length = length;
        this.checksums = checksums;
    }

    /**
     * Builds the read from the master's answer.
     *
     * @param askedAtNs when the replica list was asked for; the lease is counted from there (conservative).
     * @param checksums whether to check the bytes read against the value's CRC32C (when the master has one).
     * @throws GranaryException with the master's code when it refused, INTERNAL_ERROR when its answer is unusable.
     */
    static ReadOperation plan(
        final String key, final GetReplicaListResponse response, final long askedAtNs, final boolean checksums)
    {
        if (response.getCode() != 0)
        {
            throw refusal(key, response.getCode());
        }
        final long length = response.getValueLength();
        if (length < 0)
        {
            throw ReplicaExtent.nonsense(key, "value length " + Long.toUnsignedString(length));
        }
        final ReadOperation read = new ReadOperation(key, length, checksums);
        read.adopt(response, askedAtNs);
        return read;
    }

    /** Takes the replicas, checksum and lease of a replica list of this key (the first one, or a fresh one). */
    private void adopt(final GetReplicaListResponse response, final long askedAtNs)
    {
        final List<ReplicaExtent> replicas = new ArrayList<>(response.getReplicasCount());
        for (final Replica replica : response.getReplicasList())
        {
            if (replica.getStatus() == ReplicaStatus.REPLICA_STATUS_PROCESSING)
            {
                continue; // not readable yet; the master should not have sent it
            }
            final ReplicaExtent extent = ReplicaExtent.from(replica, key);
            if (extent.length() != length)
            {
                throw ReplicaExtent.nonsense(key, "the extent on " + extent.describe() + " holds " + extent.length() +
                    " bytes for a value of " + length);
            }
            if (failedReplicas == null || !failedReplicas.contains(identity(extent)))
            {
                replicas.add(extent);
            }
        }
        if (replicas.isEmpty() && length > 0 && !refreshed)
        {
            throw ReplicaExtent.nonsense(key, "no complete replica for a value of " + length + " bytes");
        }
        final long ttlMs = response.getLeaseTtlMs();
        untried = replicas;
        leaseDeadlineNs = ttlMs <= 0 || ttlMs > Long.MAX_VALUE / 2_000_000L ?
            NO_DEADLINE : askedAtNs + ttlMs * 1_000_000L;
        verify = checksums && response.hasCrc32C();
        expectedCrc = response.getCrc32C();
    }

    /** The failure for a non-OK code of the master. */
    static GranaryException refusal(final String key, final int code)
    {
        final ErrorCode errorCode = ProtoMapping.code(code);
        final String what = errorCode == ErrorCode.OBJECT_NOT_FOUND ? "not found" :
            "master answered " + ProtoMapping.describeCode(code);
        return new GranaryException(errorCode, "get " + Keys.quote(key) + ": " + what);
    }

    /** True for the codes a node answers when it refuses a transfer's access token. */
    static boolean isTokenRefusal(final int code)
    {
        return code == ErrorCode.TOKEN_EXPIRED.code() || code == ErrorCode.ACCESS_DENIED.code();
    }

    String key()
    {
        return key;
    }

    long length()
    {
        return length;
    }

    /**
     * Sets where the value goes: from {@code dst}'s position on, which must leave room for {@link #length()}.
     * A zero-length value is done at once.
     */
    void target(final ByteBuffer dst)
    {
        this.dst = dst;
        if (length == 0)
        {
            done = true;
        }
    }

    private void fail(final OpFailure failure)
    {
        this.failure = failure;
        this.done = true;
    }

    /**
     * Reads until a replica delivers the value or none is left. The future holds null on success, else the failure,
     * and completes on the thread that finished the last attempt (an engine I/O thread or a {@code failover} thread:
     * continue with an async stage). The first attempt is submitted from the calling thread; every failover, checksum
     * and replica-list refresh runs on {@code failover}, never on an engine I/O thread. Call once.
     */
    CompletableFuture<OpFailure> run(
        final TransferDispatcher transfers,
        final ReplicaSelector selector,
        final Clock clock,
        final Executor failover,
        final ReplicaRefresher refresher)
    {
        this.transfers = transfers;
        this.selector = selector;
        this.clock = clock;
        this.failover = failover;
        this.refresher = refresher;
        if (done)
        {
            outcome.complete(failure);
        }
        else
        {
            attempt();
        }
        return outcome;
    }

    /** Submits a read from the best replica not tried yet. */
    private void attempt()
    {
        final CompletableFuture<Integer> attempt;
        try
        {
            current = untried.remove(selector.pick(untried));
            final TransferRequest request = new TransferRequest(
                TransferRequest.Op.READ, current.endpoint(), current.segmentId(), current.offset(), dst.duplicate(),
                (int)length, current.accessToken(), current.grantOffset(), current.grantLength());
            if (verify && length >= ENGINE_CHECKSUM_MIN_BYTES)
            {
                request.requestReceivedCrc32c();
            }
            currentRequest = request;
            attempt = transfers.submit(request);
        }
        catch (final RuntimeException ex)
        {
            fail(new OpFailure(ErrorCode.INTERNAL_ERROR, "get " + Keys.quote(key) + ": " + ex));
            outcome.complete(failure);
            return;
        }
        attempt.thenAccept(this::onAttemptDone);
    }

    /** An attempt's transfer finished (usually on an engine I/O thread). */
    private void onAttemptDone(final int code)
    {
        int outcomeCode = code;
        if (code == 0 && verify)
        {
            final TransferRequest request = currentRequest;
            if (!request.hasReceivedCrc32c())
            {
                failover.execute(this::verifyAttempt); // the checksum of a big value is no work for an I/O thread
                return;
            }
            // The engine checksummed the bytes as they arrived: nothing left to read again.
            outcomeCode = request.receivedCrc32c() == expectedCrc ? 0 : CHECKSUM_MISMATCH;
        }
        record(outcomeCode, clock.nanoTime());
        if (done)
        {
            outcome.complete(failure);
        }
        else
        {
            failover.execute(this::next);
        }
    }

    /** Checks the bytes the current attempt delivered against the value's checksum; on a {@code failover} thread. */
    private void verifyAttempt()
    {
        final boolean intact = Checksums.crc32c(dst, (int)length) == expectedCrc;
        record(intact ? 0 : CHECKSUM_MISMATCH, clock.nanoTime());
        if (done)
        {
            outcome.complete(failure);
        }
        else
        {
            next();
        }
    }

    /** After a failed attempt, on a {@code failover} thread: fresh tokens once if a node refused ours, then on. */
    private void next()
    {
        if (lastTokenRefusal != 0 && !refreshed)
        {
            refreshed = true;
            try
            {
                final long askedAtNs = clock.nanoTime();
                final GetReplicaListResponse fresh = refresher.refresh(key);
                if (fresh.getCode() != 0)
                {
                    throw refusal(key, fresh.getCode());
                }
                if (fresh.getValueLength() != length)
                {
                    throw new GranaryException(ErrorCode.OBJECT_NOT_FOUND, "get " + Keys.quote(key) +
                        ": the object was replaced while it was read (" + length + " bytes, now " +
                        fresh.getValueLength() + ")");
                }
                adopt(fresh, askedAtNs);
            }
            catch (final GranaryException ex)
            {
                fail(OpFailure.of(ex));
                outcome.complete(failure);
                return;
            }
            if (untried.isEmpty())
            {
                fail(finalFailure());
                outcome.complete(failure);
                return;
            }
        }
        attempt();
    }

    /** Records the outcome of the current attempt. */
    private void record(final int code, final long nowNs)
    {
        if (code == 0)
        {
            if (leaseDeadlineNs != NO_DEADLINE && nowNs - leaseDeadlineNs > 0)
            {
                fail(new OpFailure(ErrorCode.LEASE_EXPIRED, "get " + Keys.quote(key) + ": the read from " +
                    current.describe() + " finished after the read lease expired; the bytes may be stale"));
                return;
            }
            done = true;
            return;
        }
        if (failures == null)
        {
            failures = new StringBuilder();
        }
        failures.append(failures.length() == 0 ? "" : ", ")
            .append(current.describe()).append(": ").append(ProtoMapping.describeCode(code));
        allTimedOut &= code == ErrorCode.RPC_TIMEOUT.code();
        if (isTokenRefusal(code))
        {
            lastTokenRefusal = code;
        }
        else
        {
            if (failedReplicas == null)
            {
                failedReplicas = new HashSet<>();
            }
            failedReplicas.add(identity(current));
            if (code == CHECKSUM_MISMATCH)
            {
                mismatches++;
            }
            else
            {
                otherFailures++;
            }
        }
        if (untried.isEmpty() && (refreshed || lastTokenRefusal == 0))
        {
            fail(finalFailure());
        }
    }

    /**
     * Every replica failed: CHECKSUM_MISMATCH when one delivered bytes that did not match (the caller's buffer holds
     * them: its content is undefined), the node's token code when every refusal was about the token, RPC_TIMEOUT when
     * every replica timed out (stalled nodes), else TRANSFER_FAIL; the message names every attempt.
     */
    private OpFailure finalFailure()
    {
        final ErrorCode code = mismatches > 0 ? ErrorCode.CHECKSUM_MISMATCH :
            otherFailures == 0 && lastTokenRefusal != 0 ? ProtoMapping.code(lastTokenRefusal) :
            allTimedOut && failures != null ? ErrorCode.RPC_TIMEOUT : ErrorCode.TRANSFER_FAIL;
        final String what = mismatches > 0 ? "no replica delivered bytes matching the value's checksum: " :
            "every replica failed: ";
        return new OpFailure(code, "get " + Keys.quote(key) + ": " + what + (failures == null ? "" : failures));
    }

    private static String identity(final ReplicaExtent extent)
    {
        return extent.endpoint() + '/' + Integer.toUnsignedString(extent.segmentId()) + '/' + extent.offset();
    }
}
