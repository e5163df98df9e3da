package io.granary.cli;

import org.junit.jupiter.api.Test;

import javax.management.ObjectName;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class JvmTimesTest
{
    @Test
    void shouldSumTheCollectorsAndSkipTheirUndefinedFigures()
    {
        final JvmTimes t = JvmTimes.of(compiler(true, 1234),
            List.of(collector(3, 40), collector(2, 500), collector(-1, -1)));

        assertThat(t).isEqualTo(new JvmTimes(1234, 5, 540));
    }

    @Test
    void shouldReportNoCompileTimeWhenTheJvmHasNoneToGive()
    {
        assertThat(JvmTimes.of(null, List.of()).compileMs()).isEqualTo(-1);
        assertThat(JvmTimes.of(compiler(false, 99), List.of()).compileMs()).isEqualTo(-1);
    }

    @Test
    void shouldTakeTheDifferenceOfTwoReadings()
    {
        final JvmTimes before = new JvmTimes(1000, 7, 300);
        final JvmTimes after = new JvmTimes(1250, 9, 420);

        assertThat(after.since(before)).isEqualTo(new JvmTimes(250, 2, 120));
        assertThat(after.since(new JvmTimes(-1, 7, 300)).compileMs()).isEqualTo(-1);
    }

    @Test
    void shouldDescribeAPhaseInMillisecondsAndShareOfItsWallTime()
    {
        final String line = new JvmTimes(250, 2, 120).describe("4k put", 2_000_000_000L);

        assertThat(line).isEqualTo(
            "jvm: 4k put: JIT compiled 250 ms (12.5 % of the phase's 2.000 s), 2 collection(s) took 120 ms (6.0 %)");
        assertThat(new JvmTimes(-1, 0, 0).describe("1m get", 1_000_000_000L))
            .isEqualTo("jvm: 1m get: JIT time not reported, 0 collection(s) took 0 ms (0.0 %)");
    }

    @Test
    void shouldReadThisJvmsBeans()
    {
        final JvmTimes before = JvmTimes.now();
        System.gc();
        final JvmTimes after = JvmTimes.now();

        // The test JVM runs with a JIT and a collector whose beans count a System.gc().
        assertThat(before.compileMs()).isGreaterThanOrEqualTo(0);
        assertThat(after.since(before).collections()).isGreaterThanOrEqualTo(1);
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
