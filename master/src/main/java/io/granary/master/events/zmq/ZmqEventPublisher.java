package io.granary.master.events.zmq;

import io.granary.common.Clock;
import io.granary.master.events.EventJournal;
import io.granary.master.events.KvEventRecord;
import io.granary.master.events.SnapshotSource;
import io.granary.proto.KvEventType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZFrame;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;
import org.zeromq.ZMsg;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * The optional publisher of the master's KV events in the framing routers already read from vLLM engines: a ZeroMQ
 * PUB socket sends each batch as a three-frame message (topic, 8-byte big-endian batch sequence, msgpack
 * {@code KVEventBatch}, see {@link VllmEventCodec}), and a ROUTER socket answers a replay request (an 8-byte
 * big-endian start sequence) with every buffered batch from there, each as (sequence, payload), then the end marker
 * (sequence -1, empty payload). Batch sequences start at 0 per master incarnation and have no gaps.
 *
 * <p>What the journal says that vLLM's events cannot, the publisher turns into what they can: a CLEARED of one
 * tenant, or falling behind the journal's buffer, becomes {@code AllBlocksCleared} followed by the present keys of
 * every tenant as {@code BlockStored} (a snapshot), then the events from where the snapshot left off.
 *
 * <p>Threading: one thread ("granary-master-events-zmq") owns both sockets, reads the journal and serves replays;
 * the metadata path never waits for it. {@link #close()} from any thread.
 */
public final class ZmqEventPublisher implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(ZmqEventPublisher.class);
    /** Most events in one batch. */
    static final int BATCH_MAX_EVENTS = 512;
    /** Most bytes of payload the replay buffer keeps, whatever the batch count. */
    static final long REPLAY_MAX_BYTES = 64L << 20;
    /** PUB high-water mark: messages queued per subscriber before ZeroMQ drops (subscribers then replay). */
    static final int SEND_HWM = 100_000;
    private static final long POLL_MS = 1;
    static final byte[] END_SEQUENCE = ByteBuffer.allocate(8).putLong(-1).array();

    /** What the publisher binds and keeps. */
    public static final class Settings
    {
        public String endpoint;
        /** Empty or null = no replay socket. */
        public String replayEndpoint;
        public String topic = "";
        public int replayBatches = 10_000;
    }

    private final EventJournal journal;
    private final SnapshotSource snapshots;
    private final Clock clock;
    private final byte[] topic;
    private final int replayBatches;
    private final ZContext context;
    private final ZMQ.Socket pub;
    private final ZMQ.Socket replay;
    private final String boundEndpoint;
    private final String boundReplayEndpoint;
    private final Thread thread;
    private final VllmEventCodec codec = new VllmEventCodec();
    private final ArrayDeque<Object[]> buffer = new ArrayDeque<>();
    private long bufferBytes;
    private long nextBatchSequence;
    private long cursor;
    private volatile boolean running = true;

    private final LongAdder batches = new LongAdder();
    private final LongAdder replays = new LongAdder();
    private final LongAdder resyncs = new LongAdder();

    /** Binds the sockets and starts publishing from the journal's sequence 0. @throws IllegalArgumentException */
    public ZmqEventPublisher(
        final EventJournal journal, final SnapshotSource snapshots, final Settings settings, final Clock clock)
    {
        this.journal = journal;
        this.snapshots = snapshots;
        this.clock = clock;
        this.topic = settings.topic.getBytes(StandardCharsets.UTF_8);
        this.replayBatches = settings.replayBatches;
        this.context = new ZContext(1);
        context.setLinger(0);
        try
        {
            pub = context.createSocket(SocketType.PUB);
            pub.setSndHWM(SEND_HWM);
            pub.bind(settings.endpoint);
            boundEndpoint = pub.getLastEndpoint();
            if (settings.replayEndpoint != null && !settings.replayEndpoint.isEmpty())
            {
                replay = context.createSocket(SocketType.ROUTER);
                // A replay answers with the whole buffer at once: ZeroMQ's default of 1000 queued messages per peer
                // would silently cut it short (end marker included). The buffer itself bounds what can queue.
                replay.setSndHWM(0);
                replay.bind(settings.replayEndpoint);
                boundReplayEndpoint = replay.getLastEndpoint();
            }
            else
            {
                replay = null;
                boundReplayEndpoint = null;
            }
        }
        catch (final ZMQException | IllegalArgumentException ex)
        {
            context.close();
            throw new IllegalArgumentException("cannot bind the ZeroMQ event publisher (--events-zmq-endpoint " +
                settings.endpoint + ", --events-zmq-replay-endpoint " + settings.replayEndpoint + "): " + ex, ex);
        }
        this.thread = new Thread(this::run, "granary-master-events-zmq");
        thread.setDaemon(true);
        thread.start();
        LOG.info("ZeroMQ KV-event publisher on {} (replay {}, topic '{}')", boundEndpoint,
            boundReplayEndpoint == null ? "off" : boundReplayEndpoint, settings.topic);
    }

    /** The PUB socket's address as bound (with the port picked for {@code *}). */
    public String endpoint()
    {
        return boundEndpoint;
    }

    /** The replay ROUTER socket's address as bound, or null. */
    public String replayEndpoint()
    {
        return boundReplayEndpoint;
    }

    private void run()
    {
        final ZMQ.Poller poller = replay == null ? null : context.createPoller(1);
        if (poller != null)
        {
            poller.register(replay, ZMQ.Poller.POLLIN);
        }
        while (running)
        {
            try
            {
                final boolean published = publishAvailable();
                if (replay != null)
                {
                    if (poller.poll(published ? 0 : POLL_MS) > 0)
                    {
                        serveReplays();
                    }
                }
                else if (!published)
                {
                    Thread.sleep(POLL_MS);
                }
            }
            catch (final InterruptedException ex)
            {
                break;
            }
            catch (final RuntimeException ex)
            {
                if (!running)
                {
                    break;
                }
                LOG.error("ZeroMQ event publishing failed; will retry", ex);
                sleepQuietly();
            }
        }
        if (poller != null)
        {
            poller.close();
        }
    }

    private static void sleepQuietly()
    {
        try
        {
            Thread.sleep(100);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /** Publishes the events written since the last call, at most one batch. @return whether a batch went. */
    private boolean publishAvailable()
    {
        VllmEventCodec.Batch batch = null;
        while (batch == null || batch.size() < BATCH_MAX_EVENTS)
        {
            final KvEventRecord e = journal.read(cursor);
            if (e == null)
            {
                break;
            }
            if (e == EventJournal.OVERWRITTEN)
            {
                publish(batch);
                resync("fell behind the event journal at sequence " + cursor);
                return true;
            }
            if (e.type() == KvEventType.KV_EVENT_CLEARED && !e.tenant().isEmpty())
            {
                publish(batch);
                resync("a CLEARED of tenant " + e.tenant() + " (RemoveAll)");
                return true;
            }
            if (batch == null)
            {
                batch = codec.batch(e.timestampMs());
            }
            switch (e.type())
            {
                case KV_EVENT_STORED:
                    batch.stored(e.tenant(), e.keyBytes(), e.groupId(), e.parentKeyBytes());
                    break;
                case KV_EVENT_REMOVED:
                    batch.removed(e.tenant(), e.keyBytes());
                    break;
                default:
                    batch.allCleared();
                    break;
            }
            cursor++;
        }
        return publish(batch);
    }

    /** AllBlocksCleared, then every present key, then the journal from where the scan began. */
    private void resync(final String why)
    {
        resyncs.increment();
        final long resumeAt = journal.nextSequence();
        LOG.info("ZeroMQ event publisher: {}; publishing AllBlocksCleared and the present keys", why);
        publish(codec.batch(clock.epochMillis()).allCleared());
        final VllmEventCodec.Batch[] current = {codec.batch(clock.epochMillis())};
        for (int shard = 0; shard < snapshots.shardCount(); shard++)
        {
            snapshots.scanShard(shard, null, (tenant, key, group, length, parent) ->
                current[0].stored(tenant, key, group, parent));
            if (current[0].size() >= BATCH_MAX_EVENTS)
            {
                publish(current[0]);
                current[0] = codec.batch(clock.epochMillis());
            }
        }
        publish(current[0]);
        cursor = resumeAt;
    }

    private boolean publish(final VllmEventCodec.Batch batch)
    {
        if (batch == null || batch.size() == 0)
        {
            return false;
        }
        final byte[] payload = batch.finish();
        final long sequence = nextBatchSequence++;
        final byte[] sequenceBytes = ByteBuffer.allocate(8).putLong(sequence).array();
        pub.sendMore(topic);
        pub.sendMore(sequenceBytes);
        pub.send(payload);
        batches.increment();
        if (replay != null)
        {
            buffer.addLast(new Object[]{sequence, payload});
            bufferBytes += payload.length;
            while (buffer.size() > replayBatches || bufferBytes > REPLAY_MAX_BYTES)
            {
                bufferBytes -= ((byte[])buffer.removeFirst()[1]).length;
            }
        }
        return true;
    }

    /** Answers every waiting replay request: [identity, "", start] → ([identity, "", seq, payload])*, end marker. */
    private void serveReplays()
    {
        ZMsg request;
        while ((request = ZMsg.recvMsg(replay, ZMQ.DONTWAIT)) != null)
        {
            try
            {
                final ZFrame[] frames = request.toArray(new ZFrame[0]);
                if (frames.length != 3 || frames[2].size() != 8)
                {
                    LOG.debug("ignored a malformed ZeroMQ replay request of {} frame(s)", frames.length);
                    continue;
                }
                final ZFrame identity = frames[0];
                final long start = ByteBuffer.wrap(frames[2].getData()).getLong();
                replays.increment();
                LOG.debug("ZeroMQ replay from batch {} ({} buffered)", start, buffer.size());
                for (final Object[] entry : buffer)
                {
                    if ((Long)entry[0] >= start)
                    {
                        replay.sendMore(identity.getData());
                        replay.sendMore(new byte[0]);
                        replay.sendMore(ByteBuffer.allocate(8).putLong((Long)entry[0]).array());
                        replay.send((byte[])entry[1]);
                    }
                }
                replay.sendMore(identity.getData());
                replay.sendMore(new byte[0]);
                replay.sendMore(END_SEQUENCE);
                replay.send(new byte[0]);
            }
            finally
            {
                request.destroy();
            }
        }
    }

    /** Batches sent on the PUB socket. */
    public long batches()
    {
        return batches.sum();
    }

    /** Replay requests answered. */
    public long replays()
    {
        return replays.sum();
    }

    /** Times the publisher sent AllBlocksCleared and the present keys instead of events. */
    public long resyncs()
    {
        return resyncs.sum();
    }

    @Override
    public void close()
    {
        if (!running)
        {
            return;
        }
        running = false;
        thread.interrupt();
        try
        {
            thread.join(TimeUnit.SECONDS.toMillis(2));
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        context.close();
    }
}
