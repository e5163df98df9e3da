package io.granary.master.meta;

import io.granary.master.evict.Evictor;
import io.granary.proto.LeaseMode;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static io.granary.master.meta.MetadataFixture.T;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * LastHitOnly probes racing puts, removes and forced eviction rounds. Invariants checked on every
 * probe: at most one all-true candidate and no partially true one; every key marked true is leased
 * when the call returns; the probe granted leases to exactly the selected keys and no other.
 */
class ProbeStressTest
{
    static final int CANDIDATES = 24;
    static final int CANDIDATE_SIZE = 4;
    static final int PROBES_PER_THREAD = 2_000;

    final MetadataFixture f = new MetadataFixture(256).mount("n1", 8L << 20);
    /** Keys leased by the current thread's probe call. */
    final ThreadLocal<List<String>> grantsOnThisThread = ThreadLocal.withInitial(ArrayList::new);
    final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();

    static String key(final int prober, final int candidate, final int member)
    {
        return "p" + prober + "/c" + candidate + "/r" + member;
    }

    @Test
    void shouldKeepProbeInvariantsUnderConcurrentPutsRemovesAndEvictions() throws InterruptedException
    {
        final Evictor evictor = f.evictor(0.9, 0.05, true);
        f.store.leaseListener((tenant, key, deadline) -> grantsOnThisThread.get().add(key));
        final int probers = 2;
        final List<String> allKeys = new ArrayList<>();
        for (int p = 0; p < probers; p++)
        {
            for (int c = 0; c < CANDIDATES; c++)
            {
                for (int m = 0; m < CANDIDATE_SIZE; m++)
                {
                    allKeys.add(key(p, c, m));
                }
            }
        }

        final AtomicBoolean running = new AtomicBoolean(true);
        final AtomicLong probes = new AtomicLong();
        final AtomicLong selections = new AtomicLong();
        final AtomicLong puts = new AtomicLong();
        final AtomicLong evictions = new AtomicLong();
        final CountDownLatch probersDone = new CountDownLatch(probers);
        final List<Thread> threads = new ArrayList<>();

        for (int p = 0; p < probers; p++)
        {
            final int prober = p;
            threads.add(new Thread(() ->
            {
                try
                {
                    final List<String> keys = new ArrayList<>();
                    for (int c = 0; c < CANDIDATES; c++)
                    {
                        for (int m = 0; m < CANDIDATE_SIZE; m++)
                        {
                            keys.add(key(prober, c, m));
                        }
                    }
                    // Start once the putter has run a while: on two busy cores the probers could otherwise finish
                    // all their probes before a single put (no candidate ever complete, nothing to select).
                    final long gate = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (puts.get() < allKeys.size() && System.nanoTime() < gate)
                    {
                        Thread.onSpinWait();
                        Thread.yield();
                    }
                    // At least PROBES_PER_THREAD probes, and on until one selected a candidate (or 20 s passed): on
                    // two busy cores the putter may get little CPU while the probes run, the remover and the evictor
                    // keep the keys few, and 2,000 probes can pass in a few milliseconds without a complete candidate.
                    final long selectDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                    for (int i = 0; i < PROBES_PER_THREAD ||
                        selections.get() == 0 && System.nanoTime() - selectDeadline < 0; i++)
                    {
                        grantsOnThisThread.get().clear();
                        final boolean[] mask = new boolean[keys.size()];
                        final int code = f.probe.probe(
                            T, LeaseMode.LEASE_MODE_LAST_HIT_ONLY, CANDIDATE_SIZE, keys, mask, new int[keys.size()]);
                        final long returnedAt = f.clock.nanoTime();
                        probes.incrementAndGet();
                        if (code != OK_VALUE)
                        {
                            violations.add("probe code " + code);
                            continue;
                        }
                        checkProbe(keys, mask, returnedAt, selections);
                        // Time moves 5 ms per probe (10 s of lease TTL = 2,000 probes), so leases lapse during the run.
                        f.clock.advanceMillis(5);
                    }
                }
                finally
                {
                    probersDone.countDown();
                }
            }, "prober-" + p));
        }
        threads.add(new Thread(() ->
        {
            final SplittableRandom random = new SplittableRandom(1);
            while (running.get())
            {
                final String key = allKeys.get(random.nextInt(allKeys.size()));
                f.putCode(T, key, 64 << 10, PutOptions.getDefaultInstance());
                puts.incrementAndGet();
            }
        }, "putter"));
        threads.add(new Thread(() ->
        {
            final SplittableRandom random = new SplittableRandom(2);
            while (running.get())
            {
                f.store.remove(T, allKeys.get(random.nextInt(allKeys.size())), false);
            }
        }, "remover"));
        threads.add(new Thread(() ->
        {
            while (running.get())
            {
                evictions.addAndGet(evictor.evict(1L << 20).totalObjects());
            }
        }, "evictor"));

        threads.forEach(Thread::start);
        final boolean finished = probersDone.await(120, TimeUnit.SECONDS);
        running.set(false);
        for (final Thread t : threads)
        {
            t.join(10_000);
        }
        System.out.printf("probe stress: %d probes, %d selections, %d puts, %d evicted, %d violations%n",
            probes.get(), selections.get(), puts.get(), evictions.get(), violations.size());
        assertThat(finished).as("probers finished").isTrue();
        assertThat(violations).as("invariant violations").isEmpty();
        assertThat(selections.get()).as("some probes selected a candidate").isPositive();
        assertThat(evictions.get()).as("evictions ran concurrently").isPositive();
    }

    private void checkProbe(final List<String> keys, final boolean[] mask, final long returnedAt, final AtomicLong selections)
    {
        int selected = -1;
        for (int c = 0; c < CANDIDATES; c++)
        {
            int trues = 0;
            for (int m = 0; m < CANDIDATE_SIZE; m++)
            {
                trues += mask[c * CANDIDATE_SIZE + m] ? 1 : 0;
            }
            if (trues == CANDIDATE_SIZE)
            {
                if (selected >= 0)
                {
                    violations.add("two all-true candidates: " + selected + " and " + c);
                }
                selected = c;
            }
            else if (trues != 0)
            {
                violations.add("partially true candidate " + c);
            }
        }
        final Set<String> expected = new HashSet<>();
        if (selected >= 0)
        {
            selections.incrementAndGet();
            for (int m = 0; m < CANDIDATE_SIZE; m++)
            {
                final String key = keys.get(selected * CANDIDATE_SIZE + m);
                expected.add(key);
                final ObjectMeta meta = f.store.lockForKey(T, key);
                if (meta == null)
                {
                    violations.add("selected key vanished while leased: " + key);
                    continue;
                }
                try
                {
                    if (!meta.isLeased(returnedAt))
                    {
                        violations.add("selected key not leased at return: " + key);
                    }
                }
                finally
                {
                    f.store.unlockOwner(meta);
                }
            }
        }
        final List<String> granted = grantsOnThisThread.get();
        if (!new HashSet<>(granted).equals(expected) || granted.size() != expected.size())
        {
            violations.add("granted " + granted + " but selected " + expected);
        }
    }
}
