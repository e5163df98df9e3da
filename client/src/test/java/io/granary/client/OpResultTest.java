package io.granary.client;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

class OpResultTest
{
    @Test
    void shouldHoldAValueWhenOk()
    {
        final OpResult<String> result = OpResult.ok("v");

        assertThat(result.ok()).isTrue();
        assertThat(result.value()).isEqualTo("v");
        assertThat(result.error()).isEqualTo(ErrorCode.OK);
        assertThat(result.message()).isNull();
        assertThat(OpResult.<Void>ok(null).value()).isNull();
    }

    @Test
    void shouldThrowTheCodeFromValueWhenFailed()
    {
        final OpResult<byte[]> result = OpResult.failed(ErrorCode.OBJECT_NOT_FOUND, "get 'k': not found");

        assertThat(result.ok()).isFalse();
        assertThat(result.error()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        final GranaryException ex = catchThrowableOfType(GranaryException.class, result::value);
        assertThat(ex.code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(ex.getMessage()).contains("OBJECT_NOT_FOUND").contains("-704").contains("'k'");
        assertThat(OpResult.failed(ErrorCode.TRANSFER_FAIL).message()).isNull();
    }

    @Test
    void shouldRefuseAFailureCarryingOk()
    {
        assertThatThrownBy(() -> OpResult.failed(ErrorCode.OK)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new GranaryException(ErrorCode.OK, "x")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldCompareByValue()
    {
        assertThat(OpResult.ok(true)).isEqualTo(OpResult.ok(true)).isNotEqualTo(OpResult.ok(false));
        assertThat(OpResult.failed(ErrorCode.INVALID_KEY, "m")).isEqualTo(OpResult.failed(ErrorCode.INVALID_KEY, "m"))
            .hasSameHashCodeAs(OpResult.failed(ErrorCode.INVALID_KEY, "m"));
    }
}
