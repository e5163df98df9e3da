package io.granary.client;

import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

class ErrorCodeTest
{
    private static io.granary.proto.ErrorCode[] wireCodes()
    {
        return Arrays.stream(io.granary.proto.ErrorCode.values())
            .filter(c -> c != io.granary.proto.ErrorCode.UNRECOGNIZED)
            .toArray(io.granary.proto.ErrorCode[]::new);
    }

    @Test
    void shouldMatchEveryWireCodeByNameAndNumber()
    {
        for (final io.granary.proto.ErrorCode wire : wireCodes())
        {
            final ErrorCode client = ErrorCode.valueOf(wire.name());
            assertThat(client.code()).as(wire.name()).isEqualTo(wire.getNumber());
        }
    }

    @Test
    void shouldHaveNoCodeTheWireLacks()
    {
        for (final ErrorCode client : ErrorCode.values())
        {
            final io.granary.proto.ErrorCode wire = io.granary.proto.ErrorCode.forNumber(client.code());
            assertThat(wire).as(client.name()).isNotNull();
            assertThat(wire.name()).isEqualTo(client.name());
        }
        assertThat(ErrorCode.values()).hasSameSizeAs(wireCodes());
    }

    @Test
    void shouldMapNumbersBackAndUnknownNumbersToInternalError()
    {
        for (final ErrorCode code : ErrorCode.values())
        {
            assertThat(ErrorCode.fromCode(code.code())).isSameAs(code);
        }
        assertThat(ErrorCode.fromCode(-12345)).isSameAs(ErrorCode.INTERNAL_ERROR);
        assertThat(ErrorCode.OK.isOk()).isTrue();
        assertThat(ErrorCode.TRANSFER_FAIL.isOk()).isFalse();
    }
}
