package io.granary.node.transfer;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.util.internal.PlatformDependent;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;

import java.nio.ByteBuffer;

/**
 * Moves bytes between Netty buffers and raw segment memory with exactly one copy (or none). Stateless.
 */
final class MemoryCopier
{
    /** False when the JVM lacks the flags that let Netty wrap a raw address; READs then copy once. */
    static final boolean ZERO_COPY_READS = PlatformDependent.hasDirectBufferNoCleanerConstructor();

    private MemoryCopier()
    {
    }

    /** Copies {@code length} readable bytes of {@code src} at {@code index} to {@code address}. */
    static void copyToAddress(final ByteBuf src, final int index, final long address, final int length)
    {
        if (src.hasMemoryAddress())
        {
            UnsafeApi.copyMemory(src.memoryAddress() + index, address, length);
        }
        else if (src.hasArray())
        {
            UnsafeApi.copyMemory(
                src.array(), BufferUtil.ARRAY_BASE_OFFSET + src.arrayOffset() + index, null, address, length);
        }
        else
        {
            long dst = address;
            for (final ByteBuffer part : src.nioBuffers(index, length))
            {
                final int n = part.remaining();
                if (part.isDirect())
                {
                    UnsafeApi.copyMemory(BufferUtil.address(part) + part.position(), dst, n);
                }
                else
                {
                    final long srcOffset =
                        BufferUtil.ARRAY_BASE_OFFSET + BufferUtil.arrayOffset(part) + part.position();
                    UnsafeApi.copyMemory(BufferUtil.array(part), srcOffset, null, dst, n);
                }
                dst += n;
            }
        }
    }

    /** A buffer holding {@code length} bytes at {@code address}: a zero-copy view when possible. */
    static ByteBuf readView(final ByteBufAllocator alloc, final long address, final int length)
    {
        if (ZERO_COPY_READS)
        {
            return Unpooled.wrappedBuffer(address, length, false);
        }
        final ByteBuf copy = alloc.heapBuffer(length, length);
        UnsafeApi.copyMemory(null, address, copy.array(), BufferUtil.ARRAY_BASE_OFFSET + copy.arrayOffset(), length);
        copy.writerIndex(length);
        return copy;
    }
}
