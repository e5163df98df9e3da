package io.granary.it;

import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.Replica;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * A mixed put/get/remove workload of several threads against one client, for failure tests: values of 4 KiB to
 * 1 MiB whose bytes derive from their key (each put writes a fresh key, so every value read can be checked byte
 * for byte), and a book of every complete object with the storage-node incarnations that held its replicas.
 * Reads that fail are expected while processes die; a read that returns wrong bytes never is. Any operation
 * slower than the hang bound counts as a hang. Threads: {@link #start()}/{@link #stop()} from the test thread;
 * the counters and the book are safe from any thread.
 */
final class Workload
{
    static final long SEED = 0x6368616f73L;
    private static final int MIN_BYTES = 4 << 10;
    private static final int MAX_BYTES = 1 << 20;

    /** Incarnation counters of the storage nodes, by transfer endpoint: bumped by the test after a node is lost. */
    static final class Generations
    {
        private final Map<String, AtomicInteger> byEndpoint = new ConcurrentHashMap<>();

        int of(final String endpoint)
        {
            return byEndpoint.computeIfAbsent(endpoint, e -> new AtomicInteger()).get();
        }

        Map<String, Integer> snapshot()
        {
            final Map<String, Integer> copy = new HashMap<>();
            byEndpoint.forEach((endpoint, generation) -> copy.put(endpoint, generation.get()));
            return copy;
        }

        /** The node at {@code endpoint} lost what it held (killed, or expired by the master). */
        void bump(final String endpoint)
        {
            byEndpoint.computeIfAbsent(endpoint, e -> new AtomicInteger()).incrementAndGet();
        }
    }

    /**
     * A complete object and where it lived when its put finished: endpoint to the incarnation number then. It must
     * stay readable while one of those incarnations is still the current one.
     */
    record Stored(String key, int sizeBytes, Map<String, Integer> replicas)
    {
        boolean expectedAlive(final Generations generations)
        {
            for (final Map.Entry<String, Integer> r : replicas.entrySet())
            {
                if (generations.of(r.getKey()) == r.getValue())
                {
                    return true;
                }
            }
            return false;
        }
    }

    private final GranaryClient client;
    private final String prefix;
    private final int threads;
    private final int liveKeysPerThread;
    private final PutOptions options;
    private final Generations generations;
    private final long hangNs;
    private final ManagedChannel channel;
    private final MasterServiceGrpc.MasterServiceBlockingStub stub;
    private final List<Thread> workers = new ArrayList<>();
    private volatile boolean running;

    private final Map<String, Stored> book = new ConcurrentHashMap<>();
    final AtomicLong ops = new AtomicLong();
    final AtomicLong putsOk = new AtomicLong();
    final AtomicLong putsFailed = new AtomicLong();
    final AtomicLong readsOk = new AtomicLong();
    final AtomicLong readsFailed = new AtomicLong();
    final AtomicLong removes = new AtomicLong();
    final AtomicLong wrongReads = new AtomicLong();
    final AtomicLong hangs = new AtomicLong();
    private final List<String> problems = new ArrayList<>();

    Workload(
        final GranaryClient client,
        final String masterAddress,
        final String prefix,
        final int threads,
        final int liveKeysPerThread,
        final PutOptions options,
        final Generations generations,
        final long hangMs)
    {
        this.client = client;
        this.prefix = prefix;
        this.threads = threads;
        this.liveKeysPerThread = liveKeysPerThread;
        this.options = options;
        this.generations = generations;
        this.hangNs = TimeUnit.MILLISECONDS.toNanos(hangMs);
        this.channel = ManagedChannelBuilder.forTarget(masterAddress).usePlaintext().build();
        this.stub = MasterServiceGrpc.newBlockingStub(channel);
    }

    /** The page a key stands for: its size is part of the key, its bytes derive from it. */
    static Page page(final String key)
    {
        return new Page(key, Integer.parseInt(key.substring(key.lastIndexOf('-') + 2)));
    }

    /** Sizes spread evenly on a log scale from 4 KiB to 1 MiB. */
    static String key(final String prefix, final int thread, final int n, final SplittableRandom random)
    {
        final double log = Math.log(MIN_BYTES) + random.nextDouble() * (Math.log(MAX_BYTES) - Math.log(MIN_BYTES));
        return prefix + thread + "-" + n + "-s" + (int)Math.exp(log);
    }

    /** Null when {@code value} is exactly the bytes of {@code key}, else what is wrong. */
    static String check(final String key, final ByteBuffer value)
    {
        return Pages.check(page(key), SEED, value);
    }

    void start()
    {
        running = true;
        for (int t = 0; t < threads; t++)
        {
            final int thread = t;
            final Thread worker = new Thread(() -> run(thread), "workload-" + prefix + t);
            worker.setDaemon(true);
            workers.add(worker);
            worker.start();
        }
    }

    /** Stops the threads; one still running after the bound counts as a hang. */
    void stop()
    {
        running = false;
        for (final Thread worker : workers)
        {
            try
            {
                worker.join(TimeUnit.NANOSECONDS.toMillis(hangNs) + 10_000);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            if (worker.isAlive())
            {
                hangs.incrementAndGet();
                problem(worker.getName() + " still running after stop: " + stackOf(worker));
            }
        }
        workers.clear();
        channel.shutdownNow();
    }

    /** Waits until {@code more} operations completed (however they ended). */
    void awaitOps(final long more, final java.time.Duration timeout)
    {
        final long target = ops.get() + more;
        Await.until(timeout, () -> ops.get() >= target, () -> "the workload to complete " + more +
            " more operations (" + summary() + ")");
    }

    List<Stored> book()
    {
        return new ArrayList<>(book.values());
    }

    synchronized List<String> problems()
    {
        return new ArrayList<>(problems);
    }

    String summary()
    {
        return putsOk.get() + " puts (" + putsFailed.get() + " failed), " + readsOk.get() + " reads (" +
            readsFailed.get() + " failed), " + removes.get() + " removes, " + wrongReads.get() + " wrong reads, " +
            hangs.get() + " hangs";
    }

    private void run(final int thread)
    {
        final SplittableRandom random = new SplittableRandom(SEED + thread * 7919L);
        final List<String> mine = new ArrayList<>();
        int n = 0;
        while (running)
        {
            final int dice = random.nextInt(100);
            final long startNs = System.nanoTime();
            boolean ok;
            if (dice < 45 || mine.isEmpty())
            {
                ok = put(key(prefix, thread, n++, random), mine);
            }
            else if (dice < 55)
            {
                ok = putBatch(thread, n, random, mine);
                n += 3;
            }
            else if (dice < 92)
            {
                ok = read(mine.get(random.nextInt(mine.size())));
            }
            else
            {
                ok = removeOldest(mine);
            }
            final long tookNs = System.nanoTime() - startNs;
            if (tookNs > hangNs)
            {
                hangs.incrementAndGet();
                problem("an operation took " + TimeUnit.NANOSECONDS.toMillis(tookNs) + " ms");
            }
            ops.incrementAndGet();
            if (!ok)
            {
                // Pace retries while a process is down instead of spinning on fast failures.
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
            }
        }
    }

    private boolean put(final String key, final List<String> mine)
    {
        final Map<String, Integer> before = snapshot();
        try
        {
            client.put(key, ByteBuffer.wrap(Pages.content(page(key), SEED)), options);
        }
        catch (final GranaryException ex)
        {
            putsFailed.incrementAndGet();
            problem("put " + key + " failed: " + ex.getMessage());
            return false;
        }
        putsOk.incrementAndGet();
        record(key, before);
        mine.add(key);
        trim(mine);
        return true;
    }

    private boolean putBatch(final int thread, final int n, final SplittableRandom random, final List<String> mine)
    {
        final List<String> keys = new ArrayList<>();
        final List<ByteBuffer> values = new ArrayList<>();
        for (int i = 0; i < 3; i++)
        {
            final String key = key(prefix, thread, n + i, random);
            keys.add(key);
            values.add(ByteBuffer.wrap(Pages.content(page(key), SEED)));
        }
        final Map<String, Integer> before = snapshot();
        final List<OpResult<Void>> results;
        try
        {
            results = client.putBatch(keys, values, options);
        }
        catch (final GranaryException ex)
        {
            putsFailed.addAndGet(keys.size());
            problem("putBatch " + keys + " failed: " + ex.getMessage());
            return false;
        }
        boolean all = true;
        for (int i = 0; i < keys.size(); i++)
        {
            if (results.get(i).ok())
            {
                putsOk.incrementAndGet();
                record(keys.get(i), before);
                mine.add(keys.get(i));
            }
            else
            {
                putsFailed.incrementAndGet();
                problem("putBatch key " + keys.get(i) + " failed: " + results.get(i));
                all = false;
            }
        }
        trim(mine);
        return all;
    }

    private boolean read(final String key)
    {
        final byte[] value;
        try
        {
            value = client.get(key);
        }
        catch (final GranaryException ex)
        {
            readsFailed.incrementAndGet();
            return false;
        }
        final String wrong = check(key, ByteBuffer.wrap(value));
        if (wrong != null)
        {
            wrongReads.incrementAndGet();
            problem("WRONG READ " + wrong);
            return false;
        }
        readsOk.incrementAndGet();
        return true;
    }

    private boolean removeOldest(final List<String> mine)
    {
        final String key = mine.remove(0);
        book.remove(key); // whatever the answer, the object is no longer expected
        try
        {
            client.remove(key, true);
            removes.incrementAndGet();
            return true;
        }
        catch (final GranaryException ex)
        {
            return false;
        }
    }

    private void trim(final List<String> mine)
    {
        while (mine.size() > liveKeysPerThread)
        {
            removeOldest(mine);
        }
    }

    private Map<String, Integer> snapshot()
    {
        return generations.snapshot();
    }

    /**
     * Books a complete object with the node incarnations that held its replicas: asked from the master right
     * after the put, and kept only for endpoints whose incarnation did not change since before the put started
     * (a node lost meanwhile may or may not have kept its replica; the test bumps an incarnation only after the
     * node is gone). An object whose replicas cannot be asked is not booked.
     */
    private void record(final String key, final Map<String, Integer> before)
    {
        final Map<String, Integer> replicas = new HashMap<>();
        final GetReplicaListResponse list;
        try
        {
            list = stub.withDeadlineAfter(5, TimeUnit.SECONDS)
                .getReplicaList(KeyRequest.newBuilder().setKey(key).build());
        }
        catch (final StatusRuntimeException ex)
        {
            channel.resetConnectBackoff();
            return;
        }
        if (list.getCode() != 0)
        {
            return;
        }
        for (final Replica r : list.getReplicasList())
        {
            final Integer then = before.get(r.getEndpoint());
            if (then != null && then == generations.of(r.getEndpoint()))
            {
                replicas.put(r.getEndpoint(), then);
            }
        }
        if (!replicas.isEmpty())
        {
            book.put(key, new Stored(key, page(key).sizeBytes(), replicas));
        }
    }

    /** Outcome of {@link #verifyBook}: objects checked, lost (expected but unreadable) and read wrong. */
    record Verification(int checked, int lost, int wrong, List<String> problems)
    {
    }

    /**
     * Reads back every booked object that must still exist (one of its replica incarnations is current) and
     * checks its bytes; an object that fails is read again until {@code deadline} before it counts as lost.
     */
    Verification verifyBook(final java.time.Duration deadline)
    {
        final long deadlineNs = System.nanoTime() + deadline.toNanos();
        final List<String> found = new ArrayList<>();
        int checked = 0;
        int lost = 0;
        int wrong = 0;
        for (final Stored stored : book())
        {
            if (!stored.expectedAlive(generations))
            {
                continue;
            }
            checked++;
            while (true)
            {
                String problem;
                try
                {
                    problem = check(stored.key(), ByteBuffer.wrap(client.get(stored.key())));
                    if (problem != null)
                    {
                        wrong++;
                        found.add("WRONG READ " + problem);
                        break;
                    }
                    break;
                }
                catch (final GranaryException ex)
                {
                    problem = stored.key() + " (replicas " + stored.replicas() + "): " + ex.getMessage();
                }
                if (!book.containsKey(stored.key()))
                {
                    checked--; // the workload removed it meanwhile (it leaves the book before the remove is sent)
                    break;
                }
                if (System.nanoTime() - deadlineNs > 0)
                {
                    lost++;
                    if (found.size() < 30)
                    {
                        found.add("LOST " + problem);
                    }
                    break;
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            }
        }
        return new Verification(checked, lost, wrong, found);
    }

    private synchronized void problem(final String text)
    {
        if (problems.size() < 50)
        {
            problems.add(text);
        }
    }

    private static String stackOf(final Thread thread)
    {
        final StringBuilder b = new StringBuilder();
        for (final StackTraceElement e : thread.getStackTrace())
        {
            b.append("\n    at ").append(e);
        }
        return b.toString();
    }
}
