package io.granary.cli;

import io.granary.common.Units;

import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The "loopback limit" of a benchmark shape: how fast plain blocking java.nio sockets move the same values between
 * threads of this process over 127.0.0.1, with nothing of Granary in the way. C client threads each own one
 * connection to their own server thread (TCP_NODELAY, 4 MiB socket buffers like the data plane) and run round trips
 * in the shape of a Granary operation, {@code batch} requests pipelined per round trip. Each call of
 * {@link #measure} starts and joins its own threads; the class holds no state.
 *
 * <p>By default the server side sends (get) or receives (put) every value from or into one small buffer, which stays in
 * the CPU's caches: the most a socket moves. Given a {@code coldRegion}, the server side takes every value from, or
 * lands it at, the next place of that region instead (each server thread starting at its own part of it), as a
 * storage node does with its segment: when the region is much larger than the caches, every value crosses main memory
 * once more, which is what a store of many distinct values pays and a hot buffer does not.
 */
public final class LoopbackBaseline
{
    /** Bytes of a request of the get shape and of an ack of the put shape: a data-plane frame header. */
    public static final int HEADER_BYTES = 64;
    /** SO_SNDBUF and SO_RCVBUF of both ends, as the storage node's transfer server asks for. */
    public static final int SOCKET_BUFFER_BYTES = 4 << 20;
    /** Largest receive buffer a reader fills per read call (a batch larger than this is read in parts). */
    static final int MAX_RECEIVE_BYTES = 4 << 20;
    /** Largest batch: the acks of one put round trip must fit the client's receive buffer, which is not read yet. */
    public static final int MAX_BATCH = 16_384;

    private static final long JOIN_TIMEOUT_MS = 30_000;

    /** The traffic of one round trip. */
    public enum Shape
    {
        /** batch x 64-byte requests, answered by batch x value-size responses (a get). */
        GET("get"),
        /** batch x value-size requests, answered by batch x 64-byte acks (a put). */
        PUT("put"),
        /** One way: the client writes batch values per "round trip" and never waits for an answer (iperf-like). */
        STREAM("stream");

        private final String label;

        Shape(final String label)
        {
            this.label = label;
        }

        public String label()
        {
            return label;
        }
    }

    private LoopbackBaseline()
    {
    }

    /**
     * Runs {@code shape} with {@code concurrency} connections for {@code warmup} (unmeasured), then for
     * {@code duration}, and returns what moved in the measured part. Counts a round trip when it started inside
     * the measured part; the elapsed time runs from the start of the measured part to the end of the last counted
     * round trip. With a {@code coldRegion} (a direct buffer of at least one value; null: one hot buffer) the server's
     * side of every value is at the next place of it; its content is read (get) or overwritten (put), and several
     * runs may share it.
     *
     * @throws IllegalArgumentException for a value size, concurrency or batch out of range, or a cold region that is
     *                                  not direct or smaller than one value.
     * @throws UncheckedIOException     when a socket fails.
     */
    public static Result measure(
        final Shape shape,
        final int valueBytes,
        final int concurrency,
        final int batch,
        final Duration warmup,
        final Duration duration,
        final ByteBuffer coldRegion)
    {
        Objects.requireNonNull(shape, "shape");
        if (coldRegion != null && (!coldRegion.isDirect() || coldRegion.capacity() < valueBytes))
        {
            throw new IllegalArgumentException("the cold region must be a direct buffer of at least one value (" +
                valueBytes + " bytes), was " + (coldRegion.isDirect() ? coldRegion.capacity() + " bytes" : "a heap buffer"));
        }
        if (valueBytes < 1)
        {
            throw new IllegalArgumentException("valueBytes must be positive, was " + valueBytes);
        }
        if (concurrency < 1 || concurrency > 1024)
        {
            throw new IllegalArgumentException("concurrency must be in 1..1024, was " + concurrency);
        }
        if (batch < 1 || batch > MAX_BATCH)
        {
            throw new IllegalArgumentException("batch must be in 1.." + MAX_BATCH + ", was " + batch);
        }
        if (duration.isNegative() || duration.isZero() || warmup.isNegative())
        {
            throw new IllegalArgumentException("duration must be positive and warmup not negative");
        }
        try
        {
            return new Run(shape, valueBytes, concurrency, batch, coldRegion)
                .execute(warmup.toNanos(), duration.toNanos());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("loopback baseline (" + shape.label() + ", " + valueBytes + " bytes): " +
                ex.getMessage(), ex);
        }
    }

    /** What one measurement moved; byte counts are value bytes only (no 64-byte requests or acks). */
    public record Result(
        Shape shape,
        boolean cold,
        int valueBytes,
        int concurrency,
        int batch,
        long roundTrips,
        long values,
        long elapsedNs,
        double p50Ms,
        double p99Ms,
        double p999Ms,
        double maxMs)
    {
        public double seconds()
        {
            return elapsedNs / 1e9;
        }

        public double valuesPerSecond()
        {
            return elapsedNs == 0 ? 0 : values / seconds();
        }

        /** Value bytes per second in GB/s (1e9 bytes/s). */
        public double gbPerSecond()
        {
            return elapsedNs == 0 ? 0 : values * (double)valueBytes / elapsedNs;
        }

        /**
         * "get 1.00 MiB c=1 batch=1: 1.234 GB/s, 1176.0 values/s, round trip p50 0.812 ms p99 1.020 ms" ("cold get ..."
         * for a run with a cold region).
         */
        public String describe()
        {
            return String.format(Locale.ROOT, "%s%s %s c=%d batch=%d: %.3f GB/s, %.1f values/s, round trip p50 %.3f ms "
                    + "p99 %.3f ms (%d round trips in %.2f s)", cold ? "cold " : "", shape.label(),
                Units.formatBytes(valueBytes),
                concurrency, batch, gbPerSecond(), valuesPerSecond(), p50Ms, p99Ms, roundTrips, seconds());
        }
    }

    /** One measurement: its sockets, threads and counters. */
    private static final class Run
    {
        private final Shape shape;
        private final int valueBytes;
        private final int concurrency;
        private final int batch;
        private final ByteBuffer value;
        /** The server side's values (cold runs), or null. */
        private final ByteBuffer coldRegion;
        private final List<SocketChannel> channels = new ArrayList<>();
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private volatile boolean stopping;

        Run(final Shape shape, final int valueBytes, final int concurrency, final int batch, final ByteBuffer coldRegion)
        {
            this.shape = shape;
            this.coldRegion = coldRegion;
            this.valueBytes = valueBytes;
            this.concurrency = concurrency;
            this.batch = batch;
            final byte[] random = new byte[valueBytes];
            new SplittableRandom(7).nextBytes(random);
            this.value = ByteBuffer.allocateDirect(valueBytes).put(random).flip();
        }

        Result execute(final long warmupNs, final long durationNs) throws IOException
        {
            final Thread[] servers = new Thread[concurrency];
            final Client[] clients = new Client[concurrency];
            final Thread[] clientThreads = new Thread[concurrency];
            final CountDownLatch start = new CountDownLatch(1);
            try (ServerSocketChannel listener = ServerSocketChannel.open())
            {
                listener.setOption(StandardSocketOptions.SO_RCVBUF, SOCKET_BUFFER_BYTES);
                listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), concurrency);
                for (int i = 0; i < concurrency; i++)
                {
                    final SocketChannel client = SocketChannel.open();
                    configure(client);
                    client.connect(listener.getLocalAddress());
                    final SocketChannel server = listener.accept();
                    configure(server);
                    channels.add(client);
                    channels.add(server);
                    final long startAt = coldRegion == null ? 0 : placeOf(i);
                    servers[i] = thread("server-" + i, () -> serve(server, startAt));
                    clients[i] = new Client(client);
                    final Client c = clients[i];
                    clientThreads[i] = thread("client-" + i, () -> c.run(start));
                }
                final long now = System.nanoTime();
                final long measureStartNs = now + warmupNs;
                final long measureEndNs = measureStartNs + durationNs;
                for (final Client client : clients)
                {
                    client.measureStartNs = measureStartNs;
                    client.measureEndNs = measureEndNs;
                }
                for (int i = 0; i < concurrency; i++)
                {
                    servers[i].start();
                    clientThreads[i].start();
                }
                start.countDown();
                for (final Thread thread : clientThreads)
                {
                    join(thread);
                }
                stopping = true;
                for (final SocketChannel channel : channels)
                {
                    closeQuietly(channel);
                }
                for (final Thread thread : servers)
                {
                    join(thread);
                }
                final Throwable failed = failure.get();
                if (failed instanceof IOException)
                {
                    throw (IOException)failed;
                }
                if (failed != null)
                {
                    throw new IllegalStateException("loopback baseline failed: " + failed, failed);
                }
                return result(clients, measureStartNs);
            }
            finally
            {
                stopping = true;
                for (final SocketChannel channel : channels)
                {
                    closeQuietly(channel);
                }
            }
        }

        private Result result(final Client[] clients, final long measureStartNs)
        {
            final LatencyRecorder latency = new LatencyRecorder();
            long roundTrips = 0;
            long lastEndNs = measureStartNs;
            for (final Client client : clients)
            {
                latency.add(client.latency);
                roundTrips += client.roundTrips;
                lastEndNs = Math.max(lastEndNs, client.lastEndNs);
            }
            return new Result(shape, coldRegion != null, valueBytes, concurrency, batch, roundTrips, roundTrips * batch,
                lastEndNs - measureStartNs, latency.percentileMs(50), latency.percentileMs(99),
                latency.percentileMs(99.9), latency.maxMs());
        }

        private static void configure(final SocketChannel channel) throws IOException
        {
            channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            channel.setOption(StandardSocketOptions.SO_SNDBUF, SOCKET_BUFFER_BYTES);
            channel.setOption(StandardSocketOptions.SO_RCVBUF, SOCKET_BUFFER_BYTES);
        }

        private Thread thread(final String name, final IoTask task)
        {
            final Thread thread = new Thread(() ->
            {
                try
                {
                    task.run();
                }
                catch (final IOException | RuntimeException ex)
                {
                    // A closed socket after the stop is the normal way out of a blocked read.
                    if (!stopping && failure.compareAndSet(null, ex))
                    {
                        stopping = true;
                        channels.forEach(Run::closeQuietly);
                    }
                }
            }, "granary-loopback-" + shape.label() + "-" + name);
            thread.setDaemon(true);
            return thread;
        }

        /** {@code length} bytes of the cold region from {@code at}, as a buffer of its own. */
        private ByteBuffer coldWindow(final long at, final int length)
        {
            return coldRegion.duplicate().limit((int)at + length).position((int)at);
        }

        /** Where server {@code i} starts in the cold region: at its share of it, on a value boundary. */
        private long placeOf(final int i)
        {
            final long values = coldRegion.capacity() / valueBytes;
            return values * i / concurrency * valueBytes;
        }

        /**
         * The server side: answers whatever complete requests each read brought, with one gathering write. In a cold
         * run the values it sends (get) come from, and the bytes it reads (put) land at, the next place of the cold
         * region from {@code startAt} on, wrapping at its end.
         */
        private void serve(final SocketChannel channel, final long startAt) throws IOException
        {
            final boolean landsCold = coldRegion != null && shape != Shape.GET;
            long place = startAt;
            final ByteBuffer[] responses = new ByteBuffer[Math.min(batch, 1024)];
            final ByteBuffer ack = ByteBuffer.allocateDirect(HEADER_BYTES);
            final int requestBytes = shape == Shape.GET ? HEADER_BYTES : valueBytes;
            final ByteBuffer in = ByteBuffer.allocateDirect(
                (int)Math.min(MAX_RECEIVE_BYTES, Math.max((long)requestBytes * batch, HEADER_BYTES)));
            long partial = 0; // bytes of the request now arriving
            while (true)
            {
                final ByteBuffer into;
                if (landsCold)
                {
                    if (coldRegion.capacity() - place < HEADER_BYTES)
                    {
                        place = 0;
                    }
                    into = coldWindow(place, (int)Math.min(in.capacity(), coldRegion.capacity() - place));
                }
                else
                {
                    into = in.clear();
                }
                final int read = channel.read(into);
                if (read < 0)
                {
                    return;
                }
                if (landsCold)
                {
                    place += read;
                }
                if (shape == Shape.STREAM)
                {
                    continue;
                }
                partial += read;
                final long complete = partial / requestBytes;
                partial -= complete * requestBytes;
                long left = complete;
                while (left > 0)
                {
                    final int n = (int)Math.min(left, responses.length);
                    for (int i = 0; i < n; i++)
                    {
                        if (shape != Shape.GET)
                        {
                            responses[i] = ack.duplicate().clear();
                        }
                        else if (coldRegion == null)
                        {
                            responses[i] = value.duplicate();
                        }
                        else
                        {
                            if (coldRegion.capacity() - place < valueBytes)
                            {
                                place = 0;
                            }
                            responses[i] = coldWindow(place, valueBytes);
                            place += valueBytes;
                        }
                    }
                    writeFully(channel, responses, n);
                    left -= n;
                }
            }
        }

        /** A client thread: round trips until the end of the measured part. */
        private final class Client
        {
            private final SocketChannel channel;
            private final LatencyRecorder latency = new LatencyRecorder();
            private long measureStartNs;
            private long measureEndNs;
            private long roundTrips;
            private long lastEndNs;

            Client(final SocketChannel channel)
            {
                this.channel = channel;
            }

            void run(final CountDownLatch start) throws IOException
            {
                awaitQuietly(start);
                final ByteBuffer[] requests = new ByteBuffer[Math.min(batch, 1024)];
                final ByteBuffer header = ByteBuffer.allocateDirect(HEADER_BYTES);
                final long responseBytes = shape == Shape.GET ? (long)valueBytes * batch :
                    shape == Shape.PUT ? (long)HEADER_BYTES * batch : 0;
                final ByteBuffer in = ByteBuffer.allocateDirect((int)Math.max(HEADER_BYTES,
                    Math.min(MAX_RECEIVE_BYTES, responseBytes)));
                while (true)
                {
                    final long t0 = System.nanoTime();
                    if (t0 - measureEndNs >= 0 || stopping)
                    {
                        return;
                    }
                    int left = batch;
                    while (left > 0)
                    {
                        final int n = Math.min(left, requests.length);
                        for (int i = 0; i < n; i++)
                        {
                            requests[i] = shape == Shape.GET ? header.duplicate().clear() : value.duplicate();
                        }
                        writeFully(channel, requests, n);
                        left -= n;
                    }
                    readFully(channel, in, responseBytes);
                    final long t1 = System.nanoTime();
                    if (t0 - measureStartNs >= 0)
                    {
                        latency.record(t1 - t0);
                        roundTrips++;
                        lastEndNs = t1;
                    }
                }
            }
        }

        private static void writeFully(final SocketChannel channel, final ByteBuffer[] buffers, final int count)
            throws IOException
        {
            int first = 0;
            while (first < count)
            {
                channel.write(buffers, first, count - first);
                while (first < count && !buffers[first].hasRemaining())
                {
                    first++;
                }
            }
        }

        /** Reads {@code bytes} bytes, reusing {@code in} (the bytes themselves are not kept). */
        private static void readFully(final SocketChannel channel, final ByteBuffer in, final long bytes)
            throws IOException
        {
            long left = bytes;
            while (left > 0)
            {
                in.clear();
                if (left < in.capacity())
                {
                    in.limit((int)left);
                }
                final int read = channel.read(in);
                if (read < 0)
                {
                    throw new EOFException("the server closed the connection with " + left + " bytes outstanding");
                }
                left -= read;
            }
        }

        private static void awaitQuietly(final CountDownLatch latch)
        {
            try
            {
                latch.await();
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }

        private static void join(final Thread thread)
        {
            try
            {
                thread.join(JOIN_TIMEOUT_MS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            if (thread.isAlive())
            {
                throw new IllegalStateException(thread.getName() + " did not finish within " + JOIN_TIMEOUT_MS + " ms");
            }
        }

        private static void closeQuietly(final SocketChannel channel)
        {
            try
            {
                channel.close();
            }
            catch (final IOException ex)
            {
                // closing for the stop: nothing left to do with the channel
            }
        }
    }

    @FunctionalInterface
    private interface IoTask
    {
        void run() throws IOException;
    }
}
