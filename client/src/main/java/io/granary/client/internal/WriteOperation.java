package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.proto.Replica;
import io.granary.proto.SettledReplica;
import io.granary.transfer.TransferRequest;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Writes one value into every replica extent the master handed out, all in parallel, straight from the
 * caller's buffer (each request gets its own duplicate, so no position is ever moved), each followed by
 * the COMMIT that puts the extent in its node's ledger (when the master issued a version). Started once;
 * the outcome arrives through the future {@link #start(TransferDispatcher)} returns, or (a batch's writes) through
 * {@link #failure()} once the callback given to {@link #start(TransferDispatcher, Runnable)} ran.
 */
final class WriteOperation implements TransferDispatcher.Outcome
{
    private final String key;
    private final ByteBuffer value;
    private final List<ReplicaExtent> replicas;
    private final CompletableFuture<byte[]> commit;
    /** Each replica write's ErrorCode number (null: nothing was sent); complete once the writes finished. */
    private int[] codes;
    /** Replica writes not finished yet. */
    private final AtomicInteger pending = new AtomicInteger();
    private Runnable whenDone;

    private WriteOperation(
        final String key, final ByteBuffer value, final List<ReplicaExtent> replicas,
        final CompletableFuture<byte[]> commit)
    {
        this.key = key;
        this.value = value;
        this.replicas = replicas;
        this.commit = commit;
    }

    /**
     * Checks the master's extents against the value.
     *
     * @param value the bytes between position and limit are the value; not modified.
     * @throws io.granary.client.GranaryException INTERNAL_ERROR when there is no replica or an extent's
     *                                            length differs from the value's.
     */
    static WriteOperation plan(final String key, final ByteBuffer value, final List<Replica> replicas)
    {
        return plan(key, value, replicas, null);
    }

    /**
     * {@link #plan(String, ByteBuffer, List)} with the COMMIT payload ({@code io.granary.protocol.CommitRecord})
     * each replica's node gets once its bytes are in place; it may complete after {@link #start} (the engine
     * waits for it before sending the COMMIT); null sends none.
     */
    static WriteOperation plan(final String key, final ByteBuffer value, final List<Replica> replicas,
        final CompletableFuture<byte[]> commit)
    {
        final List<ReplicaExtent> extents = new ArrayList<>(replicas.size());
        for (final Replica replica : replicas)
        {
            extents.add(ReplicaExtent.from(replica, key));
        }
        return of(key, value, extents, commit);
    }

    /**
     * {@link #plan(String, ByteBuffer, List, CompletableFuture)} for extents already checked one by one.
     *
     * @param value the value between position and limit, in a buffer of the client's own: nothing here moves it.
     */
    static WriteOperation of(final String key, final ByteBuffer value, final List<ReplicaExtent> extents,
        final CompletableFuture<byte[]> commit)
    {
        if (extents.isEmpty())
        {
            throw ReplicaExtent.nonsense(key, "PutStart succeeded without a replica");
        }
        final int length = value.remaining();
        for (final ReplicaExtent extent : extents)
        {
            if (extent.length() != length)
            {
                throw ReplicaExtent.nonsense(key, "the extent on " + extent.describe() + " holds " + extent.length() +
                    " bytes for a value of " + length);
            }
        }
        return new WriteOperation(key, value, extents, commit);
    }

    /** Node ids of the replicas whose write failed; valid once the future of {@link #start} completed. */
    Set<String> failedNodes()
    {
        final Set<String> failed = new HashSet<>();
        for (int i = 0; codes != null && i < codes.length; i++)
        {
            if (codes[i] != 0)
            {
                failed.add(replicas.get(i).nodeId());
            }
        }
        return failed;
    }

    /**
     * The replicas this put will send no more bytes to because the node answered every write to them OK (a revoke
     * lets the master free them at once); valid once the future of {@link #start} completed.
     */
    List<SettledReplica> settled()
    {
        final List<SettledReplica> settled = new ArrayList<>(replicas.size());
        for (int i = 0; codes != null && i < codes.length; i++)
        {
            if (codes[i] == 0)
            {
                final ReplicaExtent extent = replicas.get(i);
                settled.add(settled(extent.nodeId(), extent.segmentId(), extent.offset()));
            }
        }
        return settled;
    }

    /** Every replica of a PutStart answer, for a revoke of a put that sent no bytes at all. */
    static List<SettledReplica> unwritten(final List<Replica> replicas)
    {
        final List<SettledReplica> all = new ArrayList<>(replicas.size());
        for (final Replica r : replicas)
        {
            all.add(settled(r.getNodeId(), r.getSegmentId(), r.getOffset()));
        }
        return all;
    }

    static SettledReplica settled(final String nodeId, final int segmentId, final long offset)
    {
        return SettledReplica.newBuilder().setNodeId(nodeId).setSegmentId(segmentId).setOffset(offset).build();
    }

    String key()
    {
        return key;
    }

    /**
     * Submits every replica write at once; a zero-length value moves no bytes. The future completes when every
     * write has finished (none is ever abandoned: the extents must not be revoked while bytes may still land in
     * them), on the thread that finished the last one, usually an engine I/O thread; it holds null when all
     * succeeded, else the failure naming every failed replica with the code of the first one.
     */
    CompletableFuture<OpFailure> start(final TransferDispatcher transfers)
    {
        final CompletableFuture<OpFailure> outcome = new CompletableFuture<>();
        start(transfers, () -> outcome.complete(failure()));
        return outcome;
    }

    /**
     * {@link #start(TransferDispatcher)} for a batch: {@code whenDone} runs once every write has finished, on the
     * thread that finished the last one (this one, when nothing was sent or every write finished at once);
     * {@link #failure()} is valid from then on. No future per write beyond the engine's own.
     */
    void start(final TransferDispatcher transfers, final Runnable whenDone)
    {
        final int length = value.remaining();
        if (length == 0 && commit == null)
        {
            whenDone.run();
            return;
        }
        final int n = replicas.size();
        codes = new int[n];
        this.whenDone = whenDone;
        pending.set(n);
        for (int i = 0; i < n; i++)
        {
            final ReplicaExtent extent = replicas.get(i);
            transfers.submit(new TransferRequest(
                TransferRequest.Op.WRITE, extent.endpoint(), extent.segmentId(), extent.offset(), value.duplicate(),
                length, extent.accessToken(), extent.grantOffset(), extent.grantLength(), commit), this, i);
        }
    }

    @Override
    public void settled(final int index, final int code)
    {
        codes[index] = code;
        if (pending.decrementAndGet() == 0) // the last one: every code above is visible to this thread
        {
            whenDone.run();
        }
    }

    /**
     * Null when every write succeeded (or none was needed), else the failure naming every failed replica with the
     * code of the first one; valid once the writes finished.
     */
    OpFailure failure()
    {
        if (codes == null)
        {
            return null;
        }
        int failedAt = -1;
        for (int i = 0; i < codes.length && failedAt < 0; i++)
        {
            failedAt = codes[i] != 0 ? i : -1;
        }
        if (failedAt < 0)
        {
            return null;
        }
        final StringBuilder failed = new StringBuilder();
        for (int i = failedAt; i < codes.length; i++)
        {
            if (codes[i] != 0)
            {
                failed.append(failed.length() == 0 ? "" : ", ")
                    .append(replicas.get(i).describe()).append(": ").append(ProtoMapping.describeCode(codes[i]));
            }
        }
        return new OpFailure(ProtoMapping.code(codes[failedAt]), "put " + Keys.quote(key) + ": writing " +
            value.remaining() + " bytes failed on " + failed);
    }
}
