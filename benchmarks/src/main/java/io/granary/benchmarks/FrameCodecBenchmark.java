package io.granary.benchmarks;

import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.FrameHeader;
import io.granary.protocol.Opcode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
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

import java.util.concurrent.TimeUnit;

/**
 * The 64-byte data-plane frame header: encode into and decode out of pooled and unpooled, direct and heap ByteBufs,
 * and the per-response cost the storage node pays today (allocate a 64-byte buffer, encode, release). One thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlogback.configurationFile=logback-bench.xml"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class FrameCodecBenchmark
{
    /** Where the header bytes live. */
    public enum BufferKind
    {
        POOLED_DIRECT, UNPOOLED_DIRECT, POOLED_HEAP, UNPOOLED_HEAP
    }

    @Param
    public BufferKind buffer;

    private ByteBufAllocator allocator;
    private ByteBuf frame;
    private final FrameHeader header = new FrameHeader();
    private final FrameHeader decoded = new FrameHeader();
    private long requestId;

    @Setup(Level.Trial)
    public void setUp()
    {
        final boolean pooled = buffer == BufferKind.POOLED_DIRECT || buffer == BufferKind.POOLED_HEAP;
        allocator = pooled ? PooledByteBufAllocator.DEFAULT : UnpooledByteBufAllocator.DEFAULT;
        frame = allocate();
        header.set(Opcode.WRITE, 1, 0x1234_5678, 1L << 32, 1 << 20);
        header.grantLength = 1 << 20;
        header.tokenExpirySec = System.currentTimeMillis() / 1000;
        header.encode(frame);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        frame.release();
    }

    private ByteBuf allocate()
    {
        final boolean direct = buffer == BufferKind.POOLED_DIRECT || buffer == BufferKind.UNPOOLED_DIRECT;
        return direct ? allocator.directBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH) :
            allocator.heapBuffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
    }

    /** A request header written into a reused buffer (the client's lane does this per frame). */
    @Benchmark
    public int encode()
    {
        header.requestId = ++requestId;
        frame.clear();
        header.encode(frame);
        return frame.writerIndex();
    }

    /** A header read and validated from a buffer (the node's and the client's decoders do this per frame). */
    @Benchmark
    public long decode()
    {
        frame.readerIndex(0);
        final int result = decoded.decode(frame, FrameDescriptor.MAX_FRAME_LENGTH_LIMIT);
        return result + decoded.length;
    }

    /** What the node pays per response today: a fresh 64-byte buffer from the allocator, encoded, then released. */
    @Benchmark
    public int allocateEncodeRelease()
    {
        final ByteBuf response = allocate();
        try
        {
            FrameHeader.encode(response, Opcode.WRITE_RESPONSE, 0, ++requestId, 0x1234_5678, 0, 1L << 32, 1 << 20, 0,
                null);
            return response.writerIndex();
        }
        finally
        {
            response.release();
        }
    }
}
