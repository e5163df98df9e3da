package io.granary.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.management.ObjectName;
import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.OperatingSystemMXBean;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class JvmTimesTest
{
    @Test
    void shouldSumTheCollectorsAndSkipTheirUndefinedFigures()
    {
        final JvmTimes t = JvmTimes.of(compiler(true, 1234),
            List.of(collector(3, 40), collector(2, 500), collector(-1, -1)), 70, 80, 9000);

        assertThat(t).isEqualTo(new JvmTimes(1234, 5, 540, 70, 80, 9000));
    }

    @Test
    void shouldReportNoCompileTimeWhenTheJvmHasNoneToGive()
    {
        assertThat(JvmTimes.of(null, List.of(), -1, -1, -1).compileMs()).isEqualTo(-1);
        assertThat(JvmTimes.of(compiler(false, 99), List.of(), -1, -1, -1).compileMs()).isEqualTo(-1);
    }

    @Test
    void shouldTakeTheDifferenceOfTwoReadings()
    {
        final JvmTimes before = new JvmTimes(1000, 7, 300, 500, 60, 4000);
        final JvmTimes after = new JvmTimes(1250, 9, 420, 650, 90, 7500);

        assertThat(after.since(before)).isEqualTo(new JvmTimes(250, 2, 120, 150, 30, 3500));
        assertThat(after.since(new JvmTimes(-1, 7, 300, -1, 60, -1)))
            .isEqualTo(new JvmTimes(-1, 2, 120, -1, 30, -1));
    }

    @Test
    void shouldDescribeAPhaseInMillisecondsAndShareOfItsWallTime()
    {
        final String line = new JvmTimes(250, 2, 120, 100, 300, 3000).describe("4k put", 2_000_000_000L, 2, 600_000);

        assertThat(line).isEqualTo("jvm: 4k put: JIT compiled 250 ms (12.5 % of the phase's 2.000 s), 2 collection(s) "
            + "took 120 ms (6.0 %); CPU of the compiler threads 100 ms (2.5 % of 2 core(s)), of the GC threads 300 ms "
            + "(7.5 %); process CPU 3000 ms (75.0 % of the cores), 5.00 us per op");
        assertThat(new JvmTimes(-1, 0, 0, -1, -1, -1).describe("1m get", 1_000_000_000L, 2, 100))
            .isEqualTo("jvm: 1m get: JIT time not reported, 0 collection(s) took 0 ms (0.0 %)");
    }

    @Test
    void shouldReadTheProcessCpuTimeFromTheHotSpotBeanOnly()
    {
        // HotSpot's bean gives nanoseconds (or -1 where the OS does not); a bean without the method gives nothing.
        assertThat(JvmTimes.processCpuMs(osBean(com.sun.management.OperatingSystemMXBean.class, 2_999_999L)))
            .isEqualTo(2);
        assertThat(JvmTimes.processCpuMs(osBean(com.sun.management.OperatingSystemMXBean.class, -1L))).isEqualTo(-1);
        assertThat(JvmTimes.processCpuMs(osBean(OperatingSystemMXBean.class, 5_000_000L))).isEqualTo(-1);
    }

    private static OperatingSystemMXBean osBean(final Class<? extends OperatingSystemMXBean> type, final long cpuNs)
    {
        return (OperatingSystemMXBean)Proxy.newProxyInstance(JvmTimesTest.class.getClassLoader(), new Class<?>[] {type},
            (proxy, method, args) ->
            {
                if (method.getName().equals("getProcessCpuTime"))
                {
                    return cpuNs;
                }
                throw new UnsupportedOperationException(method.getName());
            });
    }

    @Test
    void shouldMeasureTheCompilersShareOfTheCoresByCpuTimeWhenKnown()
    {
        // 400 ms of CPU over 1 s on 2 cores: 20 %; without CPU times, the 900 ms compile time: 45 %.
        assertThat(new JvmTimes(900, 0, 0, 400, 0, -1).compilerShare(1_000_000_000L, 2)).isEqualTo(20.0);
        assertThat(new JvmTimes(900, 0, 0, -1, -1, -1).compilerShare(1_000_000_000L, 2)).isEqualTo(45.0);
        assertThat(new JvmTimes(-1, 0, 0, -1, -1, -1).compilerShare(1_000_000_000L, 2)).isEqualTo(-1.0);
    }

    @Test
    void shouldParseUserAndSystemTimeAfterANameHoldingSpacesAndParentheses()
    {
        // Fields 14 and 15 (utime 250, stime 30 ticks of 10 ms) counted from the last ')'.
        final String stat = "4242 (C2 CompilerThre) S 1 4200 4200 0 -1 4194368 120 0 0 0 250 30 0 0 20 0 40 0 900 0 0";
        assertThat(JvmTimes.cpuMs(stat)).isEqualTo(2800);
        assertThat(JvmTimes.cpuMs("7 (a) b) R 1 1 1 0 -1 0 0 0 0 0 5 5 0 0")).isEqualTo(100);
        assertThat(JvmTimes.cpuMs("7 no name field")).isEqualTo(-1);
        assertThat(JvmTimes.cpuMs("7 (x) R 1 2")).isEqualTo(-1);
        assertThat(JvmTimes.cpuMs("7 (x) R 1 1 1 0 -1 0 0 0 0 0 five 5 0 0")).isEqualTo(-1);
    }

    @Test
    void shouldSumTheCompilerAndGcThreadsOfATaskDirectory(@TempDir final Path tasks) throws IOException
    {
        task(tasks, "101", "C2 CompilerThre", 200, 10);
        task(tasks, "102", "C1 CompilerThre", 50, 0);
        task(tasks, "103", "GC Thread#0", 30, 5);
        task(tasks, "104", "G1 Refine#0", 7, 3);
        task(tasks, "105", "VM Thread", 4, 1);
        task(tasks, "106", "granary-bench-p", 5000, 900); // the work: in neither
        Files.createDirectory(tasks.resolve("107")); // a thread that ended while listed: skipped

        assertThat(JvmTimes.threadCpuMs(tasks)).containsExactly(2600, 500);
        assertThat(JvmTimes.threadCpuMs(tasks.resolve("missing"))).containsExactly(-1, -1);
    }

    private static void task(final Path tasks, final String tid, final String name, final long utime, final long stime)
        throws IOException
    {
        final Path dir = Files.createDirectory(tasks.resolve(tid));
        Files.writeString(dir.resolve("comm"), name + "\n");
        Files.writeString(dir.resolve("stat"), tid + " (" + name + ") S 1 1 1 0 -1 0 0 0 0 0 " + utime + " " + stime +
            " 0 0 20 0 1 0 100 0 0\n");
    }

    @Test
    void shouldReadThisJvmsBeans()
    {
        final JvmTimes before = JvmTimes.now();
        System.gc();
        final JvmTimes after = JvmTimes.now();

        // The test JVM runs with a JIT and a collector whose beans count a System.gc(), on Linux.
        assertThat(before.compileMs()).isGreaterThanOrEqualTo(0);
        assertThat(after.since(before).collections()).isGreaterThanOrEqualTo(1);
        assertThat(after.compilerCpuMs()).isGreaterThanOrEqualTo(0);
        assertThat(after.gcCpuMs()).isGreaterThanOrEqualTo(0);
    }

    private static CompilationMXBean compiler(final boolean supported, final long ms)
    {
        return new CompilationMXBean()
        {
            @Override
            public String getName()
            {
                return "test";
            }

            @Override
            public boolean isCompilationTimeMonitoringSupported()
            {
                return supported;
            }

            @Override
            public long getTotalCompilationTime()
            {
                if (!supported)
                {
                    throw new UnsupportedOperationException("not supported");
                }
                return ms;
            }

            @Override
            public ObjectName getObjectName()
            {
                return null;
            }
        };
    }

    private static GarbageCollectorMXBean collector(final long count, final long ms)
    {
        return new GarbageCollectorMXBean()
        {
            @Override
            public long getCollectionCount()
            {
                return count;
            }

            @Override
            public long getCollectionTime()
            {
                return ms;
            }

            @Override
            public String getName()
            {
                return "test";
            }

            @Override
            public boolean isValid()
            {
                return true;
            }

            @Override
            public String[] getMemoryPoolNames()
            {
                return new String[0];
            }

            @Override
            public ObjectName getObjectName()
            {
                return null;
            }
        };
    }
}
