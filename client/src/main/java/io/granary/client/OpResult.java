package io.granary.client;

import java.util.Objects;

/**
 * The outcome of one key of a batch call: a value, or the {@link ErrorCode} that kept it from one.
 * Immutable; a byte[] value is the caller's to keep (not copied).
 *
 * @param <T> the value type ({@link Void} for calls that return nothing).
 */
public final class OpResult<T>
{
    private final T value;
    private final ErrorCode error;
    private final String message;

    private OpResult(final T value, final ErrorCode error, final String message)
    {
        this.value = value;
        this.error = error;
        this.message = message;
    }

    public static <T> OpResult<T> ok(final T value)
    {
        return new OpResult<>(value, ErrorCode.OK, null);
    }

    public static <T> OpResult<T> failed(final ErrorCode error)
    {
        return failed(error, null);
    }

    /** @throws IllegalArgumentException for {@link ErrorCode#OK}: a failure needs a failing code. */
    public static <T> OpResult<T> failed(final ErrorCode error, final String message)
    {
        Objects.requireNonNull(error, "error");
        if (error.isOk())
        {
            throw new IllegalArgumentException("a failed OpResult cannot carry OK");
        }
        return new OpResult<>(null, error, message);
    }

    /** True when the operation succeeded. */
    public boolean ok()
    {
        return error.isOk();
    }

    /** The value; null for {@code OpResult<Void>}. @throws GranaryException with the code if not ok. */
    public T value()
    {
        if (!error.isOk())
        {
            throw new GranaryException(error, message);
        }
        return value;
    }

    /** {@link ErrorCode#OK} when ok, else the failure. */
    public ErrorCode error()
    {
        return error;
    }

    /** What went wrong (which key, which node), or null when ok or unknown. */
    public String message()
    {
        return message;
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof OpResult))
        {
            return false;
        }
        final OpResult<?> other = (OpResult<?>)o;
        return error == other.error && Objects.equals(value, other.value) && Objects.equals(message, other.message);
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(value, error, message);
    }

    @Override
    public String toString()
    {
        return error.isOk() ? "OpResult[ok " + value + "]" :
            "OpResult[" + error + (message == null ? "" : ": " + message) + "]";
    }
}
