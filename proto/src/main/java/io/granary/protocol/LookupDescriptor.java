package io.granary.protocol;

/**
 * Byte layout of the master's framed lookup protocol (see docs/protocol.md): the calls on every
 * request's critical path (exists, probes, replica lists, put start/end/revoke) over plain TCP with
 * the same protobuf messages as gRPC, minus HTTP/2. Every frame, request or response:
 *
 * <pre>
 *   0  uint32 frameLength   bytes after this field (header rest + payload)
 *   4  uint8  version       {@link #VERSION}
 *   5  uint8  method        a METHOD_ constant; a response sets {@link #RESPONSE_BIT}
 *   6  uint16 status        0 = payload is the method's response message; else a STATUS_ code and a UTF-8 message
 *   8  int64  requestId     echoed in the response
 *  16  payload              protobuf-encoded request or response
 * </pre>
 * Big-endian. Requests on one connection may be pipelined; responses come back in request order.
 */
public final class LookupDescriptor
{
    public static final byte VERSION = 1;
    public static final int LENGTH_FIELD_LENGTH = 4;
    public static final int HEADER_LENGTH = 16;
    public static final int VERSION_OFFSET = 4;
    public static final int METHOD_OFFSET = 5;
    public static final int STATUS_OFFSET = 6;
    public static final int REQUEST_ID_OFFSET = 8;
    public static final int MAX_FRAME_LENGTH = 64 << 20;

    public static final int RESPONSE_BIT = 0x80;
    /** KeyRequest → ExistKeyResponse. */
    public static final int METHOD_EXIST_KEY = 1;
    /** BatchKeysRequest → BatchExistKeyResponse. */
    public static final int METHOD_BATCH_EXIST_KEY = 2;
    /** BatchProbeKeyRequest → BatchProbeKeyResponse. */
    public static final int METHOD_BATCH_PROBE_KEY = 3;
    /** KeyRequest → GetReplicaListResponse. */
    public static final int METHOD_GET_REPLICA_LIST = 4;
    /** BatchKeysRequest → BatchGetReplicaListResponse. */
    public static final int METHOD_BATCH_GET_REPLICA_LIST = 5;
    /** PutStartRequest → PutStartResponse. */
    public static final int METHOD_PUT_START = 6;
    /** PutEndRequest → CodeResponse. */
    public static final int METHOD_PUT_END = 7;
    /** PutRevokeRequest → CodeResponse. */
    public static final int METHOD_PUT_REVOKE = 8;
    /** BatchPutStartRequest → BatchPutStartResponse. */
    public static final int METHOD_BATCH_PUT_START = 9;
    /** BatchKeysRequest → BatchCodeResponse. */
    public static final int METHOD_BATCH_PUT_END = 10;
    /** BatchKeysRequest → BatchCodeResponse. */
    public static final int METHOD_BATCH_PUT_REVOKE = 11;

    public static final int STATUS_OK = 0;
    /** The payload did not parse as the method's request message. */
    public static final int STATUS_MALFORMED = 1;
    public static final int STATUS_UNKNOWN_METHOD = 2;
    public static final int STATUS_BAD_VERSION = 3;
    public static final int STATUS_INTERNAL = 4;

    private LookupDescriptor()
    {
    }
}
