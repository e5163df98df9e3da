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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * Reads one value from one of its replicas, moving to the next replica when a transfer fails. Each
 * attempt asks the {@link ReplicaSelector} for the best replica not yet tried. A read that finishes
 * after the read lease ran out is LEASE_EXPIRED (the extent may have been reused meanwhile). Used by one
 * thread at a time: {@link #target}, then {@link #run}, after which the attempts hand the state on to each other
 * (submit, completion, failover), never touching it concurrently.
 */
final class ReadOperation
{
    private static final long NO_DEADLINE = Long.MAX_VALUE;

    private final String key;
    private final long length;
    private final List<ReplicaExtent> untried;
    private final long leaseDeadlineNs;
    private final StringBuilder failures = new StringBuilder();
    /** Every replica tried so far timed out (a stalled node): the read then fails with RPC_TIMEOUT. */
    private boolean allTimedOut = true;
    private final CompletableFuture<OpFailure> outcome = new CompletableFuture<>();
    private ByteBuffer dst;
    private ReplicaExtent current;
    private boolean done;
    private OpFailure failure;
    private TransferDispatcher transfers;
    private ReplicaSelector selector;
    private Clock clock;
    private Executor failover;

    private ReadOperation(final String key, final long length, final List<ReplicaExtent> replicas,
        final long leaseDeadlineNs)
    {
        this.key = key;
        this.length = length;
        this.untried = replicas;
        this.leaseDeadlineNs = leaseDeadlineNs;
    }

    /**
     * Builds the read from the master's answer.
     *
     * @param askedAtNs when the replica list was asked for; the lease is counted from there (conservative).
     * @throws GranaryException with the master's code when it refused, INTERNAL_ERROR when its answer is unusable.
     */
    static ReadOperation plan(final String key, final GetReplicaListResponse response, final long askedAtNs)
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
            replicas.add(extent);
        }
        if (replicas.isEmpty() && length > 0)
        {
            throw ReplicaExtent.nonsense(key, "no complete replica for a value of " + length + " bytes");
        }
        final long ttlMs = response.getLeaseTtlMs();
        final long deadline = ttlMs <= 0 || ttlMs > Long.MAX_VALUE / 2_000_000L ?
            NO_DEADLINE : askedAtNs + ttlMs * 1_000_000L;
        return new ReadOperation(key, length, replicas, deadline);
    }

    /** The failure for a non-OK code of the master. */
    static GranaryException refusal(final String key, final int code)
    {
        final ErrorCode errorCode = ProtoMapping.code(code);
        final String what = errorCode == ErrorCode.OBJECT_NOT_FOUND ? "not found" :
            "master answered " + ProtoMapping.describeCode(code);
        return new GranaryException(errorCode, "get " + Keys.quote(key) + ": " + what);
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
     * Reads until a replica succeeds or none is left. The future holds null on success, else the failure, and
     * completes on the thread that finished the last attempt (usually an engine I/O thread: continue with an
     * async stage). The first attempt is submitted from the calling thread, every failover from
     * {@code failover}, never from an engine I/O thread (a submit may wait for admission there). Call once.
     */
    CompletableFuture<OpFailure> run(
        final TransferDispatcher transfers, final ReplicaSelector selector, final Clock clock, final Executor failover)
    {
        this.transfers = transfers;
        this.selector = selector;
        this.clock = clock;
        this.failover = failover;
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
            attempt = transfers.submit(new TransferRequest(
                TransferRequest.Op.READ, current.endpoint(), current.segmentId(), current.offset(), dst.duplicate(),
                (int)length, current.accessToken()));
        }
        catch (final RuntimeException ex)
        {
            fail(new OpFailure(ErrorCode.INTERNAL_ERROR, "get " + Keys.quote(key) + ": " + ex));
            outcome.complete(failure);
            return;
        }
        attempt.thenAccept(this::onAttemptDone);
    }

    private void onAttemptDone(final int code)
    {
        record(code, clock.nanoTime());
        if (done)
        {
            outcome.complete(failure);
        }
        else
        {
            failover.execute(this::attempt);
        }
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
        failures.append(failures.length() == 0 ? "" : ", ")
            .append(current.describe()).append(": ").append(ProtoMapping.describeCode(code));
        allTimedOut &= code == ErrorCode.RPC_TIMEOUT.code();
        if (untried.isEmpty())
        {
            fail(new OpFailure(allTimedOut ? ErrorCode.RPC_TIMEOUT : ErrorCode.TRANSFER_FAIL, "get " +
                Keys.quote(key) + ": every replica failed: " + failures));
        }
    }
}
