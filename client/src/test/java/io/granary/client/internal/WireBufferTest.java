package io.granary.client.internal;

import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.LeaseMode;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class WireBufferTest
{
    @Test
    void shouldWriteWhatProtobufParsesBack() throws Exception
    {
        final List<String> keys = List.of("a", "ключ/ü", "x".repeat(200), "emoji-\uD83D\uDE00", "", "k".repeat(20_000));
        final WireBuffer out = new WireBuffer(4);
        out.reset(3); // payloads start after a header in real frames
        out.writeStringField(1, "tenant-1");
        out.writeVarintField(2, LeaseMode.LEASE_MODE_LAST_HIT_ONLY_VALUE);
        out.writeVarintField(3, 5);
        out.writeStrings(4, keys);
        final BatchProbeKeyRequest parsed =
            BatchProbeKeyRequest.parseFrom(Arrays.copyOfRange(out.array(), 3, out.position()));
        assertThat(parsed.getTenant()).isEqualTo("tenant-1");
        assertThat(parsed.getMode()).isEqualTo(LeaseMode.LEASE_MODE_LAST_HIT_ONLY);
        assertThat(parsed.getCandidateSize()).isEqualTo(5);
        assertThat(parsed.getKeysList()).containsExactlyElementsOf(keys);
    }

    @Test
    void shouldSkipEmptyAndZeroFieldsLikeProto3()
    {
        final WireBuffer out = new WireBuffer(16);
        out.writeStringField(1, "");
        out.writeVarintField(2, 0);
        assertThat(out.position()).isZero();
    }
}
