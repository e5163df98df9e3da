package io.granary.client.internal;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Capped exponential backoff with jitter: every failure doubles the delay up to the cap, each delay is drawn
 * from [d/2, d] so that many clients of one restarted master do not retry in step, and a success starts over.
 * Thread safe.
 */
public final class Backoff
{
    private final long initialNs;
    private final long maxNs;
    private long currentNs;

    public Backoff(final long initialNs, final long maxNs)
    {
        this.initialNs = Math.max(1, initialNs);
        this.maxNs = Math.max(this.initialNs, maxNs);
        this.currentNs = this.initialNs;
    }

    /** The pause before the next attempt after a failure. */
    public synchronized long nextDelayNs()
    {
        final long delay = currentNs;
        currentNs = Math.min(maxNs, currentNs * 2);
        return delay / 2 + ThreadLocalRandom.current().nextLong(delay - delay / 2 + 1);
    }

    /** A success: the next failure starts from the initial delay again. */
    public synchronized void reset()
    {
        currentNs = initialNs;
    }
}
