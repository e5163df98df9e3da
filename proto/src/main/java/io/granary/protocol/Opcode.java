package io.granary.protocol;

/** Data-plane operation codes; a response carries its request's code with {@link #RESPONSE_BIT} set. */
public final class Opcode
{
    public static final int READ = 0x01;
    public static final int WRITE = 0x02;
    public static final int PING = 0x03;
    /** Records a written extent as complete in the node's ledger; the payload is a {@link CommitRecord}. */
    public static final int COMMIT = 0x04;
    /**
     * The RDMA queue-pair information exchange: the payload is a 64-byte {@link QpInfo} naming the segment; a
     * successful response carries the node's record for it (docs/protocol.md, "RDMA: queue-pair information").
     */
    public static final int RDMA_CONNECT = 0x05;
    /**
     * A WRITE that carries its COMMIT: the payload is a {@link CommitRecord} of {@code flags} bytes, then the
     * {@code length} bytes of the range; one answer for both (docs/protocol.md, "WRITE_COMMIT").
     */
    public static final int WRITE_COMMIT = 0x06;
    /**
     * Same-host transfers: no payload; a successful response carries the node's 64-byte record of where the segment
     * lies in its memory (docs/protocol.md, "LOCAL_CONNECT"), for a client that copies with process_vm_readv/writev.
     */
    public static final int LOCAL_CONNECT = 0x07;
    /**
     * A vector of small READs in one frame: the payload is {@code n} 64-byte READ request headers; the response
     * payload is {@code n} int32 statuses, then the bytes of every entry whose status is 0, in entry order.
     */
    public static final int READV = 0x10;
    /**
     * A vector of small WRITE_COMMITs in one frame: {@code flags} = the number of entries {@code n}, {@code offset} =
     * the table's length; the payload is the table ({@code n} 64-byte WRITE_COMMIT request headers, then their commit
     * records) followed by the values; the response payload is {@code n} int32 statuses (docs/protocol.md, "WRITEV").
     */
    public static final int WRITEV = 0x11;
    public static final int RESPONSE_BIT = 0x80;
    public static final int READ_RESPONSE = READ | RESPONSE_BIT;
    public static final int WRITE_RESPONSE = WRITE | RESPONSE_BIT;
    public static final int PING_RESPONSE = PING | RESPONSE_BIT;
    public static final int COMMIT_RESPONSE = COMMIT | RESPONSE_BIT;
    public static final int READV_RESPONSE = READV | RESPONSE_BIT;
    public static final int WRITEV_RESPONSE = WRITEV | RESPONSE_BIT;
    public static final int RDMA_CONNECT_RESPONSE = RDMA_CONNECT | RESPONSE_BIT;
    public static final int WRITE_COMMIT_RESPONSE = WRITE_COMMIT | RESPONSE_BIT;
    public static final int LOCAL_CONNECT_RESPONSE = LOCAL_CONNECT | RESPONSE_BIT;

    private Opcode()
    {
    }

    public static boolean isRequest(final int opcode)
    {
        return opcode == READ || opcode == WRITE || opcode == PING || opcode == COMMIT || opcode == READV ||
            opcode == WRITEV || opcode == RDMA_CONNECT || opcode == WRITE_COMMIT || opcode == LOCAL_CONNECT;
    }

    public static boolean isResponse(final int opcode)
    {
        return opcode == READ_RESPONSE || opcode == WRITE_RESPONSE || opcode == PING_RESPONSE ||
            opcode == COMMIT_RESPONSE || opcode == READV_RESPONSE || opcode == WRITEV_RESPONSE ||
            opcode == RDMA_CONNECT_RESPONSE || opcode == WRITE_COMMIT_RESPONSE || opcode == LOCAL_CONNECT_RESPONSE;
    }

    public static String name(final int opcode)
    {
        switch (opcode)
        {
            case READ: return "READ";
            case WRITE: return "WRITE";
            case PING: return "PING";
            case COMMIT: return "COMMIT";
            case READV: return "READV";
            case WRITEV: return "WRITEV";
            case RDMA_CONNECT: return "RDMA_CONNECT";
            case WRITE_COMMIT: return "WRITE_COMMIT";
            case LOCAL_CONNECT: return "LOCAL_CONNECT";
            case READ_RESPONSE: return "READ_RESPONSE";
            case WRITE_RESPONSE: return "WRITE_RESPONSE";
            case PING_RESPONSE: return "PING_RESPONSE";
            case COMMIT_RESPONSE: return "COMMIT_RESPONSE";
            case READV_RESPONSE: return "READV_RESPONSE";
            case WRITEV_RESPONSE: return "WRITEV_RESPONSE";
            case RDMA_CONNECT_RESPONSE: return "RDMA_CONNECT_RESPONSE";
            case WRITE_COMMIT_RESPONSE: return "WRITE_COMMIT_RESPONSE";
            case LOCAL_CONNECT_RESPONSE: return "LOCAL_CONNECT_RESPONSE";
            default: return "UNKNOWN(0x" + Integer.toHexString(opcode) + ")";
        }
    }
}
