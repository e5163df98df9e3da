package io.granary.common;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.TreeMap;

/**
 * Settings and report of one fuzz test: how many cases (system property {@code granary.fuzz.cases}, else the
 * test's CI default), the seed ({@code granary.fuzz.seed}, else a fixed one, so a failure reproduces), and a
 * count per outcome printed as one line at the end. Not thread safe.
 */
public final class FuzzRun
{
    public static final String CASES_PROPERTY = "granary.fuzz.cases";
    public static final String SEED_PROPERTY = "granary.fuzz.seed";
    public static final long DEFAULT_SEED = 0x6772616E617279L; // "granary"

    private final String name;
    private final int cases;
    private final long seed;
    private final Map<String, Long> outcomes = new TreeMap<>();
    private final long startNs = System.nanoTime();

    public FuzzRun(final String name, final int ciCases)
    {
        this.name = name;
        final String casesText = System.getProperty(CASES_PROPERTY, "").trim();
        this.cases = casesText.isEmpty() ? ciCases : Integer.parseInt(casesText);
        final String seedText = System.getProperty(SEED_PROPERTY, "").trim();
        this.seed = seedText.isEmpty() ? DEFAULT_SEED : Long.parseLong(seedText);
    }

    public int cases()
    {
        return cases;
    }

    public long seed()
    {
        return seed;
    }

    /** Counts one case with this outcome. */
    public void count(final String outcome)
    {
        outcomes.merge(outcome, 1L, Long::sum);
    }

    /** Cases counted with this outcome so far. */
    public long get(final String outcome)
    {
        return outcomes.getOrDefault(outcome, 0L);
    }

    /** Text to add to every assertion: the case and how to run it again. */
    public String where(final int caseIndex)
    {
        return name + " case " + caseIndex + " of " + cases + ", seed " + seed + " (rerun with -D" + SEED_PROPERTY +
            "=" + seed + " -D" + CASES_PROPERTY + "=" + cases + ")";
    }

    /**
     * Prints {@code fuzz: <name> <n> cases seed=<seed> <outcome>=<count> ... in <s>s} on stdout and appends it to
     * target/fuzz-counts.txt of the module, so a build's counts can be collected in one place.
     */
    public String report(final int ran)
    {
        final StringBuilder line = new StringBuilder("fuzz: ").append(name).append(' ').append(ran)
            .append(" cases seed=").append(seed);
        outcomes.forEach((outcome, n) -> line.append(' ').append(outcome).append('=').append(n));
        line.append(String.format(java.util.Locale.ROOT, " in %.1fs", (System.nanoTime() - startNs) / 1e9));
        final String text = line.toString();
        System.out.println(text);
        try
        {
            final Path target = Path.of("target");
            if (Files.isDirectory(target))
            {
                Files.writeString(target.resolve("fuzz-counts.txt"), text + System.lineSeparator(),
                    StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            }
        }
        catch (final IOException ex)
        {
            System.out.println("fuzz: cannot append to target/fuzz-counts.txt: " + ex);
        }
        return text;
    }
}
