package io.granary.master.meta;

import io.granary.master.segment.MountedSegment;
import io.granary.protocol.FrameDescriptor;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * One copy of an object: an extent of a mounted segment. The version of the value it holds is its object's
 * ({@link ObjectMeta#version}: every replica of an object holds the same version), passed to {@link #release} so that
 * the node's ledger forgets that version; the record does not keep a copy of it (8 bytes less per replica).
 */
public final class ReplicaRecord
{
    private final MountedSegment segment;
    private final long offset;
    private final long length;
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    /**
     * The READ token last signed for this extent (none yet: all zero), its 20 bytes held in primitive fields and
     * overwritten when its expiry second changes; owner shard lock. The token's first four bytes are its expiry (uint32
     * epoch seconds, see {@link io.granary.protocol.AccessTokenCodec}), so {@link #readTokenExpirySec} needs no field
     * of its own (8 bytes less per object). Not an array: this record is long-lived, and storing a fresh array into it
     * at an object's first read made G1 refine a card per object read (a quarter of the CPU of a get phase reading each
     * key once).
     */
    private int readToken0;
    private long readToken4;
    private long readToken12;

    public ReplicaRecord(final MountedSegment segment, final long offset, final long length)
    {
        this.segment = segment;
        this.offset = offset;
        this.length = length;
    }

    /**
     * Keeps {@code token}, a READ token of {@link FrameDescriptor#ACCESS_TOKEN_LENGTH} bytes that starts with its
     * expiry {@code expirySec} (as every token does).
     */
    void readToken(final byte[] token, final long expirySec)
    {
        if (token.length != FrameDescriptor.ACCESS_TOKEN_LENGTH)
        {
            throw new IllegalStateException("a READ token has " + FrameDescriptor.ACCESS_TOKEN_LENGTH + " bytes, got " +
                token.length);
        }
        final int expiry = (int)INT.get(token, 0);
        if ((expiry & 0xFFFFFFFFL) != expirySec)
        {
            throw new IllegalStateException("a READ token starts with its expiry " + expirySec + ", got " +
                (expiry & 0xFFFFFFFFL));
        }
        readToken0 = expiry;
        readToken4 = (long)LONG.get(token, 4);
        readToken12 = (long)LONG.get(token, 12);
    }

    /** The expiry (epoch seconds) of the READ token kept here; 0 when none was kept yet. */
    long readTokenExpirySec()
    {
        return readToken0 & 0xFFFFFFFFL;
    }

    /** A new array holding the READ token last kept by {@link #readToken(byte[], long)}. */
    byte[] readToken()
    {
        final byte[] token = new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH];
        INT.set(token, 0, readToken0);
        LONG.set(token, 4, readToken4);
        LONG.set(token, 12, readToken12);
        return token;
    }

    public MountedSegment segment()
    {
        return segment;
    }

    public long offset()
    {
        return offset;
    }

    public long length()
    {
        return length;
    }

    /**
     * Gives the extent back to its segment's allocator and tells its node, so that the node's ledger forgets
     * the object (ignored if the segment is gone).
     *
     * @param version the version of the object this replica held ({@link ObjectMeta#version}), or 0 when none was
     *     issued yet (a placement given back within its PutStart): then there is nothing for the node to forget.
     */
    public void release(final long version)
    {
        segment.free(offset, version);
    }
}
