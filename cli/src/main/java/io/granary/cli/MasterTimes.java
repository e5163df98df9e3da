package io.granary.cli;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The master's side of a {@code bench} phase: per call (BatchPutStart, GetReplicaList, ...) how many the master served
 * and their mean handling time (from the request read off the connection to the reply built; the wire and the client
 * are not in it), read from its {@code granary.master.rpc} timers (all transports summed) before and after the phase:
 * from the in-process master's registry ({@code --local}) or a running master's {@code /metrics}
 * ({@code --master-metrics}). Shows how much of a put or get is the master's work and how much is the client, the
 * data plane and the wire. Immutable.
 */
final class MasterTimes
{
    static final String TIMER = "granary.master.rpc";
    /** A sample line of the timer in Prometheus text: name suffix, labels, value. */
    private static final Pattern SAMPLE =
        Pattern.compile("^granary_master_rpc_seconds_(count|sum)\\{([^}]*)\\}\\s+(\\S+)");
    private static final Pattern METHOD_LABEL = Pattern.compile("(?:^|,)\\s*method=\"([^\"]*)\"");
    private static final Duration SCRAPE_TIMEOUT = Duration.ofSeconds(5);

    /** method -> {calls, total nanoseconds}. */
    private final Map<String, double[]> byMethod;

    private MasterTimes(final Map<String, double[]> byMethod)
    {
        this.byMethod = byMethod;
    }

    /** What the master's timers in {@code registry} say now. */
    static MasterTimes of(final MeterRegistry registry)
    {
        final Map<String, double[]> byMethod = new TreeMap<>();
        for (final Timer timer : registry.find(TIMER).timers())
        {
            final String method = timer.getId().getTag("method");
            if (method == null)
            {
                continue;
            }
            final double[] sum = byMethod.computeIfAbsent(method, m -> new double[2]);
            sum[0] += timer.count();
            sum[1] += timer.totalTime(TimeUnit.NANOSECONDS);
        }
        return new MasterTimes(byMethod);
    }

    /**
     * What a running master's timers say now: its admin port's {@code /metrics} at {@code adminHostPort}.
     *
     * @throws IOException when the master does not answer, answers with another status than 200, or its metrics
     * hold none of the timers.
     */
    static MasterTimes scrape(final HttpClient http, final String adminHostPort) throws IOException
    {
        final URI uri = URI.create("http://" + adminHostPort + "/metrics");
        final HttpResponse<String> response;
        try
        {
            response = http.send(HttpRequest.newBuilder(uri).timeout(SCRAPE_TIMEOUT).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while reading " + uri, ex);
        }
        catch (final IOException ex)
        {
            throw new IOException("cannot read " + uri + ": " +
                (ex.getMessage() == null ? ex.getClass().getSimpleName() : ex.getMessage()), ex);
        }
        if (response.statusCode() != 200)
        {
            throw new IOException(uri + " answered HTTP " + response.statusCode());
        }
        final MasterTimes times = parse(response.body());
        if (times.byMethod.isEmpty())
        {
            throw new IOException(uri + " has no granary_master_rpc_seconds samples (not a Granary master's admin port?)");
        }
        return times;
    }

    /** The timers' samples in Prometheus text ({@code granary_master_rpc_seconds_count} / {@code _sum}); others ignored. */
    static MasterTimes parse(final String prometheusText)
    {
        final Map<String, double[]> byMethod = new TreeMap<>();
        for (final String line : prometheusText.split("\n"))
        {
            final Matcher sample = SAMPLE.matcher(line);
            if (!sample.find())
            {
                continue;
            }
            final Matcher method = METHOD_LABEL.matcher(sample.group(2));
            final double value;
            try
            {
                value = Double.parseDouble(sample.group(3));
            }
            catch (final NumberFormatException ex)
            {
                continue;
            }
            if (!method.find() || !Double.isFinite(value))
            {
                continue;
            }
            final double[] sum = byMethod.computeIfAbsent(method.group(1), m -> new double[2]);
            if (sample.group(1).equals("count"))
            {
                sum[0] += value;
            }
            else
            {
                sum[1] += value * 1e9;
            }
        }
        return new MasterTimes(byMethod);
    }

    /** The calls served between {@code before} and this reading; calls that did not occur are left out. */
    MasterTimes since(final MasterTimes before)
    {
        final Map<String, double[]> delta = new TreeMap<>();
        byMethod.forEach((method, now) ->
        {
            final double[] then = before.byMethod.getOrDefault(method, new double[2]);
            final double calls = now[0] - then[0];
            if (calls > 0)
            {
                delta.put(method, new double[] {calls, Math.max(0, now[1] - then[1])});
            }
        });
        return new MasterTimes(delta);
    }

    long calls(final String method)
    {
        final double[] v = byMethod.get(method);
        return v == null ? 0 : (long)v[0];
    }

    /** Mean nanoseconds per call of {@code method}; 0 when it was not called. */
    double meanNanos(final String method)
    {
        final double[] v = byMethod.get(method);
        return v == null ? 0 : v[1] / v[0];
    }

    double totalNanos()
    {
        double total = 0;
        for (final double[] v : byMethod.values())
        {
            total += v[1];
        }
        return total;
    }

    /**
     * One line for phase {@code phase} that lasted {@code phaseNs}: the calls most time went to first, with their
     * count and mean, then their total as a share of the phase (above 100 % when the master served calls of several
     * callers at once).
     */
    String describe(final String phase, final long phaseNs)
    {
        if (byMethod.isEmpty())
        {
            return "master: " + phase + ": no calls recorded";
        }
        final List<Map.Entry<String, double[]>> calls = new ArrayList<>(byMethod.entrySet());
        calls.sort((a, b) -> Double.compare(b.getValue()[1], a.getValue()[1]));
        final StringBuilder line = new StringBuilder("master: ").append(phase).append(": ");
        for (int i = 0; i < calls.size(); i++)
        {
            final double[] v = calls.get(i).getValue();
            line.append(i == 0 ? "" : ", ").append(calls.get(i).getKey())
                .append(String.format(Locale.ROOT, " %d x %.0f us", (long)v[0], v[1] / v[0] / 1_000.0));
        }
        final double total = totalNanos();
        line.append(String.format(Locale.ROOT, "; %.3f s serving them = %.1f %% of the phase's %.3f s " +
            "(handling only: request read to reply built)", total / 1e9, phaseNs > 0 ? 100.0 * total / phaseNs : 0.0, phaseNs / 1e9));
        return line.toString();
    }
}
