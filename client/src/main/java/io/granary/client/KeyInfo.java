package io.granary.client;

import java.util.Objects;

/**
 * One object as {@link GranaryClient#listKeys} shows it (the master's view, no lease taken).
 *
 * @param key              the key, within the client's tenant.
 * @param valueLength      value size in bytes.
 * @param status           whether the object is readable yet.
 * @param replicas         number of replicas.
 * @param leaseRemainingMs time left on the read lease, 0 or negative when none.
 * @param hardPinned       never evicted.
 * @param softPinned       evicted only in the second eviction pass.
 * @param groupId          eviction group, or null for none.
 */
public record KeyInfo(
    String key,
    long valueLength,
    Status status,
    int replicas,
    long leaseRemainingMs,
    boolean hardPinned,
    boolean softPinned,
    String groupId)
{
    /** Lifecycle of an object: PROCESSING between PutStart and PutEnd, then COMPLETE (readable). */
    public enum Status
    {
        UNKNOWN, PROCESSING, COMPLETE
    }

    public KeyInfo
    {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(status, "status");
    }
}
