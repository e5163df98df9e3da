package io.granary.master.meta;

/**
 * Metadata of one object (tenant, key): its replicas, state, lease and pins.
 *
 * <p>Every mutable field is guarded by the lock of shard {@link #ownerShard} — the key's home
 * shard, or for a grouped object the group's shard. The key's home shard index points here.
 */
public final class ObjectMeta
{
    private static final ReplicaRecord[] NO_REPLICAS = new ReplicaRecord[0];

    final String tenant;
    /** The key's UTF-8 bytes; the String form is built on demand. */
    final byte[] keyBytes;
    /** Hash of (tenant, key bytes): picks the home shard (high bits) and the index slot (low bits). */
    final long hash;
    /** The shard whose lock guards this object: its group's, else the key's home shard (MetadataStore#homeShard). */
    final int ownerShard;
    final long sizeBytes;
    final String clientId;
    final boolean hardPinned;
    final GroupMeta group;
    /** The master's version of this object (see {@code MetadataStore#nextVersion}); 0 in old tests. */
    final long version;
    /** Rebuilt from storage-node ledger reports rather than put through this master. */
    final boolean adopted;

    /**
     * The replicas: null for none, the {@link ReplicaRecord} itself for one (most objects: no array to keep, one heap
     * object less per object for the collector to copy), a {@code ReplicaRecord[]} of two or more. Replaced as a whole
     * under the owner lock, never changed in place, so a reader without the lock sees one consistent set.
     */
    private Object replicaSet;
    boolean complete;
    /** Read-lease deadline (nanoTime) for ungrouped objects; grouped ones use the group's. */
    long leaseDeadlineNs;
    /**
     * Soft-pin state; null for an object that never asked for a pin nor got one (most objects), which thus carry one
     * reference instead of its 17 bytes.
     */
    SoftPin softPin;
    /** Set once, under the owner lock, when the object leaves the store. */
    boolean removed;
    /** Whether PutEnd recorded a CRC32C of the value, and that CRC; set once, at PutEnd. */
    boolean hasCrc;
    int crc32c;
    /**
     * The eviction unit (an ungrouped {@link ObjectMeta} or a {@link GroupMeta}) of the parent this object named at
     * PutStart (or, rebuilt, in its ledger entry), whose child count it holds one of; null for none, and cleared when
     * this object leaves the store.
     */
    Object parentUnit;
    /**
     * The parent's key bytes (same tenant), for KV events: set with parentUnit; or, while parentUnit is null, the key
     * of the parent a rebuilt object is waiting for (see AwaitedParents). Null = none.
     */
    byte[] parentKeyBytes;
    /** Live objects naming this (ungrouped) object as their parent; changed atomically by {@link ParentLinks}. */
    volatile int childRefs;
    /** Sequence of the last STORED event announcing this object (see EventJournal); -1 = none. */
    long storedSeq = -1;
    /**
     * What only an unfinished put needs (when it started; its place in the owner shard's list of unfinished puts):
     * set from the PutStart until the put completes, then null, so that a stored object does not carry it (8 bytes
     * less per object). Owner shard lock; read without it only as a hint (MetadataStore#reclaimAbandonedPuts).
     */
    PendingPut pending;

    /** An unfinished put's own state (see {@link #pending}). */
    static final class PendingPut
    {
        /** nanoTime of the PutStart. */
        final long startNs;
        /** Neighbours in the owner shard's list of unfinished puts ({@link MetadataShard#linkProcessing}). */
        ObjectMeta prev;
        ObjectMeta next;

        PendingPut(final long startNs)
        {
            this.startNs = startNs;
        }
    }

    ObjectMeta(
        final String tenant,
        final byte[] keyBytes,
        final long hash,
        final int ownerShard,
        final long sizeBytes,
        final String clientId,
        final long putStartNs,
        final boolean hardPinned,
        final GroupMeta group,
        final ReplicaRecord[] replicas,
        final long softPinTtlNs)
    {
        this(tenant, keyBytes, hash, ownerShard, sizeBytes, clientId, putStartNs, hardPinned, group,
            replicas, softPinTtlNs, 0, false);
    }

    ObjectMeta(
        final String tenant,
        final byte[] keyBytes,
        final long hash,
        final int ownerShard,
        final long sizeBytes,
        final String clientId,
        final long putStartNs,
        final boolean hardPinned,
        final GroupMeta group,
        final ReplicaRecord[] replicas,
        final long softPinTtlNs,
        final long version,
        final boolean adopted)
    {
        this.version = version;
        this.adopted = adopted;
        this.tenant = tenant;
        this.keyBytes = keyBytes;
        this.hash = hash;
        this.ownerShard = ownerShard;
        this.sizeBytes = sizeBytes;
        this.clientId = clientId;
        this.pending = adopted ? null : new PendingPut(putStartNs); // rebuilt objects are complete from the start
        this.hardPinned = hardPinned;
        this.group = group;
        replicas(replicas);
        this.softPin = softPinTtlNs > 0 ? new SoftPin(softPinTtlNs) : null;
    }

    public String tenant()
    {
        return tenant;
    }

    public String key()
    {
        return new String(keyBytes, java.nio.charset.StandardCharsets.UTF_8);
    }

    public long sizeBytes()
    {
        return sizeBytes;
    }

    public boolean isComplete()
    {
        return complete;
    }

    /** True when PutEnd recorded a checksum ({@link #crc32c()}). */
    public boolean hasCrc()
    {
        return hasCrc;
    }

    /** The value's CRC32C as PutEnd recorded it; meaningful only when {@link #hasCrc()}. */
    public int crc32c()
    {
        return crc32c;
    }

    public boolean isHardPinned()
    {
        return hardPinned;
    }

    public long version()
    {
        return version;
    }

    /** True when rebuilt from the ledgers storage nodes reported to this master. */
    public boolean isAdopted()
    {
        return adopted;
    }

    public GroupMeta group()
    {
        return group;
    }

    /** The replicas as an array: a new one for a single replica, else the set itself (do not modify it). */
    public ReplicaRecord[] replicas()
    {
        final Object set = replicaSet;
        if (set == null)
        {
            return NO_REPLICAS;
        }
        return set instanceof ReplicaRecord ? new ReplicaRecord[] {(ReplicaRecord)set} : (ReplicaRecord[])set;
    }

    /** Replaces the replicas by those in {@code replicas} (kept as they are; the caller does not change it after). */
    void replicas(final ReplicaRecord[] replicas)
    {
        replicaSet = replicas.length == 0 ? null : replicas.length == 1 ? replicas[0] : replicas;
    }

    /** How many replicas there are; with {@link #replica(int)}, a walk that allocates nothing (owner lock held). */
    int replicaCount()
    {
        final Object set = replicaSet;
        return set == null ? 0 : set instanceof ReplicaRecord ? 1 : ((ReplicaRecord[])set).length;
    }

    /** Replica {@code i} of {@link #replicaCount()} (owner lock held, so the set does not change in between). */
    ReplicaRecord replica(final int i)
    {
        final Object set = replicaSet;
        return set instanceof ReplicaRecord && i == 0 ? (ReplicaRecord)set : ((ReplicaRecord[])set)[i];
    }

    /** Reads the replica set's memory for {@link KeyIndex#touch}; the answer means nothing. */
    int touchReplicas()
    {
        final Object set = replicaSet;
        return set == null ? 0 : set instanceof ReplicaRecord ? (int)((ReplicaRecord)set).offset() :
            ((ReplicaRecord[])set).length;
    }

    /** Gives every replica's extent back ({@link ReplicaRecord#release()}). */
    void releaseReplicas()
    {
        for (int i = 0, n = replicaCount(); i < n; i++)
        {
            replica(i).release(version);
        }
    }

    /**
     * Readable: complete with at least one replica. Replicas on a lost segment are dropped by the
     * purge that follows the loss at once; GetReplicaList also filters them, so this check can stay
     * cheap (no pointer chase per replica on the hot lookup path).
     */
    public boolean isReadable()
    {
        return complete && !removed && replicaSet != null;
    }

    /** The read-lease deadline in force (the group's for grouped objects). */
    public long leaseDeadlineNs()
    {
        return group != null ? group.leaseDeadlineNs : leaseDeadlineNs;
    }

    /** The deadline (nanoTime) of the soft pin last given, lapsed or not; 0 when it never had one. */
    public long softPinDeadlineNs()
    {
        return softPin == null ? 0 : softPin.deadlineNs;
    }

    /** The soft-pin TTL the put asked for, applied once readable; 0 for none. */
    long softPinTtlNs()
    {
        return softPin == null ? 0 : softPin.ttlNs;
    }

    /** Pinned and not yet unpinned (by a DISABLE, or by expiry once its deadline passed): counted as pinned. */
    boolean hasSoftPin()
    {
        return softPin != null && softPin.pinned;
    }

    public boolean isLeased(final long nowNs)
    {
        return leaseDeadlineNs() - nowNs > 0;
    }

    /** Live objects that named this one (ungrouped) as their parent; a grouped object's children count on its group. */
    public int childRefs()
    {
        return group != null ? group.childRefs : childRefs;
    }

    public boolean isSoftPinned(final long nowNs)
    {
        final SoftPin p = softPin;
        return p != null && p.pinned && p.deadlineNs - nowNs > 0;
    }

    /** An object's soft pin: the TTL its put asked for, and the pin it has (owner shard lock). */
    static final class SoftPin
    {
        /** TTL to apply once readable; 0 when the pin came from a later put's ENABLE. */
        final long ttlNs;
        /** True from the pin until it is taken off (DISABLE) or lapses (expiry): counted in the pinned objects. */
        boolean pinned;
        long deadlineNs;

        SoftPin(final long ttlNs)
        {
            this.ttlNs = ttlNs;
        }
    }
}
