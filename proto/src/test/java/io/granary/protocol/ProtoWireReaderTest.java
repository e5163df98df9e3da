package io.granary.protocol;

import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.proto.Replica;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The shared wire reader's varints and skipping, held to protobuf-java's parser. */
class ProtoWireReaderTest
{
    /** Reads field 4 (Replica.offset, a uint64) the way a decoder built on the reader would. */
    private static final class OffsetReader extends ProtoWireReader
    {
        long offset;

        long read(final byte[] bytes) throws InvalidProtocolBufferException
        {
            payload = bytes;
            pos = 0;
            end = bytes.length;
            while (pos < end)
            {
                final int tag = readTag();
                if (tag == (4 << 3 | WIRE_VARINT))
                {
                    offset = readVarint();
                }
                else
                {
                    skip(tag >>> 3, tag & 7, 0);
                }
            }
            return offset;
        }
    }

    @Test
    void shouldReadEveryVarintOfOneToTenBytesAsProtobufDoesNonCanonicalTenthBytesIncluded()
        throws InvalidProtocolBufferException
    {
        final SplittableRandom random = new SplittableRandom(3);
        int tenByte = 0;
        for (int round = 0; round < 50_000; round++)
        {
            final int n = 1 + random.nextInt(10);
            final int padding = random.nextInt(3) == 0 ? 0 : 2 * random.nextInt(1, 7);
            final byte[] bytes = new byte[1 + n + padding];
            bytes[0] = 4 << 3; // Replica.offset, varint
            for (int i = 0; i < n; i++)
            {
                bytes[1 + i] = (byte)(random.nextInt(128) | (i < n - 1 ? 0x80 : 0));
            }
            for (int i = 0; i < padding; i += 2)
            {
                bytes[1 + n + i] = 5 << 3; // Replica.length = 0 after it, so the varint is not at the end
            }
            tenByte += n == 10 ? 1 : 0;
            assertThat(new OffsetReader().read(bytes)).as("round %d", round)
                .isEqualTo(Replica.parseFrom(bytes).getOffset());
        }
        assertThat(tenByte).isGreaterThan(1000);
    }

    @Test
    void shouldRefuseWhatProtobufRefuses()
    {
        final byte[][] malformed = {
            {4 << 3, (byte)0x80}, // truncated varint
            {4 << 3, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80,
                (byte)0x80, (byte)0x80, 0}, // eleven bytes
            {0}, // tag 0
            {(byte)(7 << 3 | 6)}, // wire type 6
            {(byte)(9 << 3 | 2), 5, 1}, // length beyond the end
            {(byte)(9 << 3 | 3), (byte)(8 << 3 | 4)}, // group ended by another field's end tag
            {(byte)(9 << 3 | 4)}, // end-group without a group
        };
        for (final byte[] bytes : malformed)
        {
            assertThatThrownBy(() -> Replica.parseFrom(bytes)).isInstanceOf(InvalidProtocolBufferException.class);
            assertThatThrownBy(() -> new OffsetReader().read(bytes)).isInstanceOf(InvalidProtocolBufferException.class);
        }
        assertThat(ProtoWireReader.validUtf8(new byte[] {(byte)0xC3, (byte)0xA9}, 0, 2)).isTrue();
        assertThat(ProtoWireReader.validUtf8(new byte[] {(byte)0xED, (byte)0xA0, (byte)0x80}, 0, 3)).isFalse();
    }
}
