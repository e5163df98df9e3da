package io.granary.protocol;

/**
 * Byte layout of a data-plane transfer frame header, in one place (see docs/protocol.md).
 *
 * <p>Every frame starts with a fixed {@value #HEADER_LENGTH}-byte big-endian header; a WRITE
 * request and a successful READ response are followed by exactly {@code length} payload bytes.
 * The Java (Netty) and native (C) implementations share this layout bit for bit. Bytes 36..63 carry
 * a request's access token (see {@link AccessTokenCodec}); responses leave them zero.
 */
public final class FrameDescriptor
{
    /** "GRNY" in ASCII. */
    public static final int MAGIC = 0x47524E59;
    public static final byte VERSION = 1;
    public static final int HEADER_LENGTH = 64;

    public static final int MAGIC_OFFSET = 0;            // int32
    public static final int VERSION_OFFSET = 4;          // uint8
    public static final int OPCODE_OFFSET = 5;           // uint8
    public static final int FLAGS_OFFSET = 6;            // uint16
    public static final int REQUEST_ID_OFFSET = 8;       // int64
    public static final int SEGMENT_ID_OFFSET = 16;      // uint32
    public static final int STATUS_OFFSET = 20;          // int32, ErrorCode number; 0 in requests
    public static final int OFFSET_OFFSET = 24;          // uint64, byte offset inside the segment
    public static final int LENGTH_OFFSET = 32;          // uint32, range length in bytes
    public static final int GRANT_DELTA_OFFSET = 36;     // uint32, offset - base of the granted extent; 0 = no token
    public static final int GRANT_LENGTH_OFFSET = 40;    // uint32, length of the granted extent; 0 = no token
    public static final int TOKEN_EXPIRY_OFFSET = 44;    // uint32, epoch seconds; 0 = no token
    public static final int TOKEN_MAC_OFFSET = 48;       // 16 bytes
    public static final int TOKEN_MAC_LENGTH = 16;

    /** Most entries one READV or WRITEV frame may carry (each a 64-byte READ or WRITE_COMMIT header). */
    public static final int MAX_VECTOR_ENTRIES = 1024;
    /** Bytes of one READV or WRITEV status in the response (int32, an ErrorCode number). */
    public static final int VECTOR_STATUS_LENGTH = 4;
    /**
     * Longest table a WRITEV may carry: its {@code offset} field, 64 bytes per entry (a WRITE_COMMIT request header)
     * plus the sum of the entries' commit-record lengths. Longer tables refuse the whole vector (docs/protocol.md,
     * "WRITEV"); a node buffers at most this much of a WRITEV besides segment memory.
     */
    public static final int MAX_WRITEV_TABLE = 1 << 20;

    /**
     * An access token as the master hands it out ({@code Replica.access_token}): the expiry and the MAC, i.e.
     * bytes {@value #TOKEN_EXPIRY_OFFSET}..63 of a request header verbatim.
     */
    public static final int ACCESS_TOKEN_LENGTH = 4 + TOKEN_MAC_LENGTH;

    /** Longest extent a token can grant: the grant fields are 32-bit. */
    public static final long MAX_GRANT_LENGTH = 0xFFFF_FFFFL;

    /** Largest range a single frame may carry; nodes may configure a smaller limit. */
    public static final int MAX_FRAME_LENGTH_LIMIT = 1 << 30;

    // COMMIT payload (a CommitRecord): the frame's segment_id and offset name the extent, its length
    // is the payload's. Big-endian like the header; the strings are UTF-8.
    public static final int COMMIT_FORMAT_OFFSET = 0;          // uint8, COMMIT_FORMAT
    public static final int COMMIT_FLAGS_OFFSET = 1;           // uint8, CommitRecord.FLAG_*
    public static final int COMMIT_TENANT_LENGTH_OFFSET = 2;   // uint16
    public static final int COMMIT_KEY_LENGTH_OFFSET = 4;      // uint16
    public static final int COMMIT_GROUP_LENGTH_OFFSET = 6;    // uint16
    public static final int COMMIT_VALUE_LENGTH_OFFSET = 8;    // uint64, bytes of the value in the extent
    public static final int COMMIT_VERSION_OFFSET = 16;        // uint64, the master's object version, nonzero
    public static final int COMMIT_SOFT_PIN_TTL_OFFSET = 24;   // uint64, ms
    public static final int COMMIT_CRC32C_OFFSET = 32;         // uint32
    public static final int COMMIT_STRINGS_OFFSET = 36;        // tenant, key, group id, parent key (FLAG_PARENT)
    public static final byte COMMIT_FORMAT = 1;
    /** Longest COMMIT payload a node accepts; longer ones are discarded and answered INVALID_PARAMS. */
    public static final int MAX_COMMIT_PAYLOAD = 16 << 10;

    private FrameDescriptor()
    {
    }
}
