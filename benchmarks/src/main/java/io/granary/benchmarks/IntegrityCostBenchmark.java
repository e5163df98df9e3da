package io.granary.benchmarks;

import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.Opcode;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * The per-value costs of end-to-end integrity and access control on one thread: the CRC32C a client computes at put
 * and checks at get (heap and direct buffers, as {@code java.util.zip.CRC32C} with its intrinsic), and the HMAC a
 * master signs per replica and a node verifies per frame.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g", "-Dlogback.configurationFile=logback-bench.xml"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class IntegrityCostBenchmark
{
    @Param({"4096", "1048576"})
    public int size;

    private byte[] heap;
    private ByteBuffer direct;
    private AccessTokenCodec codec;
    private final byte[] token = new byte[FrameDescriptor.ACCESS_TOKEN_LENGTH];
    private byte[] mac;
    private long offset;

    @Setup
    public void setUp()
    {
        heap = new byte[size];
        new SplittableRandom(7).nextBytes(heap);
        direct = ByteBuffer.allocateDirect(size);
        direct.put(heap).flip();
        codec = new AccessTokenCodec(AccessTokenCodec.deriveNodeKey(AccessTokenCodec.newRandomKey(), "node-1"));
        codec.sign(Opcode.READ, 7, 1L << 30, size, 1_900_000_000L, token, 0);
        mac = Arrays.copyOfRange(token, 4, FrameDescriptor.ACCESS_TOKEN_LENGTH);
    }

    @Benchmark
    public long crc32cHeap()
    {
        final CRC32C crc = new CRC32C();
        crc.update(heap, 0, heap.length);
        return crc.getValue();
    }

    @Benchmark
    public long crc32cDirect()
    {
        final CRC32C crc = new CRC32C();
        crc.update(direct.duplicate());
        return crc.getValue();
    }

    /** What the master pays per replica on a token-cache miss (the client's engine pays nothing). */
    @Benchmark
    public byte[] signToken()
    {
        offset += 4096;
        codec.sign(Opcode.READ, 7, offset, size, 1_900_000_000L, token, 0);
        return token;
    }

    /** What a node pays per READ or WRITE frame. */
    @Benchmark
    public boolean verifyToken()
    {
        return codec.verify(Opcode.READ, 7, 1L << 30, size, 1_900_000_000L, mac);
    }
}
