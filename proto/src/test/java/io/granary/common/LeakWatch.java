package io.granary.common;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.ResourceLeakDetector;

import java.lang.reflect.Field;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Counts the ByteBuf leaks Netty's leak detector reports (tests run it at paranoid level), so a test can fail on a
 * leak instead of only logging it. {@link #collect()} runs the GC and allocates, which is when Netty reports.
 */
public final class LeakWatch
{
    private static final AtomicInteger LEAKS = new AtomicInteger();
    private static volatile boolean installed;

    private LeakWatch()
    {
    }

    /** Hooks the ByteBuf leak detector (once per JVM); returns the leaks counted so far. */
    @SuppressWarnings("unchecked")
    public static synchronized int install()
    {
        if (!installed)
        {
            try
            {
                final Field field = Class.forName("io.netty.buffer.AbstractByteBuf").getDeclaredField("leakDetector");
                field.setAccessible(true);
                final ResourceLeakDetector<ByteBuf> detector = (ResourceLeakDetector<ByteBuf>)field.get(null);
                detector.setLeakListener((resourceType, records) -> LEAKS.incrementAndGet());
                installed = true;
            }
            catch (final ReflectiveOperationException ex)
            {
                throw new IllegalStateException("cannot hook Netty's ByteBuf leak detector", ex);
            }
        }
        return LEAKS.get();
    }

    /** Collects garbage and allocates tracked buffers a few times so that pending leak reports come out. */
    public static int collect()
    {
        for (int round = 0; round < 5; round++)
        {
            System.gc();
            for (int i = 0; i < 200; i++)
            {
                ByteBufAllocator.DEFAULT.directBuffer(64).release();
                ByteBufAllocator.DEFAULT.heapBuffer(64).release();
            }
            Thread.onSpinWait();
        }
        return LEAKS.get();
    }
}
