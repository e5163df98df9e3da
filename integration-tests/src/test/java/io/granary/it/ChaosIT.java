package io.granary.it;

import io.granary.client.ClusterStatus;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.PutOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The chaos suite: a master and three storage nodes as processes, a client process and a mixed workload of four
 * threads in this JVM (two replicas, values of 4 KiB to 1 MiB whose every byte is checked), and a fixed schedule of
 * faults, one at a time: kill -9 of a node, of the master and of the client process, and SIGSTOP of a node shorter
 * and longer than the node TTL. After every master restart and at the end, every object that must still exist
 * (a replica on a node incarnation that is still alive) is read back. Prints one summary line and fails on any
 * wrong read, lost complete object or hang.
 *
 * <p>{@code -Dgranary.chaos.rounds=N} runs N faults (default 16: two to three minutes on two loaded cores; pass it to
 * failsafe as {@code mvn verify -Dgranary.chaos.rounds=100} for a longer run).
 */
class ChaosIT
{
    private static final int ROUNDS = Integer.getInteger("granary.chaos.rounds", 16);
    private static final Duration RECOVERY = Duration.ofSeconds(90);
    private static final String NODE_TTL = "4s";
    private static final long SHORT_STALL_MS = 2_500;   // above the client's 2 s transfer timeout, below the TTL
    private static final long LONG_STALL_MS = 7_000;    // above the node TTL: the master expels the node
    private static final Pattern OK_LINE = Pattern.compile("ok (\\S+)");
    private static final Pattern WRONG_LINE = Pattern.compile("WRONG (.*)");

    private enum Fault
    {
        NODE_KILL, MASTER_KILL, NODE_STALL_SHORT, CLIENT_KILL, NODE_STALL_LONG
    }

    private static final Fault[] SCHEDULE = {
        Fault.NODE_KILL, Fault.MASTER_KILL, Fault.NODE_STALL_SHORT, Fault.CLIENT_KILL,
        Fault.NODE_STALL_LONG, Fault.NODE_KILL, Fault.MASTER_KILL, Fault.CLIENT_KILL};

    private int kills;
    private int stalls;
    private int expulsions;
    private int lost;
    private int wrong;
    private int verified;
    private final List<String> problems = new ArrayList<>();

    @Test
    @Timeout(value = 900, unit = TimeUnit.SECONDS)
    void shouldNeverReadWrongBytesLoseACompleteObjectOrHangUnderKillsAndStalls(final TestInfo test)
    {
        final long startNs = System.nanoTime();
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            cluster.startMaster("--node-ttl", NODE_TTL, "--heartbeat-interval", "500ms", "--put-discard-timeout", "3s",
                "--put-release-timeout", "6s", "--ready-after-nodes", "3", "--eviction-high-watermark", "0.95");
            final List<String> names = List.of("node-0", "node-1", "node-2");
            final List<ServiceProcess> nodes = new ArrayList<>(cluster.startNodesOnFixedPorts(names,
                "--segment-size", "192m", "--pre-touch", "false", "--reconnect-backoff", "50ms",
                "--reconnect-backoff-max", "500ms"));
            final GranaryClient client = cluster.newClient(b -> b.rpcTimeout(Duration.ofSeconds(3))
                .transferTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofSeconds(1))
                .reconnectBackoff(Duration.ofMillis(50)).reconnectBackoffMax(Duration.ofMillis(500)));
            final Workload.Generations generations = new Workload.Generations();
            nodes.forEach(n -> generations.of(n.ready("endpoint")));
            final Workload workload = new Workload(client, cluster.masterAddress(), "w", 4, 40,
                PutOptions.builder().replicas(2).build(), generations, 60_000);
            final List<ServiceProcess> clientProcesses = new ArrayList<>();
            clientProcesses.add(startClientProcess(cluster, 0));
            workload.start();

            for (int round = 0; round < ROUNDS; round++)
            {
                workload.awaitOps(40, RECOVERY);
                final Fault fault = SCHEDULE[round % SCHEDULE.length];
                final int victim = (round * 2 + 1) % nodes.size();
                switch (fault)
                {
                    case NODE_KILL:
                        killNode(cluster, client, nodes, victim, generations);
                        break;
                    case MASTER_KILL:
                        killMaster(cluster, client, workload);
                        break;
                    case NODE_STALL_SHORT:
                        stall(cluster, client, nodes.get(victim), SHORT_STALL_MS, generations);
                        break;
                    case NODE_STALL_LONG:
                        stall(cluster, client, nodes.get(victim), LONG_STALL_MS, generations);
                        break;
                    default:
                        clientProcesses.get(clientProcesses.size() - 1).kill9();
                        kills++;
                        clientProcesses.add(startClientProcess(cluster, clientProcesses.size()));
                        break;
                }
            }
            workload.awaitOps(40, RECOVERY);
            workload.stop();
            clientProcesses.get(clientProcesses.size() - 1).kill9();
            kills++;

            awaitHealthy(cluster, client);
            check(workload.verifyBook(Duration.ofSeconds(60)), "end");
            final int clientKeysChecked = checkClientProcessKeys(client, clientProcesses);
            final long hangs = workload.hangs.get();
            wrong += workload.wrongReads.get();
            problems.addAll(workload.problems());

            System.out.printf(Locale.ROOT, "chaos: %d kills, %d wrong reads, %d lost complete objects, %d hangs%n",
                kills, wrong, lost, hangs);
            System.out.printf(Locale.ROOT, "chaos details: %d faults in %.1f s: %d kills (nodes, masters, client " +
                    "processes), %d stalls (%d expelled by the master); workload %s; %d complete objects " +
                    "verified after master restarts and at the end; %d objects of the client processes re-read%n",
                ROUNDS, secondsSince(startNs), kills, stalls, expulsions, workload.summary(), verified,
                clientKeysChecked);
            assertThat(wrong).as("wrong reads: " + problems).isZero();
            assertThat(lost).as("lost complete objects: " + problems).isZero();
            assertThat(hangs).as("hangs: " + problems).isZero();
            assertThat(workload.putsOk.get()).as("puts that succeeded").isPositive();
        }
    }

    private static ServiceProcess startClientProcess(final ProcessCluster cluster, final int incarnation)
    {
        return cluster.startProcess("chaos-client", ChaosClient.class.getName(), cluster.masterAddress(),
            "c" + incarnation + "-", Long.toString(Workload.SEED + incarnation));
    }

    private void killNode(
        final ProcessCluster cluster, final GranaryClient client, final List<ServiceProcess> nodes, final int victim,
        final Workload.Generations generations)
    {
        final ServiceProcess node = nodes.get(victim);
        final String name = "node-" + victim;
        node.kill9();
        generations.bump(node.ready("endpoint")); // after the process is gone: see Workload.record
        kills++;
        Await.until(RECOVERY, () -> !nodeNames(client).contains(name),
            () -> "the master to drop " + name + "\n" + cluster.master().describe());
        final ServiceProcess reborn = cluster.relaunchNode(name)
            .awaitReady(ProcessCluster.NODE_READY, ProcessCluster.START_TIMEOUT);
        nodes.set(victim, reborn);
        awaitHealthy(cluster, client);
    }

    private void killMaster(final ProcessCluster cluster, final GranaryClient client, final Workload workload)
    {
        cluster.master().kill9();
        kills++;
        cluster.restartMaster();
        awaitHealthy(cluster, client);
        // Everything complete before the kill that still has a live replica must be readable now.
        check(workload.verifyBook(Duration.ofSeconds(60)), "after master restart " + kills);
    }

    private void stall(
        final ProcessCluster cluster, final GranaryClient client, final ServiceProcess node, final long stallMs,
        final Workload.Generations generations)
    {
        final ServiceProcess master = cluster.master();
        final String name = node.ready("name");
        final int expiredBefore = master.countInStderr("node expired: " + name + " ");
        node.pause();
        stalls++;
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(stallMs)); // the fault itself: the node stays frozen
        node.resume();
        if (master.countInStderr("node expired: " + name + " ") > expiredBefore)
        {
            // The master dropped the node's replicas; it comes back with an empty ledger.
            generations.bump(node.ready("endpoint"));
            expulsions++;
        }
        awaitHealthy(cluster, client);
    }

    /** Waits until the master serves, is ready (all three nodes reported) and lists three nodes. */
    private static void awaitHealthy(final ProcessCluster cluster, final GranaryClient client)
    {
        Await.until(RECOVERY, () ->
        {
            try
            {
                final ClusterStatus status = client.clusterStatus();
                return status.rebuild().ready() && status.nodes().size() == 3 && status.segments().size() == 3;
            }
            catch (final GranaryException ex)
            {
                return false;
            }
        }, () -> "the cluster to be whole again\n" + cluster.master().describe());
    }

    private void check(final Workload.Verification verification, final String when)
    {
        verified += verification.checked();
        lost += verification.lost();
        wrong += verification.wrong();
        for (final String problem : verification.problems())
        {
            problems.add(when + ": " + problem);
        }
    }

    /** Reads back what the client processes put (bytes checked; their keys may be gone) and counts WRONG lines. */
    private int checkClientProcessKeys(final GranaryClient client, final List<ServiceProcess> processes)
    {
        int checked = 0;
        for (final ServiceProcess process : processes)
        {
            for (final Matcher wrongLine : process.lines(WRONG_LINE))
            {
                wrong++;
                problems.add(process.label() + ": WRONG READ " + wrongLine.group(1));
            }
            for (final Matcher ok : process.lines(OK_LINE))
            {
                final String key = ok.group(1);
                try
                {
                    final String problem = Workload.check(key, ByteBuffer.wrap(client.get(key)));
                    checked++;
                    if (problem != null)
                    {
                        wrong++;
                        problems.add("WRONG READ " + problem);
                    }
                }
                catch (final GranaryException ex)
                {
                    // removed by its process, or lost with a node: only wrong bytes count here
                }
            }
        }
        return checked;
    }

    private static List<String> nodeNames(final GranaryClient client)
    {
        try
        {
            return client.clusterStatus().nodes().stream().map(ClusterStatus.Node::nodeName).toList();
        }
        catch (final GranaryException ex)
        {
            return List.of("?");
        }
    }

    private static double secondsSince(final long startNs)
    {
        return (System.nanoTime() - startNs) / 1e9;
    }
}
