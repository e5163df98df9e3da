package io.granary.it;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.PutOptions;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The client process of the chaos test: puts fresh keys (two replicas) and reads back its own, checking every
 * byte, until it is killed (keeping its 40 newest keys). Prints {@code ok <key>} after each successful put and
 * {@code WRONG <what>} for a read that returned wrong bytes. Arguments: master address, key prefix, seed.
 */
public final class ChaosClient
{
    /** Keys kept; older ones are removed, so the pool never fills up and evicts the test's objects. */
    private static final int LIVE_KEYS = 40;

    private ChaosClient()
    {
    }

    public static void main(final String[] args)
    {
        final String prefix = args[1];
        final SplittableRandom random = new SplittableRandom(Long.parseLong(args[2]));
        final List<String> mine = new ArrayList<>();
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(args[0])
            .rpcTimeout(Duration.ofSeconds(3))
            .transferTimeout(Duration.ofSeconds(2))
            .connectTimeout(Duration.ofSeconds(1))
            .reconnectBackoff(Duration.ofMillis(50))
            .reconnectBackoffMax(Duration.ofMillis(500))
            .build()))
        {
            for (int n = 0; ; n++)
            {
                try
                {
                    if (mine.isEmpty() || random.nextInt(3) > 0)
                    {
                        final String key = Workload.key(prefix, 0, n, random);
                        client.put(key, ByteBuffer.wrap(Pages.content(Workload.page(key), Workload.SEED)),
                            PutOptions.builder().replicas(2).build());
                        mine.add(key);
                        System.out.println("ok " + key);
                        if (mine.size() > LIVE_KEYS)
                        {
                            client.remove(mine.remove(0), true);
                        }
                    }
                    else
                    {
                        final String key = mine.get(random.nextInt(mine.size()));
                        final String wrong = Workload.check(key, ByteBuffer.wrap(client.get(key)));
                        if (wrong != null)
                        {
                            System.out.println("WRONG " + wrong);
                        }
                    }
                    System.out.flush();
                }
                catch (final GranaryException ex)
                {
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
                }
            }
        }
    }
}
