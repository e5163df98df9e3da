package io.granary.cli;

import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Locale;

/**
 * What this JVM spent outside the measured work: milliseconds its JIT compilers compiled and the collections (count,
 * milliseconds) of its garbage collectors. A bench phase reads it before and after, so a row that came out slow says
 * whether compiling or collecting took the cores (with --local the master and nodes share this JVM, so it covers them
 * too). Read from the platform MXBeans; a JVM without a compilation bean reports -1 ms compiling.
 */
record JvmTimes(long compileMs, long collections, long collectionMs)
{
    /** The figures now. */
    static JvmTimes now()
    {
        return of(ManagementFactory.getCompilationMXBean(), ManagementFactory.getGarbageCollectorMXBeans());
    }

    static JvmTimes of(final CompilationMXBean compiler, final List<GarbageCollectorMXBean> collectors)
    {
        final long compileMs = compiler != null && compiler.isCompilationTimeMonitoringSupported() ?
            compiler.getTotalCompilationTime() : -1;
        long count = 0;
        long ms = 0;
        for (final GarbageCollectorMXBean gc : collectors)
        {
            // -1 means undefined for this collector; it adds nothing.
            count += Math.max(0, gc.getCollectionCount());
            ms += Math.max(0, gc.getCollectionTime());
        }
        return new JvmTimes(compileMs, count, ms);
    }

    /** What happened between {@code before} and this reading; -1 ms compiling when either reading has none. */
    JvmTimes since(final JvmTimes before)
    {
        return new JvmTimes(compileMs < 0 || before.compileMs < 0 ? -1 : compileMs - before.compileMs,
            collections - before.collections, collectionMs - before.collectionMs);
    }

    /**
     * One line for a phase of {@code elapsedNs}, e.g. {@code jvm: 4k put: JIT compiled 212 ms (4.9 % of the phase's
     * 4.338 s), 2 collections took 401 ms (9.2 %)}. The percentages are of the phase's wall time: compiling runs on
     * compiler threads beside the work, a collection (its pauses, for the JDK's collectors' beans) stops it.
     */
    String describe(final String label, final long elapsedNs)
    {
        final double phaseMs = Math.max(1e-6, elapsedNs / 1e6);
        final String compiled = compileMs < 0 ? "JIT time not reported" :
            String.format(Locale.ROOT, "JIT compiled %d ms (%.1f %% of the phase's %.3f s)", compileMs,
                100.0 * compileMs / phaseMs, elapsedNs / 1e9);
        return String.format(Locale.ROOT, "jvm: %s: %s, %d collection(s) took %d ms (%.1f %%)", label, compiled,
            collections, collectionMs, 100.0 * collectionMs / phaseMs);
    }
}
