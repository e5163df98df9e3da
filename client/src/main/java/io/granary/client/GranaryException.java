package io.granary.client;

import java.util.Objects;

/**
 * The one exception the client throws for store outcomes and infrastructure failures; {@link #code()}
 * says which. Transport failures of the control plane arrive as {@link ErrorCode#RPC_FAIL} or
 * {@link ErrorCode#RPC_TIMEOUT} with the gRPC status as the cause.
 */
public final class GranaryException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    public GranaryException(final ErrorCode code, final String message)
    {
        this(code, message, null);
    }

    public GranaryException(final ErrorCode code, final String message, final Throwable cause)
    {
        super(format(code, message), cause);
        this.code = code;
    }

    /** Never {@link ErrorCode#OK}. */
    public ErrorCode code()
    {
        return code;
    }

    private static String format(final ErrorCode code, final String message)
    {
        Objects.requireNonNull(code, "code");
        if (code.isOk())
        {
            throw new IllegalArgumentException("a GranaryException cannot carry OK");
        }
        return code.name() + " (" + code.code() + ")" + (message == null || message.isEmpty() ? "" : ": " + message);
    }
}
