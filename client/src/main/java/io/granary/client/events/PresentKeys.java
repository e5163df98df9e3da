package io.granary.client.events;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The keys the master holds, per tenant, kept from a {@link KvEventSubscriber}'s events: what a router consults.
 * Thread safe; {@link #isSynced()} tells whether the view is complete (false during a snapshot).
 */
public final class PresentKeys implements KvEventListener
{
    private final Map<String, Set<String>> byTenant = new HashMap<>();
    private boolean synced;
    private long nextSequence = -1;

    @Override
    public synchronized void onEvent(final KvEvent event)
    {
        switch (event.type())
        {
            case STORED:
                byTenant.computeIfAbsent(event.tenant(), t -> new HashSet<>()).add(event.key());
                break;
            case REMOVED:
                final Set<String> keys = byTenant.get(event.tenant());
                if (keys != null)
                {
                    keys.remove(event.key());
                }
                break;
            default:
                if (event.tenant().isEmpty())
                {
                    byTenant.clear();
                }
                else
                {
                    byTenant.remove(event.tenant());
                }
                break;
        }
        if (!event.fromSnapshot())
        {
            nextSequence = event.sequence() + 1;
        }
    }

    @Override
    public synchronized void onReset(final ResetCause cause, final long epoch)
    {
        byTenant.clear();
        synced = false;
    }

    @Override
    public synchronized void onSynced(final long epoch, final long nextSequence)
    {
        synced = true;
        this.nextSequence = nextSequence;
        notifyAll();
    }

    /** Whether {@code key} of {@code tenant} is present. */
    public synchronized boolean contains(final String tenant, final String key)
    {
        final Set<String> keys = byTenant.get(tenant);
        return keys != null && keys.contains(key);
    }

    /** A copy of the present keys of {@code tenant}. */
    public synchronized Set<String> keys(final String tenant)
    {
        final Set<String> keys = byTenant.get(tenant);
        return keys == null ? new HashSet<>() : new HashSet<>(keys);
    }

    /** Keys present, all tenants. */
    public synchronized int size()
    {
        int n = 0;
        for (final Set<String> keys : byTenant.values())
        {
            n += keys.size();
        }
        return n;
    }

    /** The view was complete at the last {@link #onSynced} and has followed every event since. */
    public synchronized boolean isSynced()
    {
        return synced;
    }

    /** The sequence after the last change applied (-1 before any). */
    public synchronized long nextSequence()
    {
        return nextSequence;
    }
}
