package io.granary.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One {@code granary} command running in its own JVM: a master, a storage node or a short client command.
 * Its stdout and stderr go straight to log files (the operating system writes them, so the pipes can never
 * fill); the ready line is read back from the stdout file. Every process started here is killed by a JVM
 * shutdown hook if nothing stopped it before, so a failing test leaves no orphan JVM behind. Use from the
 * test thread; {@link #isAlive()} and the log readers are safe from any thread.
 */
final class ServiceProcess implements AutoCloseable
{
    /** The flags every Granary JVM needs (Agrona on JDK 17, Netty's direct buffers) and a modest memory cap. */
    static final List<String> JVM_FLAGS = List.of(
        "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
        "--add-opens", "java.base/java.nio=ALL-UNNAMED",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Xmx256m",
        "-XX:MaxDirectMemorySize=256m");

    private static final String MAIN_CLASS = "io.granary.cli.Granary";
    private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();
    private static final Duration KILL_TIMEOUT = Duration.ofSeconds(30);

    static
    {
        final Thread reaper = new Thread(() ->
        {
            for (final Process process : RUNNING)
            {
                process.destroyForcibly();
            }
        }, "granary-it-reaper");
        Runtime.getRuntime().addShutdownHook(reaper);
    }

    private final String label;
    private final List<String> command;
    private final Process process;
    private final Path stdoutFile;
    private final Path stderrFile;
    private final long startNs;
    private volatile boolean stopRequested;
    private Map<String, String> readyFields = Map.of();

    private ServiceProcess(
        final String label, final List<String> command, final Process process, final Path stdoutFile,
        final Path stderrFile, final long startNs)
    {
        this.label = label;
        this.command = command;
        this.process = process;
        this.stdoutFile = stdoutFile;
        this.stderrFile = stderrFile;
        this.startNs = startNs;
    }

    /**
     * Starts {@code java <JVM_FLAGS> <extraJvmFlags> -cp <this JVM's class path> io.granary.cli.Granary <args>}
     * with stdout and stderr in {@code logDir/<label>.stdout.log} and {@code .stderr.log}; returns at once.
     */
    static ServiceProcess start(
        final String label, final List<String> extraJvmFlags, final List<String> args, final Path logDir)
    {
        return start(label, MAIN_CLASS, extraJvmFlags, args, logDir);
    }

    /** Like {@link #start(String, List, List, Path)} for another main class on this JVM's class path. */
    static ServiceProcess start(
        final String label, final String mainClass, final List<String> extraJvmFlags, final List<String> args,
        final Path logDir)
    {
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(JVM_FLAGS);
        command.addAll(extraJvmFlags);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass);
        command.addAll(args);

        final Path stdoutFile = logDir.resolve(label + ".stdout.log");
        final Path stderrFile = logDir.resolve(label + ".stderr.log");
        final ProcessBuilder builder = new ProcessBuilder(command)
            .redirectOutput(stdoutFile.toFile())
            .redirectError(stderrFile.toFile());
        try
        {
            Files.createDirectories(logDir);
            final long startNs = System.nanoTime();
            final Process process = builder.start();
            RUNNING.add(process);
            process.getOutputStream().close(); // nothing reads stdin: give it EOF
            process.onExit().thenRun(() -> RUNNING.remove(process));
            return new ServiceProcess(label, List.copyOf(command), process, stdoutFile, stderrFile, startNs);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot start " + label + ": " + String.join(" ", args), ex);
        }
    }

    /**
     * Waits until stdout carries a complete line matching {@code readyLine} and remembers its named groups.
     *
     * @throws AssertionError with the log tail when the process exits first or the line does not come in time.
     */
    ServiceProcess awaitReady(final Pattern readyLine, final Duration timeout)
    {
        final Matcher matcher = Await.value(timeout, () ->
        {
            final Matcher found = findLine(readyLine);
            if (found == null && !process.isAlive())
            {
                throw new AssertionError(label + " exited with code " + process.exitValue() +
                    " before printing its ready line\n" + describe());
            }
            return found;
        }, () -> label + " to print a line matching /" + readyLine + "/\n" + describe());
        final Map<String, String> fields = new LinkedHashMap<>();
        for (final String group : groupNames(readyLine))
        {
            fields.put(group, matcher.group(group));
        }
        readyFields = Collections.unmodifiableMap(fields);
        return this;
    }

    /** A named group of the ready line matched by {@link #awaitReady}. */
    String ready(final String group)
    {
        final String value = readyFields.get(group);
        if (value == null)
        {
            throw new IllegalStateException(label + " has no ready field '" + group + "' (have " + readyFields + ")");
        }
        return value;
    }

    String label()
    {
        return label;
    }

    long pid()
    {
        return process.pid();
    }

    boolean isAlive()
    {
        return process.isAlive();
    }

    /** How long since the process was started. */
    Duration uptime()
    {
        return Duration.ofNanos(System.nanoTime() - startNs);
    }

    /** SIGSTOP: the process freezes (its sockets stay open, nothing is read or answered) until {@link #resume()}. */
    void pause()
    {
        signal("STOP");
        awaitEveryThreadStopped();
    }

    /**
     * SIGSTOP is delivered asynchronously: wait until every thread of the process is in the stopped state ('T' in
     * /proc/PID/task/TID/stat), so that a test's next step really meets a frozen process.
     */
    private void awaitEveryThreadStopped()
    {
        final Path tasks = Path.of("/proc", Long.toString(process.pid()), "task");
        if (!Files.isDirectory(tasks))
        {
            return; // not Linux: nothing to look at
        }
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true)
        {
            boolean allStopped = true;
            try (java.util.stream.Stream<Path> threads = Files.list(tasks))
            {
                for (final Path task : (Iterable<Path>)threads::iterator)
                {
                    final String stat;
                    try
                    {
                        stat = Files.readString(task.resolve("stat"));
                    }
                    catch (final IOException ex)
                    {
                        continue; // the thread ended meanwhile
                    }
                    // "tid (comm) S ...": the state follows the last ')'.
                    final int close = stat.lastIndexOf(')');
                    final char state = close >= 0 && close + 2 < stat.length() ? stat.charAt(close + 2) : '?';
                    allStopped &= state == 'T' || state == 't';
                }
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException("cannot read the threads of " + label, ex);
            }
            if (allStopped)
            {
                return;
            }
            if (System.nanoTime() - deadlineNs > 0)
            {
                throw new AssertionError(label + " did not stop within 10 s of SIGSTOP");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    /** SIGCONT after {@link #pause()}. */
    void resume()
    {
        signal("CONT");
    }

    private void signal(final String name)
    {
        try
        {
            final Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid()))
                .redirectErrorStream(true).start();
            if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0)
            {
                throw new AssertionError("kill -" + name + " " + process.pid() + " failed: " +
                    new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot send SIG" + name + " to " + label, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted sending SIG" + name + " to " + label, ex);
        }
    }

    /** Lines of stdout so far that match {@code pattern}, in order. */
    List<Matcher> lines(final Pattern pattern)
    {
        final List<Matcher> found = new ArrayList<>();
        final String out = stdout();
        final int end = out.lastIndexOf('\n');
        if (end < 0)
        {
            return found;
        }
        for (final String line : out.substring(0, end).split("\n"))
        {
            final Matcher matcher = pattern.matcher(line);
            if (matcher.matches())
            {
                found.add(matcher);
            }
        }
        return found;
    }

    /** How many times {@code text} occurs in the process's stderr so far. */
    int countInStderr(final String text)
    {
        final String err = stderr();
        int count = 0;
        for (int at = err.indexOf(text); at >= 0; at = err.indexOf(text, at + text.length()))
        {
            count++;
        }
        return count;
    }

    /** SIGKILL (Process.destroyForcibly on Linux) and wait for the process to be gone. */
    void kill9()
    {
        stopRequested = true;
        process.destroyForcibly();
        waitForExit(KILL_TIMEOUT);
    }

    /** SIGTERM (Process.destroy on Linux) and wait for the exit code. */
    int terminate(final Duration timeout)
    {
        stopRequested = true;
        process.destroy();
        return waitForExit(timeout);
    }

    /** Waits, without signalling, for the process to exit by itself; returns its exit code. */
    int awaitExit(final Duration timeout)
    {
        stopRequested = true;
        return waitForExit(timeout);
    }

    private int waitForExit(final Duration timeout)
    {
        try
        {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS))
            {
                process.destroyForcibly();
                throw new AssertionError(label + " did not exit within " + timeout.toMillis() +
                    " ms (killed now)\n" + describe());
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            throw new AssertionError("interrupted waiting for " + label + " to exit", ex);
        }
        return process.exitValue();
    }

    /** True when the process is gone although this test never asked it to stop. */
    boolean exitedUnexpectedly()
    {
        return !stopRequested && !process.isAlive();
    }

    /** Everything the process printed on stdout so far. */
    String stdout()
    {
        return read(stdoutFile);
    }

    /** Everything the process logged on stderr so far. */
    String stderr()
    {
        return read(stderrFile);
    }

    /** The command, state and last lines of both logs: what an assertion message needs to diagnose a failure. */
    String describe()
    {
        final StringBuilder text = new StringBuilder();
        text.append("--- ").append(label).append(" (pid ").append(process.pid()).append(", ")
            .append(process.isAlive() ? "running" : "exit code " + process.exitValue()).append(")\n");
        text.append("command: ").append(String.join(" ", command.subList(command.indexOf("-cp") + 2,
            command.size()))).append('\n');
        text.append("stdout (").append(stdoutFile).append("):\n").append(tail(stdout(), 10));
        text.append("stderr (").append(stderrFile).append("):\n").append(tail(stderr(), 40));
        return text.toString();
    }

    /** Kills the process if it still runs. */
    @Override
    public void close()
    {
        if (process.isAlive())
        {
            kill9();
        }
    }

    @Override
    public String toString()
    {
        return label + "[pid " + process.pid() + "]";
    }

    private Matcher findLine(final Pattern pattern)
    {
        final String out = stdout();
        final int end = out.lastIndexOf('\n');
        if (end < 0)
        {
            return null;
        }
        for (final String line : out.substring(0, end).split("\n"))
        {
            final Matcher matcher = pattern.matcher(line);
            if (matcher.matches())
            {
                return matcher;
            }
        }
        return null;
    }

    private static List<String> groupNames(final Pattern pattern)
    {
        final List<String> names = new ArrayList<>();
        final Matcher matcher = Pattern.compile("\\(\\?<([a-zA-Z][a-zA-Z0-9]*)>").matcher(pattern.pattern());
        while (matcher.find())
        {
            names.add(matcher.group(1));
        }
        return names;
    }

    private static String read(final Path file)
    {
        try
        {
            return Files.exists(file) ? new String(Files.readAllBytes(file), StandardCharsets.UTF_8) : "";
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot read " + file, ex);
        }
    }

    private static String tail(final String text, final int lines)
    {
        final List<String> all = Arrays.asList(text.split("\n", -1));
        final int from = Math.max(0, all.size() - 1 - lines);
        final StringBuilder tail = new StringBuilder();
        if (from > 0)
        {
            tail.append("  ... ").append(from).append(" earlier lines\n");
        }
        for (final String line : all.subList(from, all.size()))
        {
            if (!line.isEmpty())
            {
                tail.append("  ").append(line).append('\n');
            }
        }
        return tail.toString();
    }
}
