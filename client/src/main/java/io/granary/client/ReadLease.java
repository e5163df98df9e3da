package io.granary.client;

/**
 * A key that {@link GranaryClient#probeBatchForRead} selected and leased, together with the replica list the master
 * answered in the same round trip. {@link GranaryClient#readBatchInto} reads it with that list, without asking the
 * master again, while enough of its read lease is left (the master keeps the extent as it was until the lease ends);
 * after that it looks the key up afresh, as {@link GranaryClient#getBatchInto} does. Immutable; it belongs to the
 * client that made it.
 */
public interface ReadLease
{
    /** The leased key. */
    String key();

    /** The value's length in bytes (0 when the master sent no replica list, see {@link #usable()}). */
    long length();

    /**
     * Whether a read started now uses the lease's replica list: the master sent one, and at least half of the lease
     * (at most one second of it) is left, so that the transfer ends while the lease holds. Otherwise a read looks the
     * key up again. Measured on the client's clock from the moment the probe was sent.
     */
    boolean usable();
}
