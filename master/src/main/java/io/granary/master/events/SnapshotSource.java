package io.granary.master.events;

/**
 * Where a snapshot of the present keys comes from (the metadata store), one shard at a time so that a snapshot
 * never holds more than one shard's keys nor more than one shard lock.
 */
public interface SnapshotSource
{
    /** Receives the readable objects of one shard, under that shard's lock: must not block. */
    @FunctionalInterface
    interface Sink
    {
        void onObject(String tenant, byte[] keyBytes, String groupIdOrNull, long valueLength, byte[] parentKeyOrNull);
    }

    int shardCount();

    /**
     * Calls {@code sink} with every readable object whose state shard {@code shard} guards, of {@code tenantOrNull}
     * (null = every tenant), under that shard's lock: the objects as of one instant in the shard's event order.
     */
    void scanShard(int shard, String tenantOrNull, Sink sink);
}
