package io.granary.cli;

import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * What this JVM spent outside the measured work: the JIT's compile time and the collections (count, milliseconds) of
 * its garbage collectors, from the platform MXBeans, and where Linux tells it (/proc/self/task), the CPU time of its
 * compiler threads and of its GC threads. A bench phase reads it before and after, so a row that came out slow says
 * whether compiling or collecting took the cores (with --local the master and nodes share this JVM, so it covers them
 * too).
 *
 * <p>The MXBean's compile time is elapsed time: on a busy machine a compile waiting for a core counts its wait too, so
 * the threads' CPU time is the better measure of what the compiler took from the work. -1 stands for a figure the JVM
 * or the OS does not give.
 *
 * <p>It also reads the CPU time of the whole process (every thread: callers, master, nodes, compiler, collector), so a
 * phase can say what one operation cost in CPU: on a shared 2-core VM that figure drifts less than the throughput,
 * which also moves with the cores other guests leave free.
 */
record JvmTimes(long compileMs, long collections, long collectionMs, long compilerCpuMs, long gcCpuMs,
    long processCpuMs)
{
    /** Clock ticks per second of /proc's utime and stime: USER_HZ, 100 on every Linux architecture Java runs on. */
    private static final long USER_HZ = 100;
    private static final Path TASKS = Path.of("/proc/self/task");

    /** The figures now. */
    static JvmTimes now()
    {
        final long[] cpu = threadCpuMs(TASKS);
        return of(ManagementFactory.getCompilationMXBean(), ManagementFactory.getGarbageCollectorMXBeans(), cpu[0],
            cpu[1], processCpuMs(ManagementFactory.getOperatingSystemMXBean()));
    }

    /** The CPU time of this process in milliseconds, where the JVM's platform bean gives it; else -1. */
    static long processCpuMs(final java.lang.management.OperatingSystemMXBean os)
    {
        if (os instanceof com.sun.management.OperatingSystemMXBean)
        {
            final long ns = ((com.sun.management.OperatingSystemMXBean)os).getProcessCpuTime();
            return ns < 0 ? -1 : ns / 1_000_000;
        }
        return -1;
    }

    static JvmTimes of(
        final CompilationMXBean compiler, final List<GarbageCollectorMXBean> collectors, final long compilerCpuMs,
        final long gcCpuMs, final long processCpuMs)
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
        return new JvmTimes(compileMs, count, ms, compilerCpuMs, gcCpuMs, processCpuMs);
    }

    /**
     * CPU milliseconds (user + system) of the threads under {@code tasks} (a /proc/PID/task directory) whose names
     * say they compile ({@code C1 CompilerThre}, {@code C2 CompilerThre}: HotSpot's, cut to 15 characters by Linux)
     * and of those that collect ({@code GC Thread#N}, {@code G1 ...}, {@code VM Thread}, which runs the pauses'
     * safepoint work); {-1, -1} when the directory cannot be read. Threads that ended since the last reading drop out,
     * which HotSpot's compiler and GC threads rarely do (dynamic compiler threads can).
     */
    static long[] threadCpuMs(final Path tasks)
    {
        long compiler = 0;
        long gc = 0;
        try (DirectoryStream<Path> threads = Files.newDirectoryStream(tasks))
        {
            for (final Path thread : threads)
            {
                final String name;
                final String stat;
                try
                {
                    name = Files.readString(thread.resolve("comm"), StandardCharsets.UTF_8).strip();
                    stat = Files.readString(thread.resolve("stat"), StandardCharsets.UTF_8);
                }
                catch (final IOException ex)
                {
                    continue; // the thread ended while being read
                }
                final boolean compiles = name.startsWith("C1 CompilerThre") || name.startsWith("C2 CompilerThre");
                final boolean collects = name.startsWith("GC Thread") || name.startsWith("G1 ") ||
                    name.equals("VM Thread");
                if (compiles || collects)
                {
                    final long ms = cpuMs(stat);
                    if (ms >= 0)
                    {
                        if (compiles)
                        {
                            compiler += ms;
                        }
                        else
                        {
                            gc += ms;
                        }
                    }
                }
            }
        }
        catch (final IOException | SecurityException ex)
        {
            return new long[] {-1, -1};
        }
        return new long[] {compiler, gc};
    }

    /**
     * utime + stime of one /proc/PID/task/TID/stat line, in milliseconds; -1 when it does not parse. The name field
     * (in parentheses) may hold spaces and parentheses itself, so the fields are counted from the last ')'.
     */
    static long cpuMs(final String stat)
    {
        final int close = stat.lastIndexOf(')');
        if (close < 0)
        {
            return -1;
        }
        // After the name: state(3) ppid(4) ... utime(14) stime(15); field 3 is the first after ") ".
        final String[] fields = stat.substring(close + 1).trim().split("\\s+");
        if (fields.length < 13)
        {
            return -1;
        }
        try
        {
            return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) * 1000 / USER_HZ;
        }
        catch (final NumberFormatException ex)
        {
            return -1;
        }
    }

    /** What happened between {@code before} and this reading; -1 for a figure either reading lacks. */
    JvmTimes since(final JvmTimes before)
    {
        return new JvmTimes(minus(compileMs, before.compileMs), collections - before.collections,
            collectionMs - before.collectionMs, minus(compilerCpuMs, before.compilerCpuMs), minus(gcCpuMs, before.gcCpuMs),
            minus(processCpuMs, before.processCpuMs));
    }

    private static long minus(final long after, final long before)
    {
        return after < 0 || before < 0 ? -1 : Math.max(0, after - before);
    }

    /**
     * The share (%) of {@code cores} cores over {@code elapsedNs} the compiler took: its threads' CPU time where known,
     * else its elapsed compile time; -1 when neither is known.
     */
    double compilerShare(final long elapsedNs, final int cores)
    {
        final double capacityMs = Math.max(1e-6, elapsedNs / 1e6 * Math.max(1, cores));
        if (compilerCpuMs >= 0)
        {
            return 100.0 * compilerCpuMs / capacityMs;
        }
        return compileMs < 0 ? -1 : 100.0 * compileMs / capacityMs;
    }

    /**
     * One line for a phase of {@code ops} operations over {@code elapsedNs} on {@code cores} cores, e.g. {@code jvm: 4k
     * put: JIT compiled 973 ms (29.0 % of the phase's 3.355 s), 2 collection(s) took 309 ms (9.2 %); CPU of the compiler
     * threads 412 ms (6.1 % of 2 cores), of the GC threads 590 ms (8.8 %); process CPU 6120 ms (91.2 %), 5.98 us per
     * op}. Compiling runs beside the work, a collection (its pauses, for the JDK's collectors' beans) stops it.
     */
    String describe(final String label, final long elapsedNs, final int cores, final long ops)
    {
        final double phaseMs = Math.max(1e-6, elapsedNs / 1e6);
        final String compiled = compileMs < 0 ? "JIT time not reported" :
            String.format(Locale.ROOT, "JIT compiled %d ms (%.1f %% of the phase's %.3f s)", compileMs,
                100.0 * compileMs / phaseMs, elapsedNs / 1e9);
        final StringBuilder line = new StringBuilder(String.format(Locale.ROOT,
            "jvm: %s: %s, %d collection(s) took %d ms (%.1f %%)", label, compiled, collections, collectionMs,
            100.0 * collectionMs / phaseMs));
        final double capacityMs = phaseMs * Math.max(1, cores);
        if (compilerCpuMs >= 0 && gcCpuMs >= 0)
        {
            line.append(String.format(Locale.ROOT, "; CPU of the compiler threads %d ms (%.1f %% of %d core(s)), of "
                + "the GC threads %d ms (%.1f %%)", compilerCpuMs, 100.0 * compilerCpuMs / capacityMs,
                Math.max(1, cores), gcCpuMs, 100.0 * gcCpuMs / capacityMs));
        }
        if (processCpuMs >= 0)
        {
            line.append(String.format(Locale.ROOT, "; process CPU %d ms (%.1f %% of the cores)", processCpuMs,
                100.0 * processCpuMs / capacityMs));
            if (ops > 0)
            {
                line.append(String.format(Locale.ROOT, ", %.2f us per op", processCpuMs * 1000.0 / ops));
            }
        }
        return line.toString();
    }
}
