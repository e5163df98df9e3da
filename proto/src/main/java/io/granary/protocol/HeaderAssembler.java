package io.granary.protocol;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * Reassembles transfer-frame headers that arrive split across socket reads, for the Netty codecs
 * on both ends of the data plane. One per connection; not thread safe; {@link #release()} it when
 * the connection's handler is removed.
 */
public final class HeaderAssembler
{
    /** {@link #decodeNext} consumed everything readable and still lacks part of a header. */
    public static final int NEED_MORE = 1;

    private final ByteBuf partial;

    public HeaderAssembler(final ByteBufAllocator allocator)
    {
        partial = allocator.heapBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
    }

    /**
     * Decodes the next header from {@code in} into {@code header}, keeping a partial one for the next read.
     *
     * @return {@link #NEED_MORE}, or the result of {@link FrameHeader#decode} (DECODE_OK or a negative error).
     */
    public int decodeNext(final ByteBuf in, final FrameHeader header, final int maxFrameLength)
    {
        final ByteBuf source;
        if (partial.isReadable() || in.readableBytes() < FrameDescriptor.HEADER_LENGTH)
        {
            partial.writeBytes(in, Math.min(partial.writableBytes(), in.readableBytes()));
            if (partial.isWritable())
            {
                return NEED_MORE;
            }
            source = partial;
        }
        else
        {
            source = in;
        }
        final int result = header.decode(source, maxFrameLength);
        partial.clear();
        return result;
    }

    public void release()
    {
        partial.release();
    }
}
