package io.granary.master.meta;

import java.util.List;

/**
 * What the master holds about one object at one moment, read without granting a lease (the admin port's
 * {@code /query}). Immutable.
 *
 * @param leaseRemainingMs  read lease left, 0 when none.
 * @param softPinRemainingMs soft pin left, 0 when not soft-pinned (or its deadline has not started yet).
 */
public record ObjectSnapshot(
    String tenant,
    String key,
    long sizeBytes,
    boolean complete,
    boolean hardPinned,
    boolean softPinned,
    long leaseRemainingMs,
    long softPinRemainingMs,
    String groupId,
    List<Replica> replicas)
{
    /** One replica: where its extent lives and whether that segment is still mounted. */
    public record Replica(String segment, String node, String endpoint, long offset, long lengthBytes, boolean alive)
    {
    }
}
