package io.granary.transfer.natives;

import java.nio.ByteBuffer;

/**
 * The JNI entry points of libgranary_transfer (native-transfer/src/main/c/gt_jni.c), and nothing else. Handles are
 * C pointers as longs; failures come back as negative ErrorCode numbers, or as IllegalArgumentException /
 * IllegalStateException with the library's message where a call cannot return a code. Call only after
 * {@link NativeTransfer#ensureAvailability()}.
 */
final class NativeTransferJni
{
    private NativeTransferJni()
    {
    }

    static native String version();

    /** Null when an RDMA device can be used, else why not. */
    static native String rdmaUnavailabilityCause();

    /**
     * Maps zeroed anonymous memory of {@code length} bytes rounded up to 2 MiB, starting on a 2 MiB boundary, advised
     * MADV_HUGEPAGE when {@code huge}; returns its address. Throws IllegalArgumentException for a bad length,
     * IllegalStateException (with the cause) when mmap fails or the kernel refuses the advice.
     */
    static native long memoryMap(long length, boolean huge);

    /** A direct ByteBuffer over {@code length} (1..2^31-1) bytes at {@code address}; IllegalArgumentException else. */
    static native ByteBuffer memoryBuffer(long address, long length);

    /** Unmaps what {@link #memoryMap} returned: 0, or a negative code for an address or length it did not make. */
    static native int memoryUnmap(long address, long mappedLength);

    /**
     * @param maxVectorEntries small READs one READV carries (1 = no READV); see TransferConfig#maxVectorEntries.
     * @param rdmaReads        READs without a token go one-sided over RDMA where a device exists and the node agrees.
     * @param spreadMinBytes   frames of at least this many bytes go round-robin over a peer's lanes, shorter ones on
     *                         its first lane; 0: every frame round-robin.
     * @param writeCommits     a one-frame WRITE whose COMMIT record is known goes with it as one WRITE_COMMIT frame.
     * @param localTransfers   READs and WRITEs of at least localMinBytes to a node on this host that agrees
     *                         (LOCAL_CONNECT) move with process_vm_readv/writev instead of TCP.
     */
    static native long engineCreate(
        int lanesPerPeer,
        int sliceBytes,
        int maxQueuedFramesPerPeer,
        int maxPendingPerPeer,
        long admissionTimeoutMs,
        long transferTimeoutMs,
        long connectTimeoutMs,
        int maxVectorEntries,
        boolean rdmaReads,
        int spreadMinBytes,
        boolean writeCommits,
        boolean localTransfers,
        int localMinBytes);

    /**
     * Pins a direct buffer's whole capacity: transfers inside it use it without a registration of their own. 0, or
     * INVALID_PARAMS (not direct, empty, overlapping a pinned buffer) or UNAVAILABLE (too many) as negative numbers.
     */
    static native int enginePinMemory(long engine, ByteBuffer buffer);

    /** Forgets a pinned buffer (no transfer on it outstanding): 0, or INVALID_PARAMS when it was not pinned. */
    static native int engineUnpinMemory(long engine, ByteBuffer buffer);

    /** A peer id (positive) for host:port, or a negative ErrorCode number. */
    static native int engineConnect(long engine, String host, int port);

    /** {@link #engineSubmit} flag: the WRITE's COMMIT payload comes later, through {@link #engineProvideCommit}. */
    static final int SUBMIT_COMMIT_LATER = 0x01;
    /** {@link #engineSubmit} flag: the READ's completion carries the CRC32C of its bytes, computed as they arrived. */
    static final int SUBMIT_CRC32C = 0x02;
    /**
     * Bytes of one completion {@link #enginePoll} writes, native order: user data (8), status (4), 1 when a CRC32C
     * follows (4), the CRC32C (4), padding (4).
     */
    static final int COMPLETION_BYTES = 24;

    /**
     * Submits one READ (opcode 1) or WRITE (2) of {@code length} bytes at {@code position} of the direct buffer
     * {@code local}; 0, or a negative ErrorCode number when nothing was submitted. The completion carries
     * {@code userData}. {@code flags}: {@link #SUBMIT_COMMIT_LATER}, {@link #SUBMIT_CRC32C}.
     */
    static native int engineSubmit(
        long engine,
        long userData,
        int peer,
        int opcode,
        ByteBuffer local,
        int position,
        int length,
        int segmentId,
        long remoteOffset,
        long grantOffset,
        long grantLength,
        byte[] token,
        byte[] commit,
        int flags);

    /** The COMMIT payload of a WRITE submitted with {@link #SUBMIT_COMMIT_LATER}; null for none after all. */
    static native int engineProvideCommit(long engine, long userData, byte[] commit);

    /**
     * Runs the engine's I/O for up to {@code timeoutMs} and writes up to {@code max} completions into the direct
     * buffer ({@link #COMPLETION_BYTES} each); returns how many, or a negative code.
     */
    static native int enginePoll(long engine, ByteBuffer completions, int max, int timeoutMs);

    static native void engineWakeup(long engine);

    /** Outstanding frames in the high 32 bits, pending admissions in the low ones; -1 for an unknown peer. */
    static native long enginePeerStats(long engine, int peer);

    /**
     * Fills {@code out[0..3)}: transfers admitted, refused with the queue full, timed out waiting for admission; and
     * {@code out[3]}, when there, the memory regions registered now; {@code out[4..6)}, when there, READs completed
     * one-sided over RDMA with success and without; {@code out[6..9)}, when there, READs and WRITEs moved locally
     * (process_vm_readv/writev) and eligible transfers that took TCP instead.
     */
    static native void engineCounters(long engine, long[] out);

    static native void engineDestroy(long engine);

    /**
     * @param ownClock  tokens expire by {@link NativeTransferServer.Handler#epochMillis()} instead of the system clock.
     * @param ioThreads event loops (1..256), each to be run by {@link #serverRun} on a thread of its own.
     * @param localTransfers answer LOCAL_CONNECT from clients on this host (else UNAVAILABLE_IN_CURRENT_STATUS).
     */
    static native long serverCreate(
        String host, int port, int maxFrameBytes, boolean ownClock, int ioThreads, boolean localTransfers);

    static native int serverPort(long server);

    static native void serverSetSegments(long server, int[] ids, long[] addresses, long[] sizes);

    static native void serverSetTokenKey(long server, byte[] keyOrNull);

    /**
     * Runs event loop {@code loop} (loop 0 also accepts) on the calling thread until {@link #serverStop}, calling back
     * {@code handler} for its connections on this thread; 0 or a code.
     */
    static native int serverRun(long server, int loop, NativeTransferServer.Handler handler);

    static native void serverStop(long server);

    /** Fills {@code out} with the server's counters in the order of {@link NativeTransferServer.Stats}. */
    static native void serverStats(long server, long[] out);

    static native void serverDestroy(long server);
}
