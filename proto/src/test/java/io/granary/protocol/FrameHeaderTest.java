package io.granary.protocol;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static io.granary.protocol.FrameDescriptor.*;
import static org.assertj.core.api.Assertions.assertThat;

class FrameHeaderTest
{
    private final ByteBuf buffer = Unpooled.buffer(2 * HEADER_LENGTH);

    @AfterEach
    void release()
    {
        buffer.release();
    }

    private static FrameHeader sample()
    {
        final FrameHeader header =
            new FrameHeader().set(Opcode.WRITE, 0x0102030405060708L, 0xF0E0D0C0, 1L << 40, 0x7FFF_FFF0L);
        header.flags = 0xABCD;
        header.status = -1010;
        header.grantDelta = 0xFFFF_FFF0L;
        header.grantLength = 0x8765_4321L;
        header.tokenExpirySec = 0xF000_0001L;
        for (int i = 0; i < TOKEN_MAC_LENGTH; i++)
        {
            header.tokenMac[i] = (byte)(0xA0 + i);
        }
        return header;
    }

    @Test
    void shouldRoundTripEveryField()
    {
        final FrameHeader written = sample();
        written.encode(buffer);
        assertThat(buffer.readableBytes()).isEqualTo(HEADER_LENGTH);

        final FrameHeader read = new FrameHeader();
        assertThat(read.decode(buffer, MAX_FRAME_LENGTH_LIMIT)).isEqualTo(FrameHeader.DECODE_BAD_LENGTH);
        buffer.readerIndex(0);
        assertThat(read.decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_OK);

        assertThat(buffer.readerIndex()).isEqualTo(HEADER_LENGTH);
        assertThat(read.opcode).isEqualTo(Opcode.WRITE);
        assertThat(read.flags).isEqualTo(0xABCD);
        assertThat(read.requestId).isEqualTo(0x0102030405060708L);
        assertThat(read.segmentId).isEqualTo(0xF0E0D0C0);
        assertThat(read.status).isEqualTo(-1010);
        assertThat(read.offset).isEqualTo(1L << 40);
        assertThat(read.length).isEqualTo(0x7FFF_FFF0L);
        assertThat(read.grantDelta).isEqualTo(0xFFFF_FFF0L);
        assertThat(read.grantLength).isEqualTo(0x8765_4321L);
        assertThat(read.tokenExpirySec).isEqualTo(0xF000_0001L);
        assertThat(read.hasToken()).isTrue();
        assertThat(read.tokenMac).isEqualTo(written.tokenMac);
    }

    @Test
    void shouldRoundTripEveryOpcode()
    {
        final int[] opcodes = {Opcode.READ, Opcode.WRITE, Opcode.PING, Opcode.READ_RESPONSE, Opcode.WRITE_RESPONSE,
            Opcode.PING_RESPONSE};
        final FrameHeader read = new FrameHeader();
        for (final int opcode : opcodes)
        {
            buffer.clear();
            new FrameHeader().set(opcode, opcode, 7, 64, 4096).encode(buffer);
            assertThat(read.decode(buffer, 4096)).as(Opcode.name(opcode)).isEqualTo(FrameHeader.DECODE_OK);
            assertThat(read.opcode).isEqualTo(opcode);
            assertThat(read.requestId).isEqualTo(opcode);
        }
    }

    @Test
    void shouldLayOutFieldsBigEndianAtDocumentedOffsets()
    {
        sample().encode(buffer);

        final byte[] bytes = new byte[HEADER_LENGTH];
        buffer.getBytes(0, bytes);
        assertThat(slice(bytes, MAGIC_OFFSET, 4)).containsExactly('G', 'R', 'N', 'Y');
        assertThat(bytes[VERSION_OFFSET]).isEqualTo(VERSION);
        assertThat(bytes[OPCODE_OFFSET]).isEqualTo((byte)Opcode.WRITE);
        assertThat(slice(bytes, FLAGS_OFFSET, 2)).containsExactly(0xAB, 0xCD);
        assertThat(slice(bytes, REQUEST_ID_OFFSET, 8)).containsExactly(1, 2, 3, 4, 5, 6, 7, 8);
        assertThat(slice(bytes, SEGMENT_ID_OFFSET, 4)).containsExactly(0xF0, 0xE0, 0xD0, 0xC0);
        assertThat(slice(bytes, STATUS_OFFSET, 4)).containsExactly(0xFF, 0xFF, 0xFC, 0x0E); // -1010
        assertThat(slice(bytes, OFFSET_OFFSET, 8)).containsExactly(0, 0, 1, 0, 0, 0, 0, 0);
        assertThat(slice(bytes, LENGTH_OFFSET, 4)).containsExactly(0x7F, 0xFF, 0xFF, 0xF0);
        assertThat(slice(bytes, GRANT_DELTA_OFFSET, 4)).containsExactly(0xFF, 0xFF, 0xFF, 0xF0);
        assertThat(slice(bytes, GRANT_LENGTH_OFFSET, 4)).containsExactly(0x87, 0x65, 0x43, 0x21);
        assertThat(slice(bytes, TOKEN_EXPIRY_OFFSET, 4)).containsExactly(0xF0, 0x00, 0x00, 0x01);
        assertThat(bytes[TOKEN_MAC_OFFSET]).isEqualTo((byte)0xA0);
        assertThat(bytes[HEADER_LENGTH - 1]).isEqualTo((byte)(0xA0 + TOKEN_MAC_LENGTH - 1));
    }

    @Test
    void shouldWriteZeroTokenFieldsWhenNoneGiven()
    {
        FrameHeader.encode(buffer, Opcode.READ, 0, 1, 2, 0, 3, 4, 0, null);
        for (int i = GRANT_DELTA_OFFSET; i < HEADER_LENGTH; i++)
        {
            assertThat(buffer.getByte(i)).as("byte %d", i).isZero();
        }
        assertThat(buffer.writerIndex()).isEqualTo(HEADER_LENGTH);
        final FrameHeader read = new FrameHeader();
        assertThat(read.decode(buffer, 4096)).isEqualTo(FrameHeader.DECODE_OK);
        assertThat(read.hasToken()).isFalse();
    }

    @Test
    void shouldKeepTheAccessTokenBytesContiguousAtTheEndOfTheHeader()
    {
        assertThat(TOKEN_MAC_OFFSET).isEqualTo(TOKEN_EXPIRY_OFFSET + 4);
        assertThat(TOKEN_EXPIRY_OFFSET + ACCESS_TOKEN_LENGTH).isEqualTo(HEADER_LENGTH);
    }

    @Test
    void shouldRejectBadMagic()
    {
        sample().encode(buffer);
        buffer.setByte(MAGIC_OFFSET, 'X');
        assertThat(new FrameHeader().decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_BAD_MAGIC);
        assertThat(buffer.readerIndex()).isEqualTo(HEADER_LENGTH);
    }

    @Test
    void shouldRejectBadVersion()
    {
        sample().encode(buffer);
        buffer.setByte(VERSION_OFFSET, VERSION + 1);
        assertThat(new FrameHeader().decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_BAD_VERSION);
    }

    @Test
    void shouldRejectUnknownOpcodes()
    {
        for (final int opcode : new int[] {0x00, 0x08, 0x7F, 0x80, 0x88, 0xFF})
        {
            buffer.clear();
            sample().encode(buffer);
            buffer.setByte(OPCODE_OFFSET, opcode);
            assertThat(new FrameHeader().decode(buffer, Integer.MAX_VALUE))
                .as("opcode 0x%x", opcode).isEqualTo(FrameHeader.DECODE_BAD_OPCODE);
        }
    }

    @Test
    void shouldRejectLengthAboveLimitButAcceptLengthAtLimit()
    {
        new FrameHeader().set(Opcode.READ, 1, 1, 0, 4097).encode(buffer);
        assertThat(new FrameHeader().decode(buffer, 4096)).isEqualTo(FrameHeader.DECODE_BAD_LENGTH);

        buffer.clear();
        new FrameHeader().set(Opcode.READ, 1, 1, 0, 4096).encode(buffer);
        assertThat(new FrameHeader().decode(buffer, 4096)).isEqualTo(FrameHeader.DECODE_OK);
    }

    @Test
    void shouldTreatLengthAsUnsigned()
    {
        new FrameHeader().set(Opcode.READ, 1, 1, 0, 0x8000_0000L).encode(buffer);
        final FrameHeader read = new FrameHeader();
        assertThat(read.decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_BAD_LENGTH);
        assertThat(read.length).isEqualTo(0x8000_0000L);
    }

    @Test
    void shouldDecodeAtNonZeroReaderIndex()
    {
        buffer.writeZero(5).readerIndex(5);
        sample().encode(buffer);
        final FrameHeader read = new FrameHeader();
        assertThat(read.decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_OK);
        assertThat(read.requestId).isEqualTo(0x0102030405060708L);
        assertThat(buffer.readerIndex()).isEqualTo(5 + HEADER_LENGTH);
    }

    @Test
    void shouldSayWhichFramesCarryPayload()
    {
        assertThat(FrameHeader.carriesPayload(Opcode.WRITE, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.READ_RESPONSE, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.READ_RESPONSE, -600)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.READ, 0)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITE_RESPONSE, 0)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.PING, 0)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.PING_RESPONSE, 0)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.READV, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.READV_RESPONSE, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.READV_RESPONSE, -600)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITE_COMMIT, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITE_COMMIT_RESPONSE, 0)).isFalse();
        assertThat(Opcode.isRequest(Opcode.WRITE_COMMIT) && Opcode.isResponse(Opcode.WRITE_COMMIT_RESPONSE)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.LOCAL_CONNECT, 0)).isFalse();
        assertThat(FrameHeader.carriesPayload(Opcode.LOCAL_CONNECT_RESPONSE, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.LOCAL_CONNECT_RESPONSE, -1010)).isFalse();
        assertThat(Opcode.isRequest(Opcode.LOCAL_CONNECT) && Opcode.isResponse(Opcode.LOCAL_CONNECT_RESPONSE)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITEV, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITEV_RESPONSE, 0)).isTrue();
        assertThat(FrameHeader.carriesPayload(Opcode.WRITEV_RESPONSE, -600)).isFalse();
    }

    @Test
    void shouldKnowWritevAndItsResponse()
    {
        assertThat(Opcode.WRITEV).isEqualTo(0x11);
        assertThat(Opcode.WRITEV_RESPONSE).isEqualTo(0x91);
        assertThat(Opcode.isRequest(Opcode.WRITEV)).isTrue();
        assertThat(Opcode.isResponse(Opcode.WRITEV)).isFalse();
        assertThat(Opcode.isResponse(Opcode.WRITEV_RESPONSE)).isTrue();
        assertThat(Opcode.isRequest(Opcode.WRITEV_RESPONSE)).isFalse();
        assertThat(Opcode.name(Opcode.WRITEV)).isEqualTo("WRITEV");
        assertThat(Opcode.name(Opcode.WRITEV_RESPONSE)).isEqualTo("WRITEV_RESPONSE");
        final FrameHeader header = new FrameHeader();
        header.set(Opcode.WRITEV, 9, 0, 64 + 40, 64 + 40 + 100).flags = 1;
        buffer.clear();
        header.encode(buffer);
        final FrameHeader read = new FrameHeader();
        assertThat(read.decode(buffer, Integer.MAX_VALUE)).isEqualTo(FrameHeader.DECODE_OK);
        assertThat(read.opcode).isEqualTo(Opcode.WRITEV);
        assertThat(read.flags).isEqualTo(1);
        assertThat(read.offset).isEqualTo(104);
        assertThat(read.length).isEqualTo(204);
    }

    @Test
    void shouldDescribeDecodeErrors()
    {
        assertThat(FrameHeader.decodeErrorText(FrameHeader.DECODE_BAD_MAGIC)).contains("magic");
        assertThat(FrameHeader.decodeErrorText(FrameHeader.DECODE_BAD_VERSION)).contains("version");
        assertThat(FrameHeader.decodeErrorText(FrameHeader.DECODE_BAD_OPCODE)).contains("opcode");
        assertThat(FrameHeader.decodeErrorText(FrameHeader.DECODE_BAD_LENGTH)).contains("length");
    }

    private static int[] slice(final byte[] bytes, final int offset, final int length)
    {
        final int[] out = new int[length];
        for (int i = 0; i < length; i++)
        {
            out[i] = bytes[offset + i] & 0xFF;
        }
        return out;
    }
}
