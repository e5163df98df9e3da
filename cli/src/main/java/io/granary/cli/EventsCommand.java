package io.granary.cli;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryException;
import io.granary.client.events.KvEvent;
import io.granary.client.events.KvEventListener;
import io.granary.client.events.KvEventSubscriber;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code granary events}: follows the master's KV events (docs/events.md) and prints one line per event, for
 * operators (what is the pool storing and dropping, and why). Runs until SIGINT/SIGTERM, {@code --count} events
 * or {@code --duration}; reconnects by itself when the master goes away.
 */
@Command(
    name = "events",
    mixinStandardHelpOptions = true,
    versionProvider = Granary.Version.class,
    showDefaultValues = true,
    description = {
        "Print the master's KV events (stored, removed, cleared) as they happen, one per line: "
            + "'#SEQ TYPE [REASON] TENANT KEY ...'. Lines starting with '--' report resets and resyncs; "
            + "disconnections go to stderr and are retried."})
final class EventsCommand implements Callable<Integer>
{
    @Spec
    private CommandSpec spec;

    @Mixin
    private ClientOptions clientOptions;

    @Option(names = "--all-tenants", description = "Every tenant's events (default: --tenant only).")
    private boolean allTenants;

    @Option(names = "--from", paramLabel = "SEQ", defaultValue = "-1",
        description = "First sequence: -1 = from now on, 0 = everything the master holds (its whole epoch, or a "
            + "snapshot of the present keys), N = resume.")
    private long from;

    @Option(names = "--epoch", paramLabel = "EPOCH", defaultValue = "0",
        description = "The epoch --from belongs to (printed in the '--' lines); 0 = the master's current one.")
    private long epoch;

    @Option(names = "--snapshot", description = "Start with a snapshot of the present keys.")
    private boolean snapshot;

    @Option(names = "--count", paramLabel = "N", defaultValue = "0",
        description = "Exit 0 after N events (snapshot entries count); 0 = no limit.")
    private long count;

    @Option(names = "--duration", paramLabel = "DURATION", defaultValue = "0s",
        description = "Exit 0 after this long; 0s = no limit.")
    private Duration duration;

    @Option(names = "--json", description = "One JSON object per event instead of text.")
    private boolean json;

    @Override
    public Integer call() throws InterruptedException
    {
        Logging.setLevel(spec, clientOptions.logLevel);
        if (count < 0 || from < -1 || duration.isNegative())
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--count and --duration must not be negative, --from must be >= -1");
        }
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final ClientConfig config = clientOptions.config(spec.commandLine(), clientOptions.master);
        final CountDownLatch done = new CountDownLatch(1);
        final AtomicLong printed = new AtomicLong();
        final KvEventSubscriber.Options options = new KvEventSubscriber.Options()
            .allTenants(allTenants).fromSequence(from).epoch(epoch).snapshot(snapshot);
        final Termination termination = Termination.install();
        final Thread signals = new Thread(() ->
        {
            try
            {
                termination.await();
                done.countDown();
            }
            catch (final InterruptedException ex)
            {
                // exiting for another reason
            }
        }, "granary-events-signals");
        signals.setDaemon(true);
        signals.start();
        final KvEventSubscriber subscriber = KvEventSubscriber.start(config, options, new KvEventListener()
        {
            @Override
            public void onEvent(final KvEvent event)
            {
                if (done.getCount() == 0)
                {
                    return;
                }
                out.println(json ? json(event) : text(event));
                out.flush();
                if (count > 0 && printed.incrementAndGet() >= count)
                {
                    done.countDown();
                }
            }

            @Override
            public void onReset(final ResetCause cause, final long newEpoch)
            {
                if (!json)
                {
                    out.println("-- reset: " + (cause == ResetCause.SNAPSHOT ? "snapshot of the present keys follows" :
                        "new master epoch, everything known before is void") + " (epoch " + newEpoch + ")");
                    out.flush();
                }
            }

            @Override
            public void onSynced(final long syncedEpoch, final long nextSequence)
            {
                if (!json)
                {
                    out.println("-- in sync at sequence " + nextSequence + " (epoch " + syncedEpoch + ")");
                    out.flush();
                }
            }

            @Override
            public void onDisconnected(final GranaryException cause, final boolean willRetry)
            {
                err.println((willRetry ? "warning: " : "error: ") + cause.getMessage() +
                    (willRetry ? " (reconnecting)" : ""));
                err.flush();
                if (!willRetry)
                {
                    done.countDown();
                }
            }
        });
        try
        {
            if (duration.isZero())
            {
                done.await();
            }
            else
            {
                done.await(duration.toNanos(), TimeUnit.NANOSECONDS);
            }
        }
        finally
        {
            subscriber.close();
            signals.interrupt();
            out.flush();
        }
        if (subscriber.failure() != null)
        {
            throw ClientOptions.withHint(subscriber.failure(), clientOptions.master);
        }
        return 0;
    }

    static String text(final KvEvent e)
    {
        final StringBuilder line = new StringBuilder(e.fromSnapshot() ? "snapshot" : "#" + e.sequence());
        line.append(' ').append(e.type());
        if (e.reason() != KvEvent.Reason.NONE)
        {
            line.append(' ').append(e.reason());
        }
        line.append(' ').append(e.tenant().isEmpty() ? "*" : e.tenant());
        if (e.type() != KvEvent.Type.CLEARED)
        {
            line.append(' ').append(e.key()).append(' ').append(e.valueLength()).append('B').append(' ')
                .append(e.medium());
            if (e.groupId() != null)
            {
                line.append(" group=").append(e.groupId()).append(e.groupComplete() ? " (group complete)" : "");
            }
            if (e.parentKey() != null)
            {
                line.append(" parent=").append(e.parentKey());
            }
        }
        return line.toString();
    }

    static String json(final KvEvent e)
    {
        final Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("sequence", e.sequence());
        fields.put("type", e.type().name());
        fields.put("reason", e.reason().name());
        fields.put("tenant", e.tenant());
        fields.put("key", e.key());
        fields.put("group", e.groupId());
        fields.put("groupComplete", e.groupComplete());
        fields.put("parent", e.parentKey());
        fields.put("medium", e.medium());
        fields.put("valueLength", e.valueLength());
        fields.put("timestampMs", e.timestampMs());
        fields.put("snapshot", e.fromSnapshot());
        return BenchCommand.jsonObject(fields);
    }
}
