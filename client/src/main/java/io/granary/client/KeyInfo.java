package io.granary.client;

import java.util.Objects;
import java.util.OptionalInt;

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
 * @param crc32c           the value's CRC32C as the master recorded it (from PutEnd, or from a node's ledger after a
 *                         master restart), empty when the writer recorded none.
 */
public record KeyInfo(
    String key,
    long valueLength,
    Status status,
    int replicas,
    long leaseRemainingMs,
    boolean hardPinned,
    boolean softPinned,
    String groupId,
    OptionalInt crc32c)
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
        Objects.requireNonNull(crc32c, "crc32c");
    }

    /** An object without a recorded checksum. */
    public KeyInfo(
        final String key,
        final long valueLength,
        final Status status,
        final int replicas,
        final long leaseRemainingMs,
        final boolean hardPinned,
        final boolean softPinned,
        final String groupId)
    {
        this(key, valueLength, status, replicas, leaseRemainingMs, hardPinned, softPinned, groupId, OptionalInt.empty());
    }
}
