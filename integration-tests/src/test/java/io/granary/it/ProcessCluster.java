package io.granary.it;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import org.junit.jupiter.api.TestInfo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A Granary cluster of separate JVMs on loopback for one test: a master and storage nodes started through
 * the real {@code granary} command with ephemeral ports, clients in the test JVM, and client commands run
 * as processes. Logs go to {@code target/it-logs/<test class>/<test method>/}. {@link #close()} closes the
 * clients and kills every process still running. Use from the test thread.
 */
final class ProcessCluster implements AutoCloseable
{
    /** {@code granary master ready grpc=H:P lookup=H:P admin=H:P}. */
    static final Pattern MASTER_READY = Pattern.compile(
        "granary master ready grpc=(?<grpc>\\S+) lookup=(?<lookup>\\S+) admin=(?<admin>\\S+)");
    /** {@code granary node ready name=... endpoint=H:P node-id=... segments=N segment-size=B admin=H:P}. */
    static final Pattern NODE_READY = Pattern.compile(
        "granary node ready name=(?<name>\\S+) endpoint=(?<endpoint>\\S+) node-id=(?<nodeId>\\S+) " +
            "segments=(?<segments>\\d+) segment-size=(?<segmentSize>\\d+) admin=(?<admin>\\S+)");

    static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    static final Duration CLI_TIMEOUT = Duration.ofSeconds(60);

    /** Short commands start faster with the C1 compiler only and the serial collector. */
    private static final List<String> CLI_JVM_FLAGS = List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    private final Path logDir;
    private final List<ServiceProcess> processes = new ArrayList<>();
    private final List<GranaryClient> clients = new ArrayList<>();
    private final Map<String, Integer> starts = new HashMap<>();
    private final Map<String, String[]> nodeFlags = new HashMap<>();
    private String[] masterFlags = new String[0];
    private ServiceProcess master;

    /** A cluster with no process yet; its logs go to a fresh directory named after the test. */
    ProcessCluster(final TestInfo test)
    {
        final String className = test.getTestClass().map(Class::getSimpleName).orElse("unknown");
        final String methodName = test.getTestMethod().map(m -> m.getName()).orElse("unknown");
        this.logDir = Path.of(System.getProperty("granary.it.logs", "target/it-logs"), className, methodName)
            .toAbsolutePath();
        deleteRecursively(logDir);
    }

    Path logDir()
    {
        return logDir;
    }

    /**
     * Starts the master on loopback with ephemeral ports (any of {@code flags} overrides a default, e.g.
     * {@code "--port", "50051"}) and waits for its ready line.
     */
    ServiceProcess startMaster(final String... flags)
    {
        return launchMaster(flags).awaitReady(MASTER_READY, START_TIMEOUT);
    }

    /** Starts the master without waiting for it; {@link #masterAddress()} is known once it is ready. */
    ServiceProcess launchMaster(final String... flags)
    {
        masterFlags = flags.clone();
        final Map<String, String> defaults = new LinkedHashMap<>();
        defaults.put("--host", "127.0.0.1");
        defaults.put("--port", "0");
        defaults.put("--lookup-port", "0");
        defaults.put("--admin-port", "0");
        master = launch("master", List.of(), "master", defaults, flags);
        return master;
    }

    /**
     * Starts the master again (after a kill) on the ports the last one had, with the same flags, and waits for
     * its ready line.
     */
    ServiceProcess restartMaster()
    {
        final ServiceProcess previous = master();
        final List<String> flags = new ArrayList<>(List.of(masterFlags));
        flags.addAll(List.of("--port", port(previous.ready("grpc")), "--lookup-port", port(previous.ready("lookup")),
            "--admin-port", port(previous.ready("admin"))));
        final Map<String, String> defaults = new LinkedHashMap<>();
        defaults.put("--host", "127.0.0.1");
        master = launch("master", List.of(), "master", defaults, flags.toArray(new String[0]));
        return master.awaitReady(MASTER_READY, START_TIMEOUT);
    }

    private static String port(final String hostPort)
    {
        return hostPort.substring(hostPort.lastIndexOf(':') + 1);
    }

    /** A TCP port nothing listens on right now, for a process that must keep its port across restarts. */
    static int freePort()
    {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            return socket.getLocalPort();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * Starts storage nodes on fixed free ports (so that a restart keeps each node's endpoint), all at once, and
     * waits for every ready line; {@code flags} apply to each.
     */
    List<ServiceProcess> startNodesOnFixedPorts(final List<String> names, final String... flags)
    {
        final List<ServiceProcess> nodes = new ArrayList<>();
        for (final String name : names)
        {
            final List<String> all = new ArrayList<>(List.of(flags));
            all.addAll(List.of("--port", Integer.toString(freePort())));
            nodeFlags.put(name, all.toArray(new String[0]));
            nodes.add(launchNode(masterAddress(), name, nodeFlags.get(name)));
        }
        for (final ServiceProcess node : nodes)
        {
            node.awaitReady(NODE_READY, START_TIMEOUT);
        }
        return nodes;
    }

    /** Starts node {@code name} again with the flags (and port) of {@link #startNodesOnFixedPorts}; no wait. */
    ServiceProcess relaunchNode(final String name)
    {
        final String[] flags = nodeFlags.get(name);
        if (flags == null)
        {
            throw new IllegalStateException("node " + name + " was not started on a fixed port");
        }
        return launchNode(masterAddress(), name, flags);
    }

    /** Starts {@code mainClass} (on the test class path) with {@code args}, without waiting. */
    ServiceProcess startProcess(final String name, final String mainClass, final String... args)
    {
        final ServiceProcess process =
            ServiceProcess.start(label(name), mainClass, CLI_JVM_FLAGS, List.of(args), logDir);
        processes.add(process);
        return process;
    }

    /** The running master (the last one started). */
    ServiceProcess master()
    {
        if (master == null)
        {
            throw new IllegalStateException("no master started");
        }
        return master;
    }

    /** host:port of the master's gRPC port, from its ready line. */
    String masterAddress()
    {
        return master().ready("grpc");
    }

    /** The running master's admin {@code /status} document. */
    String masterStatus() throws IOException, InterruptedException
    {
        return java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                java.net.URI.create("http://" + master().ready("admin") + "/status"))
                .timeout(Duration.ofSeconds(10)).build(),
            java.net.http.HttpResponse.BodyHandlers.ofString()).body();
    }

    /**
     * Whether the master {@code client} talks to is ready and holds {@code objects} objects: the condition a test
     * awaits after restarting a master (false while it is not up yet).
     */
    static boolean readyWith(final GranaryClient client, final long objects)
    {
        try
        {
            return client.clusterStatus().rebuild().ready() && client.clusterStatus().objects() == objects;
        }
        catch (final RuntimeException ex)
        {
            return false; // not up yet
        }
    }

    /** Starts a storage node named {@code name} against the master and waits for its ready line. */
    ServiceProcess startNode(final String name, final String... flags)
    {
        return launchNode(masterAddress(), name, flags).awaitReady(NODE_READY, START_TIMEOUT);
    }

    /** Starts several nodes at once (their JVMs start in parallel) and waits for every ready line. */
    List<ServiceProcess> startNodes(final String... names)
    {
        final List<ServiceProcess> nodes = new ArrayList<>();
        for (final String name : names)
        {
            nodes.add(launchNode(masterAddress(), name));
        }
        for (final ServiceProcess node : nodes)
        {
            node.awaitReady(NODE_READY, START_TIMEOUT);
        }
        return nodes;
    }

    /**
     * Starts a storage node for the master at {@code masterAddress} without waiting: one 256 MiB segment,
     * heartbeats every 500 ms, ephemeral transfer and admin ports; {@code flags} override these.
     */
    ServiceProcess launchNode(final String masterAddress, final String name, final String... flags)
    {
        final Map<String, String> defaults = new LinkedHashMap<>();
        defaults.put("--master", masterAddress);
        defaults.put("--host", "127.0.0.1");
        defaults.put("--port", "0");
        defaults.put("--segment-size", "256m");
        defaults.put("--name", name);
        defaults.put("--heartbeat-interval", "500ms");
        defaults.put("--admin-port", "0");
        return launch(name, List.of(), "node", defaults, flags);
    }

    /** A client of the master in this JVM; closed by {@link #close()}. */
    GranaryClient newClient()
    {
        return newClient(UnaryOperator.identity());
    }

    /** A client of the master in this JVM with settings of the test's choosing; closed by {@link #close()}. */
    GranaryClient newClient(final UnaryOperator<ClientConfig.Builder> settings)
    {
        final GranaryClient client = GranaryClient.connect(settings.apply(ClientConfig.builder()
            .masterAddress(masterAddress()))
            .build());
        clients.add(client);
        return client;
    }

    /** Runs {@code granary <args>} to completion (at most a minute) and returns what it printed. */
    CliResult cli(final String... args)
    {
        final String label = label("cli-" + (args.length == 0 ? "none" : args[0]));
        final ServiceProcess process = ServiceProcess.start(label, CLI_JVM_FLAGS, List.of(args), logDir);
        processes.add(process);
        final int exitCode = process.awaitExit(CLI_TIMEOUT);
        return new CliResult(exitCode, process.stdout(), process.stderr(), process.uptime());
    }

    /**
     * Closes the clients and SIGKILLs every process still running (nodes before the master); reports any
     * process that died without being asked to on stderr, with its log tail.
     */
    @Override
    public void close()
    {
        for (final GranaryClient client : clients)
        {
            try
            {
                client.close();
            }
            catch (final RuntimeException ex)
            {
                System.err.println("ProcessCluster: closing a client failed: " + ex);
            }
        }
        final List<ServiceProcess> reversed = new ArrayList<>(processes);
        Collections.reverse(reversed);
        for (final ServiceProcess process : reversed)
        {
            if (process.exitedUnexpectedly())
            {
                System.err.println("ProcessCluster: " + process.label() + " died during the test\n" +
                    process.describe());
            }
            process.close();
        }
    }

    private ServiceProcess launch(
        final String name, final List<String> jvmFlags, final String command, final Map<String, String> defaults,
        final String... overrides)
    {
        final List<String> args = new ArrayList<>();
        args.add(command);
        args.addAll(merge(defaults, overrides));
        final ServiceProcess process = ServiceProcess.start(label(name), jvmFlags, args, logDir);
        processes.add(process);
        return process;
    }

    /** "node-1" the first time, "node-1.2" the second, so a restarted process keeps its own log files. */
    private String label(final String name)
    {
        final int n = starts.merge(name, 1, Integer::sum);
        return n == 1 ? name : name + "." + n;
    }

    /** The defaults with every {@code --flag [value]} of {@code overrides} replacing or adding to them. */
    static List<String> merge(final Map<String, String> defaults, final String... overrides)
    {
        final Map<String, String> flags = new LinkedHashMap<>(defaults);
        for (int i = 0; i < overrides.length; i++)
        {
            final String flag = overrides[i];
            if (!flag.startsWith("--"))
            {
                throw new IllegalArgumentException("expected a --flag at position " + i + ", was '" + flag + "'");
            }
            final boolean hasValue = i + 1 < overrides.length && !overrides[i + 1].startsWith("--");
            flags.put(flag, hasValue ? overrides[++i] : null);
        }
        final List<String> args = new ArrayList<>();
        for (final Map.Entry<String, String> flag : flags.entrySet())
        {
            args.add(flag.getKey());
            if (flag.getValue() != null)
            {
                args.add(flag.getValue());
            }
        }
        return args;
    }

    private static void deleteRecursively(final Path dir)
    {
        if (!Files.exists(dir))
        {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir))
        {
            for (final Path path : (Iterable<Path>)paths.sorted(Comparator.reverseOrder())::iterator)
            {
                Files.delete(path);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot clear " + dir, ex);
        }
    }

    /** What a client command printed and how it exited. */
    record CliResult(int exitCode, String stdout, String stderr, Duration elapsed)
    {
        @Override
        public String toString()
        {
            return "exit code " + exitCode + " after " + elapsed.toMillis() + " ms\nstdout:\n" + stdout +
                "stderr:\n" + stderr;
        }
    }
}
