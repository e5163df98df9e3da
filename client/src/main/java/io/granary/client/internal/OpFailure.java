package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;

/** Why one key's operation failed, as a value: becomes an exception for single calls, a result in batches. */
record OpFailure(ErrorCode code, String message)
{
    static OpFailure of(final GranaryException ex)
    {
        return new OpFailure(ex.code(), ex.getMessage());
    }

    GranaryException toException()
    {
        return new GranaryException(code, message);
    }

    <T> OpResult<T> toResult()
    {
        return OpResult.failed(code, message);
    }
}
