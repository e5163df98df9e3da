package io.granary.client;

/**
 * Outcome codes of store operations. Names and numbers follow Mooncake Store where one exists,
 * so that people who know Mooncake recognise them; the same numbers travel in control-plane
 * replies and data-plane frames (docs/protocol.md).
 */
public enum ErrorCode
{
    OK(0),
    INTERNAL_ERROR(-1),
    BUFFER_OVERFLOW(-10),
    SEGMENT_NOT_FOUND(-101),
    SEGMENT_ALREADY_EXISTS(-102),
    NO_AVAILABLE_HANDLE(-200),
    INVALID_KEY(-400),
    INVALID_PARAMS(-600),
    ILLEGAL_CLIENT(-601),
    REPLICA_IS_NOT_READY(-703),
    OBJECT_NOT_FOUND(-704),
    OBJECT_ALREADY_EXISTS(-705),
    OBJECT_HAS_LEASE(-706),
    LEASE_EXPIRED(-707),
    TRANSFER_FAIL(-800),
    CHECKSUM_MISMATCH(-801),
    RPC_FAIL(-900),
    RPC_TIMEOUT(-901),
    UNAVAILABLE_IN_CURRENT_STATUS(-1010),
    TENANT_QUOTA_EXCEEDED(-1700),
    /** A storage node refused a transfer: missing, forged or wrong-operation token, or a range outside its grant. */
    ACCESS_DENIED(-1800),
    /** A storage node refused a transfer whose access token expired. */
    TOKEN_EXPIRED(-1801);

    private static final ErrorCode[] VALUES = values();

    private final int code;

    ErrorCode(final int code)
    {
        this.code = code;
    }

    /** The wire number. */
    public int code()
    {
        return code;
    }

    public boolean isOk()
    {
        return this == OK;
    }

    /** Maps a wire number to its code; unknown numbers map to {@link #INTERNAL_ERROR}. */
    public static ErrorCode fromCode(final int code)
    {
        for (final ErrorCode c : VALUES)
        {
            if (c.code == code)
            {
                return c;
            }
        }
        return INTERNAL_ERROR;
    }
}
