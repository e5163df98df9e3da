package io.granary.benchmarks;

import io.granary.node.segment.Segment;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.internal.PlatformDependent;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Copying a value into and out of a storage-node {@link Segment}: through the node's own copy path
 * ({@code io.granary.node.transfer.MemoryCopier}, from the Netty buffer a WRITE payload arrives in; its read view, as
 * a READ sends it) next to {@code ByteBuffer.put} between direct buffers, {@code Unsafe.copyMemory} and Agrona's
 * {@code UnsafeBuffer}. The segment side walks through 256 MiB (far beyond the 32 MiB L3 here), so every copy meets
 * cold segment memory as a real put or get does; the source/destination buffer on the other side stays hot. Reports
 * time per copy; bytes/s is size / time. One thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlogback.configurationFile=logback-bench.xml"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class SegmentCopyBenchmark
{
    private static final long SEGMENT_BYTES = 256L << 20;

    // MemoryCopier is package-private in the storage node; reach it by reflection (a constant handle, inlined by
    // the JIT) instead of putting a class into the node's package.
    private static final MethodHandle COPY_TO_ADDRESS;
    private static final MethodHandle READ_VIEW;

    static
    {
        try
        {
            final Class<?> copier = Class.forName("io.granary.node.transfer.MemoryCopier");
            final Method copyToAddress =
                copier.getDeclaredMethod("copyToAddress", ByteBuf.class, int.class, long.class, int.class);
            final Method readView = copier.getDeclaredMethod("readView", ByteBufAllocator.class, long.class, int.class);
            copyToAddress.setAccessible(true);
            readView.setAccessible(true);
            COPY_TO_ADDRESS = MethodHandles.lookup().unreflect(copyToAddress);
            READ_VIEW = MethodHandles.lookup().unreflect(readView);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new ExceptionInInitializerError(ex);
        }
    }

    @Param({"4096", "65536", "1048576"})
    public int size;

    private Segment segment;
    private long slots;
    private long slot;
    private ByteBuf payload;       // a WRITE payload as Netty delivers it: a pooled direct buffer
    private ByteBuf readTarget;    // where a client decodes a READ payload into
    private ByteBuffer directValue; // the caller's value in a direct ByteBuffer
    private ByteBuffer segmentView; // the whole segment as a ByteBuffer (no cleaner: the segment owns the memory)
    private UnsafeBuffer segmentBuffer;
    private UnsafeBuffer valueBuffer;

    @Setup(Level.Trial)
    public void setUp()
    {
        segment = new Segment(1, "bench/seg0", SEGMENT_BYTES);
        segment.preTouch();
        slots = SEGMENT_BYTES / size;
        final byte[] random = new byte[size];
        new SplittableRandom(42).nextBytes(random);
        payload = PooledByteBufAllocator.DEFAULT.directBuffer(size, size).writeBytes(random);
        readTarget = PooledByteBufAllocator.DEFAULT.directBuffer(size, size);
        directValue = ByteBuffer.allocateDirect(size).put(random).flip();
        segmentView = PlatformDependent.directBuffer(segment.address(), (int)SEGMENT_BYTES);
        segmentBuffer = new UnsafeBuffer(segment.address(), (int)SEGMENT_BYTES);
        valueBuffer = new UnsafeBuffer(directValue);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        payload.release();
        readTarget.release();
        segment.close();
    }

    /** The next value-sized slot of the segment (walks the whole 256 MiB). */
    private long nextOffset()
    {
        final long s = slot;
        slot = s + 1 == slots ? 0 : s + 1;
        return s * size;
    }

    /** A WRITE's payload into the segment, as the node's FrameHandler copies it. */
    @Benchmark
    public long intoSegmentViaMemoryCopier() throws Throwable
    {
        final long offset = nextOffset();
        COPY_TO_ADDRESS.invokeExact(payload, payload.readerIndex(), segment.address() + offset, size);
        return offset;
    }

    /** A READ's payload out of the segment: the node's read view, then the client-side copy into its target. */
    @Benchmark
    public int outOfSegmentViaReadView() throws Throwable
    {
        final long offset = nextOffset();
        final ByteBuf view = (ByteBuf)READ_VIEW.invokeExact(
            (ByteBufAllocator)PooledByteBufAllocator.DEFAULT, segment.address() + offset, size);
        try
        {
            readTarget.clear().writeBytes(view);
            return readTarget.writerIndex();
        }
        finally
        {
            view.release();
        }
    }

    @Benchmark
    public int intoSegmentByteBufferPut()
    {
        final int offset = (int)nextOffset();
        segmentView.clear().position(offset);
        segmentView.put(directValue.duplicate().clear());
        return segmentView.position();
    }

    @Benchmark
    public int outOfSegmentByteBufferPut()
    {
        final int offset = (int)nextOffset();
        final ByteBuffer target = directValue;
        target.clear();
        target.put(segmentView.duplicate().limit(offset + size).position(offset));
        return target.position();
    }

    @Benchmark
    public long intoSegmentUnsafeCopyMemory()
    {
        final long offset = nextOffset();
        UnsafeApi.copyMemory(BufferUtil.address(directValue), segment.address() + offset, size);
        return offset;
    }

    @Benchmark
    public long outOfSegmentUnsafeCopyMemory()
    {
        final long offset = nextOffset();
        UnsafeApi.copyMemory(segment.address() + offset, BufferUtil.address(directValue), size);
        return offset;
    }

    @Benchmark
    public long intoSegmentAgronaUnsafeBuffer()
    {
        final long offset = nextOffset();
        segmentBuffer.putBytes((int)offset, valueBuffer, 0, size);
        return offset;
    }

    @Benchmark
    public long outOfSegmentAgronaUnsafeBuffer()
    {
        final long offset = nextOffset();
        segmentBuffer.getBytes((int)offset, valueBuffer, 0, size);
        return offset;
    }
}
