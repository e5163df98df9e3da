package io.granary.protocol;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

/** The Java mirror of gt_qp_info: the layout of docs/protocol.md and the refusals of gt_qp_info_decode. */
class QpInfoTest
{
    private static byte[] gid()
    {
        final byte[] gid = new byte[16];
        for (int i = 0; i < gid.length; i++)
        {
            gid[i] = (byte)(0xF0 + i);
        }
        return gid;
    }

    /** The sample of the C test qp_info_round_trips_and_rejects_garbage. */
    private static QpInfo sample()
    {
        return new QpInfo(1, 5, 0x1234, 0xABCDEF, 0x123456, gid(), 0xDEADBEEF, 0x55AA55AA, 0x7F0000001000L,
            1L << 30);
    }

    @Test
    void shouldLayOutEveryFieldAsTheNativeEncoder()
    {
        final ByteBuffer bytes = ByteBuffer.wrap(sample().encode());
        assertThat(bytes.capacity()).isEqualTo(QpInfo.LENGTH);
        assertThat(bytes.getInt(0)).isEqualTo(0x47525150);
        assertThat(bytes.get(4)).isEqualTo((byte)1);
        assertThat(bytes.get(5)).isEqualTo((byte)1);
        assertThat(bytes.get(6)).isEqualTo((byte)5);
        assertThat(bytes.getShort(8)).isEqualTo((short)0x1234);
        assertThat(bytes.getInt(12)).isEqualTo(0xABCDEF);
        assertThat(bytes.getInt(16)).isEqualTo(0x123456);
        assertThat(Arrays.copyOfRange(bytes.array(), 20, 36)).isEqualTo(gid());
        assertThat(bytes.getInt(36)).isEqualTo(0xDEADBEEF);
        assertThat(bytes.getInt(40)).isEqualTo(0x55AA55AA);
        assertThat(bytes.getLong(44)).isEqualTo(0x7F0000001000L);
        assertThat(bytes.getLong(52)).isEqualTo(1L << 30);
        assertThat(bytes.getInt(60)).isZero();
    }

    @Test
    void shouldRoundTripEveryField()
    {
        final byte[] framed = new byte[QpInfo.LENGTH + 3];
        System.arraycopy(sample().encode(), 0, framed, 3, QpInfo.LENGTH);

        final QpInfo read = QpInfo.decode(framed, 3, QpInfo.LENGTH);

        assertThat(read).isNotNull();
        assertThat(read.port()).isEqualTo(1);
        assertThat(read.mtu()).isEqualTo(5);
        assertThat(read.lid()).isEqualTo(0x1234);
        assertThat(read.qpNum()).isEqualTo(0xABCDEF);
        assertThat(read.psn()).isEqualTo(0x123456);
        assertThat(read.gid()).isEqualTo(gid());
        assertThat(read.segmentId()).isEqualTo(0xDEADBEEF);
        assertThat(read.rkey()).isEqualTo(0x55AA55AA);
        assertThat(read.segmentAddress()).isEqualTo(0x7F0000001000L);
        assertThat(read.segmentLength()).isEqualTo(1L << 30);
    }

    @Test
    void shouldRefuseWhatTheNativeDecoderRefuses()
    {
        final byte[] good = sample().encode();
        assertThat(QpInfo.decode(good, 0, 63)).as("short").isNull();
        assertThat(QpInfo.decode(Arrays.copyOf(good, 65), 0, 65)).as("long").isNull();
        assertThat(QpInfo.decode(good, 1, QpInfo.LENGTH)).as("past the end").isNull();
        assertThat(QpInfo.decode(null, 0, QpInfo.LENGTH)).isNull();
        for (final int at : new int[] {0, 4, 7, 10, 11, 12, 60, 63})
        {
            final byte[] bad = good.clone();
            bad[at] ^= 1; // magic, version, reserved bytes, QP number above 24 bits
            assertThat(QpInfo.decode(bad, 0, QpInfo.LENGTH)).as("byte %d", at).isNull();
        }
        final byte[] bigPsn = good.clone();
        bigPsn[16] = 1;
        assertThat(QpInfo.decode(bigPsn, 0, QpInfo.LENGTH)).as("PSN above 24 bits").isNull();
        assertThat(QpInfo.decode(new QpInfo(1, 5, 0, 0, 1, new byte[16], 1, 0, 0, 0).encode(), 0, QpInfo.LENGTH))
            .as("QP number 0").isNull();
        for (final int mtu : new int[] {0, 6, 0xFF})
        {
            final byte[] badMtu = good.clone();
            badMtu[6] = (byte)mtu;
            assertThat(QpInfo.decode(badMtu, 0, QpInfo.LENGTH)).as("MTU %d", mtu).isNull();
        }
        final byte[] wraps = good.clone();
        ByteBuffer.wrap(wraps).putLong(44, -11L);
        assertThat(QpInfo.decode(wraps, 0, QpInfo.LENGTH)).as("the range wraps").isNull();
    }
}
