package io.granary.transfer.natives;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The JNI engine and server under a stream of mixed sizes (1 B .. 3 MiB, heap and direct buffers, batches in flight
 * together) for {@code -Dgranary.native.soak.seconds} (default 5): every byte verified, and afterwards no frame
 * outstanding and no memory region left registered in the C engine. The C soak under ASan/valgrind checks the
 * library's own allocations; this one the JNI binding's.
 */
class NativeTransferSoakTest
{
    private static final int SEGMENT_BYTES = 64 << 20;
    private static final int SLOT_BYTES = 4 << 20;
    private static final int[] SIZES = {1, 100, 4096, 5000, 65_536, 300_000, 1 << 20, (3 << 20) + 17};

    @BeforeAll
    static void requireTheLibrary()
    {
        assertThat(NativeTransfer.unavailabilityCause()).as("native transfer library").isNull();
    }

    /**
     * This process's resident set from /proc, with the JVM's committed heap and the direct buffers in use beside it
     * (for the log line: what is neither is the JVM's own and the native library's; the assertions are on the
     * engine's state).
     */
    private static String rss()
    {
        System.gc();
        String rss = "?";
        try
        {
            rss = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status")).stream()
                .filter(line -> line.startsWith("VmRSS:")).map(line -> line.substring(6).trim()).findFirst()
                .orElse("?");
        }
        catch (final java.io.IOException ex)
        {
            // leave "?"
        }
        final long heap = java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getCommitted();
        long direct = 0;
        for (final java.lang.management.BufferPoolMXBean pool :
            java.lang.management.ManagementFactory.getPlatformMXBeans(java.lang.management.BufferPoolMXBean.class))
        {
            direct += pool.getMemoryUsed();
        }
        return rss + " (heap committed " + (heap >> 20) + " MiB, buffers " + (direct >> 20) + " MiB" + jvmNative() + ")";
    }

    /** The JVM's own native memory (committed), when it runs with -XX:NativeMemoryTracking=summary. */
    private static String jvmNative()
    {
        try
        {
            final Object text = java.lang.management.ManagementFactory.getPlatformMBeanServer().invoke(
                new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"), "vmNativeMemory",
                new Object[] {new String[] {"summary"}}, new String[] {String[].class.getName()});
            return text.toString().lines().filter(line -> line.startsWith("Total:")).map(line -> ", JVM " + line)
                .findFirst().orElse("");
        }
        catch (final Exception ex)
        {
            return "";
        }
    }

    @Test
    void shouldMoveMixedSizesForAWhileWithoutLosingAByteOrARegion() throws Exception
    {
        final long seconds = Long.getLong("granary.native.soak.seconds", 5);
        final ByteBuffer segment = ByteBuffer.allocateDirect(SEGMENT_BYTES);
        final SplittableRandom random = new SplittableRandom(11);
        try (NativeTransferServer server = new NativeTransferServer("127.0.0.1", 0, 4 << 20, false,
            new NativeTransferServer.Handler()
            {
                @Override
                public int onWrite(final int segmentId, final long offset, final int length)
                {
                    return 0;
                }

                @Override
                public int onCommit(final byte[] header, final byte[] payload, final int failedWriteStatus,
                    final int tokenStatus)
                {
                    return 0;
                }

                @Override
                public void onClose(final String peer, final String reason)
                {
                }
            });
            NativeTransferEngine engine = new NativeTransferEngine(
                new TransferConfig().sliceBytes(512 << 10).localTransfers(false)))
        {
            server.segments(new int[] {1}, new long[] {PlatformDependent.directBufferAddress(segment)},
                new long[] {SEGMENT_BYTES});
            final String endpoint = "127.0.0.1:" + server.port();
            final int slots = SEGMENT_BYTES / SLOT_BYTES;
            // Buffers made once: what the process holds afterwards beyond them is the engine's and the binding's.
            final ByteBuffer[] directOut = new ByteBuffer[slots];
            final ByteBuffer[] directIn = new ByteBuffer[slots];
            for (int s = 0; s < slots; s++)
            {
                directOut[s] = ByteBuffer.allocateDirect(SLOT_BYTES);
                directIn[s] = ByteBuffer.allocateDirect(SLOT_BYTES);
            }
            final String rssAtStart = rss();
            final long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            long rounds = 0;
            long bytes = 0;
            while (System.nanoTime() < until)
            {
                final List<byte[]> values = new ArrayList<>();
                final List<CompletableFuture<Integer>> writes = new ArrayList<>();
                for (int s = 0; s < slots; s++)
                {
                    final byte[] value = new byte[SIZES[random.nextInt(SIZES.length)]];
                    random.nextBytes(value);
                    values.add(value);
                    final ByteBuffer from = s % 2 == 0 ? ByteBuffer.wrap(value) :
                        directOut[s].clear().put(value).flip();
                    writes.add(engine.submit(new TransferRequest(TransferRequest.Op.WRITE, endpoint, 1,
                        (long)s * SLOT_BYTES, from, value.length, null, s % 3 == 0 ? new byte[] {1, 2, 3} : null)));
                }
                for (final CompletableFuture<Integer> write : writes)
                {
                    assertThat(write.get(30, TimeUnit.SECONDS)).isZero();
                }
                final List<ByteBuffer> intos = new ArrayList<>();
                final List<CompletableFuture<Integer>> reads = new ArrayList<>();
                for (int s = 0; s < slots; s++)
                {
                    final int length = values.get(s).length;
                    final ByteBuffer into = s % 2 == 0 ? directIn[s].clear().limit(length) : ByteBuffer.allocate(length);
                    intos.add(into);
                    reads.add(engine.submit(TransferRequest.read(endpoint, 1, (long)s * SLOT_BYTES, into, length)));
                }
                for (int s = 0; s < slots; s++)
                {
                    assertThat(reads.get(s).get(30, TimeUnit.SECONDS)).isZero();
                    final byte[] back = new byte[values.get(s).length];
                    intos.get(s).get(0, back);
                    assertThat(back).isEqualTo(values.get(s));
                    bytes += 2L * back.length;
                }
                rounds++;
            }
            assertThat(rounds).isPositive();
            assertThat(engine.outstandingFrames(endpoint)).isZero();
            assertThat(engine.registeredRegions()).as("regions left registered").isZero();
            System.out.printf("native soak: %d rounds, %.1f MiB moved and verified in %d s, RSS %s at the start, " +
                "%s at the end%n", rounds, bytes / (double)(1 << 20), seconds, rssAtStart, rss());
        }
    }
}
