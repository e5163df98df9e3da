package io.granary.protocol;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * The 64-byte queue-pair information record of an RDMA_CONNECT frame and its answer (docs/protocol.md, "RDMA:
 * queue-pair information"), the Java mirror of {@code gt_qp_info} in the native library's gt_rdma.h: what one side
 * of a reliable-connected queue pair tells the other. Big-endian. {@link #decode} refuses exactly what
 * {@code gt_qp_info_decode} refuses. Immutable.
 */
public final class QpInfo
{
    public static final int LENGTH = 64;
    /** "GRQP" in ASCII. */
    public static final int MAGIC = 0x47525150;
    public static final int VERSION = 1;
    /** The MTU is an {@code enum ibv_mtu}: 1 (256 bytes) to 5 (4096 bytes). */
    public static final int MIN_MTU = 1;
    public static final int MAX_MTU = 5;
    private static final int MAX_24_BITS = 0xFF_FFFF;
    private static final int GID_LENGTH = 16;

    private final int port;
    private final int mtu;
    private final int lid;
    private final int qpNum;
    private final int psn;
    private final byte[] gid;
    private final int segmentId;
    private final int rkey;
    private final long segmentAddress;
    private final long segmentLength;

    public QpInfo(
        final int port,
        final int mtu,
        final int lid,
        final int qpNum,
        final int psn,
        final byte[] gid,
        final int segmentId,
        final int rkey,
        final long segmentAddress,
        final long segmentLength)
    {
        if (gid.length != GID_LENGTH)
        {
            throw new IllegalArgumentException("a GID is 16 bytes, was " + gid.length);
        }
        this.port = port & 0xFF;
        this.mtu = mtu & 0xFF;
        this.lid = lid & 0xFFFF;
        this.qpNum = qpNum;
        this.psn = psn;
        this.gid = gid.clone();
        this.segmentId = segmentId;
        this.rkey = rkey;
        this.segmentAddress = segmentAddress;
        this.segmentLength = segmentLength;
    }

    /** A client's record asking for {@code segmentId} (no remote key, address or length). */
    public static QpInfo client(final int port, final int mtu, final int lid, final int qpNum, final int psn,
        final byte[] gid, final int segmentId)
    {
        return new QpInfo(port, mtu, lid, qpNum, psn, gid, segmentId, 0, 0, 0);
    }

    /** The 64 bytes of the record; the QP number and PSN keep their low 24 bits. */
    public byte[] encode()
    {
        final ByteBuffer out = ByteBuffer.allocate(LENGTH);
        out.putInt(MAGIC).put((byte)VERSION).put((byte)port).put((byte)mtu).put((byte)0);
        out.putShort((short)lid).putShort((short)0);
        out.putInt(qpNum & MAX_24_BITS).putInt(psn & MAX_24_BITS);
        out.put(gid);
        out.putInt(segmentId).putInt(rkey).putLong(segmentAddress).putLong(segmentLength).putInt(0);
        return out.array();
    }

    /**
     * The record in {@code bytes[offset..offset + length)}, or null when it is not exactly {@value #LENGTH} bytes or
     * is refused: another magic or version, nonzero reserved bytes, a QP number or PSN above 24 bits, a zero QP
     * number, an MTU outside 1..5, or an address range that wraps (unsigned).
     */
    public static QpInfo decode(final byte[] bytes, final int offset, final int length)
    {
        if (bytes == null || length != LENGTH || offset < 0 || bytes.length - offset < LENGTH)
        {
            return null;
        }
        final ByteBuffer in = ByteBuffer.wrap(bytes, offset, LENGTH).slice();
        if (in.getInt(0) != MAGIC || in.get(4) != VERSION || in.get(7) != 0 || in.getShort(10) != 0 ||
            in.getInt(60) != 0)
        {
            return null;
        }
        final int qpNum = in.getInt(12);
        final int psn = in.getInt(16);
        final int mtu = in.get(6);
        if (qpNum == 0 || Integer.compareUnsigned(qpNum, MAX_24_BITS) > 0 ||
            Integer.compareUnsigned(psn, MAX_24_BITS) > 0 || mtu < MIN_MTU || mtu > MAX_MTU)
        {
            return null;
        }
        final long address = in.getLong(44);
        final long size = in.getLong(52);
        if (Long.compareUnsigned(address + size, address) < 0)
        {
            return null;
        }
        final byte[] gid = new byte[GID_LENGTH];
        in.get(20, gid);
        return new QpInfo(in.get(5), in.get(6), in.getShort(8), qpNum, psn, gid, in.getInt(36), in.getInt(40), address,
            size);
    }

    public int port()
    {
        return port;
    }

    public int mtu()
    {
        return mtu;
    }

    public int lid()
    {
        return lid;
    }

    public int qpNum()
    {
        return qpNum;
    }

    public int psn()
    {
        return psn;
    }

    public byte[] gid()
    {
        return gid.clone();
    }

    /** Node side: the segment the queue pair reaches; client side: the segment it asks for. */
    public int segmentId()
    {
        return segmentId;
    }

    public int rkey()
    {
        return rkey;
    }

    public long segmentAddress()
    {
        return segmentAddress;
    }

    public long segmentLength()
    {
        return segmentLength;
    }

    @Override
    public String toString()
    {
        return "QpInfo{qp=" + qpNum + ", psn=" + psn + ", port=" + port + ", lid=" + lid + ", segment=" +
            Integer.toUnsignedString(segmentId) + ", gid=" + Arrays.toString(gid) + "}";
    }
}
