package io.granary.client.events;

import io.granary.client.GranaryException;

/**
 * What a {@link KvEventSubscriber} tells its user, on the subscriber's one thread, in order. A view of the present
 * keys built from these calls ({@link PresentKeys} is one) is exact after every {@link #onSynced}.
 */
public interface KvEventListener
{
    /** Why a view must be rebuilt. */
    enum ResetCause
    {
        /** A snapshot follows: the master no longer buffers what was missed, or a fresh start asked for one. */
        SNAPSHOT,
        /** Another master incarnation: its sequence numbers are new and nothing known before holds. */
        EPOCH_CHANGED
    }

    /** A change (or, with {@link KvEvent#fromSnapshot()}, a present key of a snapshot), in sequence order. */
    void onEvent(KvEvent event);

    /** Forget every key of the subscription's scope; snapshot entries or the new epoch's events follow. */
    default void onReset(final ResetCause cause, final long epoch)
    {
    }

    /** The view is complete as of {@code nextSequence}: after a snapshot, and after every (re)connection. */
    default void onSynced(final long epoch, final long nextSequence)
    {
    }

    /** The stream broke; the subscriber reconnects by itself (from where it was) unless the cause is permanent. */
    default void onDisconnected(final GranaryException cause, final boolean willRetry)
    {
    }
}
