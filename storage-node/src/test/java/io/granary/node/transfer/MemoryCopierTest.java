package io.granary.node.transfer;

import io.granary.node.segment.Segment;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

class MemoryCopierTest
{
    private final Segment segment = new Segment(1, "copy", 1 << 20);

    @AfterEach
    void free()
    {
        segment.close();
    }

    private static byte[] pattern(final int length, final int seed)
    {
        final byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++)
        {
            bytes[i] = (byte)(i * 31 + seed);
        }
        return bytes;
    }

    private byte[] segmentBytes(final long offset, final int length)
    {
        final byte[] bytes = new byte[length];
        new UnsafeBuffer(segment.address() + offset, length).getBytes(0, bytes);
        return bytes;
    }

    private void assertCopies(final ByteBuf src, final byte[] content)
    {
        try
        {
            MemoryCopier.copyToAddress(src, src.readerIndex() + 3, segment.address() + 100, content.length - 3);
            final byte[] expected = Arrays.copyOfRange(content, 3, content.length);
            assertThat(segmentBytes(100, content.length - 3)).isEqualTo(expected);
        }
        finally
        {
            src.release();
        }
    }

    @Test
    void shouldCopyFromHeapBuffers()
    {
        final byte[] content = pattern(5000, 1);
        final ByteBuf heap = Unpooled.buffer(6000).writeZero(7).writeBytes(content);
        heap.readerIndex(7);
        assertThat(heap.hasArray()).isTrue();
        assertCopies(heap, content);
    }

    @Test
    void shouldCopyFromDirectBuffers()
    {
        final byte[] content = pattern(5000, 2);
        final ByteBuf direct = ByteBufAllocator.DEFAULT.directBuffer(6000).writeZero(5).writeBytes(content);
        direct.readerIndex(5);
        assertCopies(direct, content);
    }

    @Test
    void shouldCopyFromCompositeBuffersOfHeapAndDirectParts()
    {
        final byte[] content = pattern(3000, 3);
        final CompositeByteBuf composite = Unpooled.compositeBuffer();
        composite.addComponent(true, Unpooled.wrappedBuffer(content, 0, 1000));
        composite.addComponent(true, Unpooled.directBuffer(1000).writeBytes(content, 1000, 1000));
        composite.addComponent(true, Unpooled.wrappedBuffer(ByteBuffer.wrap(content, 2000, 1000)));
        assertThat(composite.hasArray()).isFalse();
        assertThat(composite.hasMemoryAddress()).isFalse();
        assertCopies(composite, content);
    }

    @Test
    void shouldExposeSegmentBytesForReads()
    {
        final byte[] content = pattern(4096, 4);
        new UnsafeBuffer(segment.address() + 8192, content.length).putBytes(0, content);
        final ByteBuf view = MemoryCopier.readView(ByteBufAllocator.DEFAULT, segment.address() + 8192, content.length);
        try
        {
            final byte[] read = new byte[content.length];
            view.getBytes(view.readerIndex(), read);
            assertThat(view.readableBytes()).isEqualTo(content.length);
            assertThat(read).isEqualTo(content);
            if (MemoryCopier.ZERO_COPY_READS)
            {
                assertThat(view.memoryAddress()).isEqualTo(segment.address() + 8192);
            }
        }
        finally
        {
            view.release();
        }
    }
}
