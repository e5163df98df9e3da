package io.granary.master.meta;

import com.google.protobuf.UnsafeByteOperations;
import io.granary.common.Clock;
import io.granary.master.alloc.ReplicaPlacement;
import io.granary.master.events.EventJournal;
import io.granary.master.events.SnapshotSource;
import io.granary.master.segment.MountedSegment;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.KeyInfo;
import io.granary.proto.KvEventReason;
import io.granary.proto.LedgerEntry;
import io.granary.proto.PutOptions;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.proto.SettledReplica;
import io.granary.proto.SoftPinAction;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.Limits;
import io.granary.protocol.Opcode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;

import static io.granary.proto.ErrorCode.*;

/**
 * All object metadata, sharded: puts, lookups with read leases, removal, and the cleanup that
 * node loss and abandoned puts require. Transport-agnostic; every public method is thread safe.
 *
 * <p>Locking: an object's mutable state is guarded by its owner shard's lock (see
 * {@link ObjectMeta}). At most two shard locks are held at once, always in ascending index order;
 * segment allocators are locked inside shard locks, never the other way round.
 *
 * <p>Events: with an {@link EventJournal} installed, every change of readability (an object becoming readable,
 * or stopping being readable) is appended to it inside the critical section that makes the change, so the
 * journal's order of two events of one key is the order of the changes.
 */
public final class MetadataStore implements SnapshotSource
{
    private static final Logger LOG = LoggerFactory.getLogger(MetadataStore.class);

    /** Settings the store decides by; durations in nanoseconds. */
    public static final class Settings
    {
        public int shardCount = 1024;
        public long leaseTtlNs = 10_000_000_000L;
        public long softPinDefaultTtlNs = 30L * 60 * 1_000_000_000L;
        public long softPinMaxTtlNs = 24L * 3600 * 1_000_000_000L;
        public long putDiscardTimeoutNs = 30_000_000_000L;
        public long putReleaseTimeoutNs = 600_000_000_000L;
        public int listKeysLimit = 10_000;
        /** Largest value a put may have (smaller than the protocol's limit when access tokens must cover it). */
        public long maxValueBytes = Limits.MAX_VALUE_BYTES;
        /** Non-zero: placement draws from one generator with this seed, so the same calls place alike (tests). */
        public long placementSeed;
        /**
         * Most objects the store holds (complete or not): a put that would add one more asks the object budget
         * handler to evict, and is refused with NO_AVAILABLE_HANDLE if that frees none, so that metadata never
         * outgrows the heap.
         */
        public long maxObjects = Long.MAX_VALUE;
        /**
         * Byte quotas of named tenants (value bytes of their objects, see {@link TenantQuota}): a put of a new key that
         * would take its tenant beyond asks the tenant quota handler to evict the tenant's own objects, and is refused
         * with TENANT_QUOTA_EXCEEDED if that does not make room. Tenants not named here get
         * {@link #defaultTenantQuotaBytes}.
         */
        public Map<String, Long> tenantQuotaBytes = Map.of();
        /** The quota of every tenant {@link #tenantQuotaBytes} does not name; 0: none. */
        public long defaultTenantQuotaBytes;
    }

    /**
     * Asked to evict objects of a tenant over its quota: {@code neededBytes} must go for the put to fit. Returns true
     * when it freed any (the put then tries its charge once more).
     */
    @FunctionalInterface
    public interface TenantQuotaHandler
    {
        boolean evict(TenantQuota quota, long neededBytes);
    }

    /** Outcome of a lookup that may grant a lease. */
    public static final class Lookup
    {
        public int code;
        public long sizeBytes;
        public List<Replica> replicas;
        /** Whether the object has a checksum, and its CRC32C. */
        public boolean hasCrc;
        public int crc32c;
    }

    /**
     * Signs data-plane access tokens for the extents the store hands out (READ with replica lists, WRITE with
     * PutStart); not installed when the master issues no tokens. Called under shard locks: must not block.
     */
    @FunctionalInterface
    public interface ReplicaTokens
    {
        /**
         * A token ({@code FrameDescriptor.ACCESS_TOKEN_LENGTH} bytes) granting {@code opcode} on
         * {@code [grantOffset, grantOffset + grantLength)} of the segment, starting with {@code expirySec} as a uint32
         * (as {@code AccessTokenCodec} writes it; a replica's cached READ token is known by it).
         */
        byte[] sign(MountedSegment segment, long grantOffset, long grantLength, int opcode, long expirySec);

        /**
         * A token granting {@code opcode} on the replica's extent; a zero-length value still gets a one-byte grant,
         * as its COMMIT must carry a token a node can verify.
         */
        default byte[] sign(final ReplicaRecord replica, final int opcode, final long expirySec)
        {
            return sign(replica.segment(), replica.offset(), Math.max(1, replica.length()), opcode, expirySec);
        }
    }

    private final MetadataShard[] shards;
    private final int shardMask;
    private final Settings settings;
    private final Clock clock;
    private final SegmentRegistry registry;
    private final ReplicaPlacement placement;
    /** Tenants and client ids the objects keep, one instance each (a decoded request brings its own copies). */
    private final StringCanon strings = new StringCanon();

    /** Extents whose writers may still be writing; freed when their time comes. Guarded by itself. */
    private final PriorityQueue<PendingRelease> pendingReleases =
        new PriorityQueue<>(Comparator.comparingLong((PendingRelease p) -> p.releaseAtNs));

    /** Soft-pin expiries in deadline order, so pins lapse without a scan. Guarded by itself. */
    private final PriorityQueue<PinExpiry> pinExpiries =
        new PriorityQueue<>(Comparator.comparingLong((PinExpiry p) -> p.deadlineNs));
    private volatile java.util.function.LongPredicate allocationFailureHandler;
    private volatile java.util.function.LongPredicate objectBudgetHandler;
    private volatile TenantQuotaHandler tenantQuotaHandler;
    /** Quotas of the tenants that have one, created at their first put (null when no tenant has a quota). */
    private final java.util.concurrent.ConcurrentHashMap<String, TenantQuota> tenantQuotas;
    private volatile LeaseListener leaseListener;
    private volatile ReplicaTokens replicaTokens;
    private final java.util.concurrent.atomic.AtomicLong pinEpoch = new java.util.concurrent.atomic.AtomicLong();
    /** Where readability changes are recorded; null when events are off. */
    private volatile EventJournal events;

    /** Observes every read lease granted, on the granting thread, under the owner shard lock. */
    @FunctionalInterface
    public interface LeaseListener
    {
        void onLeaseGranted(String tenant, String key, long deadlineNs);
    }

    /** The last object version issued or adopted; see {@link #nextVersion()}. */
    private final AtomicLong lastVersion = new AtomicLong();
    /**
     * Versions of rebuilt objects removed or evicted on this master, by tenant and key, so that a node
     * reporting its copy later does not bring them back. Bounded (oldest forgotten first); guarded by itself.
     */
    private final Map<String, Long> tombstones = new LinkedHashMap<>(256, 0.75f, false)
    {
        @Override
        protected boolean removeEldestEntry(final Map.Entry<String, Long> eldest)
        {
            return size() > MAX_TOMBSTONES;
        }
    };
    /** Most tombstones kept. */
    public static final int MAX_TOMBSTONES = 100_000;
    private final RebuildCounters rebuild = new RebuildCounters();
    /** Rebuilt objects waiting for the parent their writer named. */
    private final AwaitedParents awaitedParents = new AwaitedParents();

    private final AtomicLong objectCount = new AtomicLong();
    private final AtomicLong softPinnedCount = new AtomicLong();
    private final LongAdder putStarts = new LongAdder();
    private final LongAdder putEnds = new LongAdder();
    private final LongAdder putRevokes = new LongAdder();
    /** Extents of revoked puts freed at once (their client named them settled) instead of quarantined. */
    private final LongAdder revokedExtentsReleased = new LongAdder();
    private final LongAdder allocationFailures = new LongAdder();
    private final LongAdder objectBudgetRefusals = new LongAdder();
    private final LongAdder partialAllocations = new LongAdder();
    private final LongAdder discardedPuts = new LongAdder();
    private final LongAdder releasedPuts = new LongAdder();
    private final LongAdder leaseGrants = new LongAdder();
    private final LongAdder removedObjects = new LongAdder();
    private final LongAdder lostObjects = new LongAdder();
    private final LongAdder parentLinks = new LongAdder();
    private final LongAdder parentsMissing = new LongAdder();
    /** Puts that skipped the lookup of an existing object and found one when inserting (then looked it up). */
    private final LongAdder retriedPutLookups = new LongAdder();
    /** Not a status: {@link #putStart} found an object it assumed absent; nothing changed, look it up and go on. */
    static final int RETRY_WITH_LOOKUP = -1;

    private static final class PendingRelease
    {
        final long releaseAtNs;
        /** The version the replicas' object had (what their nodes' ledgers forget). */
        final long version;
        final ReplicaRecord[] replicas;

        PendingRelease(final long releaseAtNs, final long version, final ReplicaRecord[] replicas)
        {
            this.releaseAtNs = releaseAtNs;
            this.version = version;
            this.replicas = replicas;
        }
    }

    private static final class PinExpiry
    {
        final long deadlineNs;
        final ObjectMeta meta;

        PinExpiry(final long deadlineNs, final ObjectMeta meta)
        {
            this.deadlineNs = deadlineNs;
            this.meta = meta;
        }
    }

    public MetadataStore(final Settings settings, final Clock clock, final SegmentRegistry registry)
    {
        if (Integer.bitCount(settings.shardCount) != 1)
        {
            throw new IllegalArgumentException("shard count must be a power of two, was " + settings.shardCount);
        }
        this.settings = settings;
        this.clock = clock;
        this.registry = registry;
        this.shards = new MetadataShard[settings.shardCount];
        for (int i = 0; i < shards.length; i++)
        {
            shards[i] = new MetadataShard(i);
        }
        this.shardMask = settings.shardCount - 1;
        this.placement = settings.placementSeed != 0 ? new ReplicaPlacement(settings.placementSeed) :
            new ReplicaPlacement();
        if (settings.defaultTenantQuotaBytes < 0)
        {
            throw new IllegalArgumentException(
                "the default tenant quota must be >= 0 bytes, was " + settings.defaultTenantQuotaBytes);
        }
        if (settings.tenantQuotaBytes.isEmpty() && settings.defaultTenantQuotaBytes == 0)
        {
            this.tenantQuotas = null;
        }
        else
        {
            this.tenantQuotas = new java.util.concurrent.ConcurrentHashMap<>();
            settings.tenantQuotaBytes.forEach(
                (tenant, bytes) -> tenantQuotas.put(tenant, new TenantQuota(tenant, bytes)));
        }
    }

    /** The quota of {@code tenant}, or null when it has none. */
    public TenantQuota tenantQuota(final String tenant)
    {
        final java.util.concurrent.ConcurrentHashMap<String, TenantQuota> quotas = tenantQuotas;
        if (quotas == null)
        {
            return null;
        }
        final TenantQuota q = quotas.get(tenant);
        if (q != null || settings.defaultTenantQuotaBytes == 0)
        {
            return q;
        }
        return quotas.computeIfAbsent(tenant, t -> new TenantQuota(t, settings.defaultTenantQuotaBytes));
    }

    /** Puts of new keys refused with TENANT_QUOTA_EXCEEDED, all tenants. */
    public long tenantQuotaRefusals()
    {
        long refusals = 0;
        for (final TenantQuota q : tenantQuotas())
        {
            refusals += q.refusals();
        }
        return refusals;
    }

    /** The quotas of the tenants that have one and have put (or are named in the settings), by tenant. */
    public List<TenantQuota> tenantQuotas()
    {
        if (tenantQuotas == null)
        {
            return List.of();
        }
        final List<TenantQuota> all = new ArrayList<>(tenantQuotas.values());
        all.sort(Comparator.comparing(TenantQuota::tenant));
        return all;
    }

    /**
     * Called with a tenant's quota and the bytes to free when a put would take the tenant beyond it; returns true when
     * it freed any (the put then tries once more). The evictor installs itself here.
     */
    public void tenantQuotaHandler(final TenantQuotaHandler handler)
    {
        this.tenantQuotaHandler = handler;
    }

    /**
     * Charges a new object of {@code valueLength} bytes to {@code quota}, after asking the handler to evict the
     * tenant's objects if it does not fit. @return false (nothing charged) when the put must be refused.
     */
    private boolean charge(final TenantQuota quota, final long valueLength)
    {
        if (quota.tryCharge(valueLength))
        {
            return true;
        }
        final TenantQuotaHandler handler = tenantQuotaHandler;
        return valueLength <= quota.limitBytes() && handler != null &&
            handler.evict(quota, quota.excessWith(valueLength)) && quota.tryCharge(valueLength);
    }

    public Settings settings()
    {
        return settings;
    }

    public Clock clock()
    {
        return clock;
    }

    public int shardCount()
    {
        return shards.length;
    }

    // ------------------------------------------------------------------------------------ routing

    /** Hash of (tenant, key bytes), as stored in {@link ObjectMeta#hash}; never 0. */
    public static long hashOf(final String tenant, final byte[] key, final int off, final int len)
    {
        return combine(KeyBytes.hash(key, off, len), tenantMix(tenant));
    }

    /** The tenant's share of {@link #hashOf}; compute once per batch. */
    public static long tenantMix(final String tenant)
    {
        return tenant.hashCode() * 0x9E3779B97F4A7C15L;
    }

    /** {@link #hashOf} from a key hash ({@link KeyBytes#hash}) and a {@link #tenantMix}. */
    static long combine(final long keyHash, final long tenantMix)
    {
        final long h = keyHash ^ tenantMix;
        return h == 0 ? 1 : h;
    }

    /** The shard whose index holds a key with this {@link #hashOf hash}. */
    public int homeShard(final long hash)
    {
        return (int)(hash >>> 40) & shardMask;
    }

    /** The shard whose index holds {@code key}. */
    public int homeShard(final String tenant, final String key)
    {
        final byte[] b = KeyBytes.utf8(key);
        return homeShard(hashOf(tenant, b, 0, b.length));
    }

    /** The shard that owns a group and all its members. */
    public int groupShard(final String tenant, final String groupId)
    {
        final byte[] b = KeyBytes.utf8(groupId);
        return (int)(hashOf(tenant, b, 0, b.length) >>> 24) & shardMask;
    }

    MetadataShard shard(final int index)
    {
        return shards[index];
    }

    /**
     * Finds a live object and returns it with its owner shard locked, or null with nothing locked.
     * The caller must {@link #unlockOwner(ObjectMeta)}.
     */
    ObjectMeta lockForKey(final String tenant, final String key)
    {
        final byte[] b = KeyBytes.utf8(key);
        return lockForKey(tenant, b, 0, b.length, hashOf(tenant, b, 0, b.length));
    }

    /** {@link #lockForKey(String, String)} for a key given as bytes with its {@link #hashOf hash}. */
    ObjectMeta lockForKey(final String tenant, final byte[] key, final int off, final int len, final long hash)
    {
        final int h = homeShard(hash);
        final MetadataShard home = shards[h];
        while (true)
        {
            home.lock();
            final ObjectMeta m = home.get(tenant, key, off, len, hash);
            if (m == null)
            {
                home.unlock();
                return null;
            }
            if (m.ownerShard == h)
            {
                if (!m.removed)
                {
                    return m;
                }
                home.unlink(m);
                home.unlock();
                continue;
            }
            home.unlock();
            final MetadataShard owner = shards[m.ownerShard];
            owner.lock();
            if (!m.removed)
            {
                return m;
            }
            owner.unlock();
            home.lock();
            home.unlink(m);
            home.unlock();
        }
    }

    void unlockOwner(final ObjectMeta m)
    {
        shards[m.ownerShard].unlock();
    }

    /** Removes the home-index entry of an object already marked removed (owner lock not held). */
    private void unlinkHome(final ObjectMeta m)
    {
        final MetadataShard home = shards[homeShard(m.hash)];
        home.lock();
        try
        {
            home.unlink(m);
        }
        finally
        {
            home.unlock();
        }
    }

    /**
     * Marks an object removed and detaches it from its group; owner lock held. The caller then
     * unlinks the home entry: at once if home == owner, else after releasing the owner lock.
     */
    private void detachLocked(final ObjectMeta m)
    {
        m.removed = true;
        shards[m.ownerShard].unlinkProcessing(m);
        unpinLocked(m);
        if (m.parentUnit != null)
        {
            ParentLinks.removeChild(m.parentUnit);
            m.parentUnit = null; // a removed object keeps nothing of its ancestors reachable
            m.parentKeyBytes = null;
        }
        else if (m.parentKeyBytes != null)
        {
            awaitedParents.remove(m, m.parentKeyBytes); // a rebuilt object that was still waiting for its parent
            m.parentKeyBytes = null;
        }
        final MetadataShard owner = shards[m.ownerShard];
        owner.ownedObjects--;
        objectCount.decrementAndGet();
        if (tenantQuotas != null)
        {
            refund(tenantQuota(m.tenant), m.sizeBytes);
        }
        if (m.group != null)
        {
            m.group.members.remove(m);
            if (!m.complete) // an unfinished member left (not isReadable(): m.removed is already set)
            {
                announceGroupCompletedLocked(m.group);
            }
            owner.dropGroupIfEmpty(m.group);
        }
        if (homeShard(m.hash) == m.ownerShard)
        {
            owner.unlink(m);
        }
    }

    private void finishDetach(final ObjectMeta m)
    {
        if (homeShard(m.hash) != m.ownerShard)
        {
            unlinkHome(m);
        }
    }

    // ------------------------------------------------------------------------------------ versions

    /**
     * A new object version: larger than every version issued or adopted before, and at least the wall clock
     * in nanoseconds-sized units ({@code epochMillis * 10^6}), so that a restarted master keeps issuing larger
     * versions than its predecessor as long as its clock did not go back by more than the downtime.
     */
    public long nextVersion()
    {
        return nextVersion(clock.epochMillis());
    }

    /** {@link #nextVersion()} with the wall clock read by the caller ({@code epochMillis}). */
    private long nextVersion(final long epochMillis)
    {
        final long wall = epochMillis * 1_000_000L;
        return lastVersion.updateAndGet(v -> Math.max(v + 1, wall));
    }

    /**
     * The store's clocks read once: a batch handler reads them before its keys and hands the reading to each key's
     * put call, instead of every key reading both (a clock read cost about as much as a key's index insert).
     *
     * @param nanos       {@link Clock#nanoTime()}: a PutStart's start time. Not an object's age: a PutEnd reads its
     *                    own, so that a batch's objects age in the order they completed.
     * @param epochMillis {@link Clock#epochMillis()}: versions and event times.
     */
    public record Now(long nanos, long epochMillis)
    {
    }

    /** Both clocks, read now; see {@link Now}. */
    public Now now()
    {
        return new Now(clock.nanoTime(), clock.epochMillis());
    }

    /** The last version issued or adopted. */
    public long lastVersion()
    {
        return lastVersion.get();
    }

    // ------------------------------------------------------------------------------------ validation

    /** ErrorCode number for a bad tenant, or OK. */
    public static int checkTenant(final String tenant)
    {
        return Limits.checkTenant(tenant) == null ? OK_VALUE : INVALID_PARAMS_VALUE;
    }

    public static int checkKey(final String key)
    {
        return Limits.checkKey(key) == null ? OK_VALUE : INVALID_KEY_VALUE;
    }

    /** Validates put options; returns OK or INVALID_PARAMS, and the soft-pin TTL to apply in {@code ttlOut[0]}. */
    int checkPutOptions(final PutOptions options, final long[] softPinTtlOut)
    {
        if (Integer.compareUnsigned(options.getReplicas(), Limits.MAX_REPLICAS) > 0)
        {
            return INVALID_PARAMS_VALUE; // uint32 on the wire: above 2^31 reads negative here
        }
        if (!options.getGroupId().isEmpty() && Limits.checkKey(options.getGroupId()) != null)
        {
            return INVALID_PARAMS_VALUE; // a group id follows the key rules (stored and hashed like one)
        }
        if (options.getPreferredSegment().length() > Limits.MAX_KEY_BYTES)
        {
            return INVALID_PARAMS_VALUE;
        }
        if (!options.getParentKey().isEmpty() && Limits.checkKey(options.getParentKey()) != null)
        {
            return INVALID_PARAMS_VALUE; // a parent is named by its key: the key rules apply
        }
        softPinTtlOut[0] = 0;
        switch (options.getSoftPinValue())
        {
            case SoftPinAction.SOFT_PIN_PRESERVE_VALUE:
            case SoftPinAction.SOFT_PIN_DISABLE_VALUE:
                if (options.hasSoftPinTtlMs())
                {
                    return INVALID_PARAMS_VALUE;
                }
                return OK_VALUE;
            case SoftPinAction.SOFT_PIN_ENABLE_VALUE:
                if (!options.hasSoftPinTtlMs())
                {
                    softPinTtlOut[0] = settings.softPinDefaultTtlNs;
                    return OK_VALUE;
                }
                final long ttlMs = options.getSoftPinTtlMs();
                if (ttlMs < 0 || ttlMs > settings.softPinMaxTtlNs / 1_000_000L)
                {
                    return INVALID_PARAMS_VALUE;
                }
                softPinTtlOut[0] = ttlMs * 1_000_000L; // 0 stores ordinary cache
                return OK_VALUE;
            default:
                return INVALID_PARAMS_VALUE;
        }
    }

    // ------------------------------------------------------------------------------------ puts

    /** Starts a put: validates, allocates replicas, records the object as PROCESSING. */
    public int putStart(
        final String tenant,
        final String clientId,
        final String key,
        final long valueLength,
        final PutOptions options,
        final List<Replica> replicasOut)
    {
        return putStart(tenant, clientId, key, valueLength, options, Set.of(), replicasOut, null);
    }

    /**
     * {@link #putStart(String, String, String, long, PutOptions, List)} placing replicas on the nodes in
     * {@code avoidNodes} only when nothing else has room, and writing the object's version into
     * {@code versionOut[0]} (when not null) on success.
     */
    public int putStart(
        final String tenant,
        final String clientId,
        final String key,
        final long valueLength,
        final PutOptions options,
        final Set<String> avoidNodes,
        final List<Replica> replicasOut,
        final long[] versionOut)
    {
        return putStart(tenant, clientId, key, valueLength, options, avoidNodes, replicasOut, versionOut, null);
    }

    /**
     * {@link #putStart(String, String, String, long, PutOptions, Set, List, long[])} that, when {@code grants} is
     * not null, records the replicas there instead of adding them to {@code replicasOut}: the caller signs the
     * whole batch with {@link #signGrants} and takes each key's replicas from {@link SharedGrants#replicasOf}.
     */
    public int putStart(
        final String tenant,
        final String clientId,
        final String key,
        final long valueLength,
        final PutOptions options,
        final Set<String> avoidNodes,
        final List<Replica> replicasOut,
        final long[] versionOut,
        final SharedGrants grants)
    {
        final int code = checkKey(key);
        if (code != OK_VALUE)
        {
            return code;
        }
        final byte[] keyBytes = KeyBytes.utf8(key);
        return putStart(tenant, clientId, keyBytes, hashOf(tenant, keyBytes, 0, keyBytes.length), valueLength, options,
            avoidNodes, replicasOut, versionOut, grants, now());
    }

    /**
     * {@link #putStart(String, String, String, long, PutOptions, Set, List, long[], SharedGrants)} of key {@code i}
     * of a batch given as bytes (the lookup port decodes keys without building Strings); {@code tenantMix} is
     * {@link #tenantMix}{@code (tenant)}.
     */
    public int putStart(
        final String tenant,
        final long tenantMix,
        final String clientId,
        final KeyBatch keys,
        final int i,
        final long valueLength,
        final PutOptions options,
        final Set<String> avoidNodes,
        final List<Replica> replicasOut,
        final long[] versionOut,
        final SharedGrants grants,
        final Now now)
    {
        final int off = keys.offsets[i];
        final int len = keys.lengths[i];
        final int code = KeyBytes.check(keys.bytes, off, len);
        if (code != OK_VALUE)
        {
            return code;
        }
        return putStart(tenant, clientId, Arrays.copyOfRange(keys.bytes, off, off + len),
            combine(keys.hashes[i], tenantMix), valueLength, options, avoidNodes, replicasOut, versionOut, grants, now);
    }

    /** A put of a valid key given as its own UTF-8 bytes (kept by the object) and its {@link #hashOf hash}. */
    private int putStart(
        final String tenant,
        final String clientId,
        final byte[] keyBytes,
        final long hash,
        final long valueLength,
        final PutOptions options,
        final Set<String> avoidNodes,
        final List<Replica> replicasOut,
        final long[] versionOut,
        final SharedGrants grants,
        final Now clocks)
    {
        if (valueLength < 0 || valueLength > settings.maxValueBytes || clientId.isEmpty())
        {
            return INVALID_PARAMS_VALUE;
        }
        int code;
        final long[] softPinTtl = new long[1];
        code = checkPutOptions(options, softPinTtl);
        if (code != OK_VALUE)
        {
            return code;
        }
        putStarts.increment();
        final long now = clocks.nanos();
        // Most puts name a new key: when the home index holds no entry of this hash (read without the lock), skip the
        // locked lookup of an existing object. The check under the lock before the insert still sees any entry; one
        // this read missed (a racing put, or the index rehashed meanwhile) sends the put through the locked lookup.
        final boolean absent = !shards[homeShard(hash)].keys.mayContain(hash);
        final int result = putStart(tenant, clientId, keyBytes, hash, valueLength, options, avoidNodes, replicasOut,
            versionOut, grants, softPinTtl, now, clocks.epochMillis(), absent);
        return result != RETRY_WITH_LOOKUP ? result : putStart(tenant, clientId, keyBytes, hash, valueLength, options,
            avoidNodes, replicasOut, versionOut, grants, softPinTtl, now, clocks.epochMillis(), false);
    }

    /**
     * The rest of a put, after its checks; {@code assumeAbsent}: skip the lookup of an existing object, and answer
     * {@link #RETRY_WITH_LOOKUP} (having changed nothing) if one turns out to be there.
     */
    int putStart(
        final String tenant,
        final String clientId,
        final byte[] keyBytes,
        final long hash,
        final long valueLength,
        final PutOptions options,
        final Set<String> avoidNodes,
        final List<Replica> replicasOut,
        final long[] versionOut,
        final SharedGrants grants,
        final long[] softPinTtl,
        final long now,
        final long epochMillis,
        final boolean assumeAbsent)
    {
        final ObjectMeta existing = assumeAbsent ? null : lockForKey(tenant, keyBytes, 0, keyBytes.length, hash);
        if (existing != null)
        {
            // An unfinished put's start (its pending state is there until it completes).
            final long startNs = existing.complete ? 0 : existing.pending.startNs;
            final boolean stale = !existing.complete && now - startNs > settings.putDiscardTimeoutNs;
            if (!stale)
            {
                if (existing.complete)
                {
                    applySoftPinActionLocked(existing, options.getSoftPinValue(), softPinTtl[0], now);
                }
                else if (existing.clientId.equals(clientId) && existing.sizeBytes == valueLength)
                {
                    // The same client asking again (a retried request): hand back the same extents.
                    for (final ReplicaRecord r : existing.replicas())
                    {
                        writeReplica(r, startNs, now, replicasOut, grants);
                    }
                    if (versionOut != null)
                    {
                        versionOut[0] = existing.version;
                    }
                    unlockOwner(existing);
                    return OK_VALUE;
                }
                unlockOwner(existing);
                return OBJECT_ALREADY_EXISTS_VALUE;
            }
            detachLocked(existing);
            unlockOwner(existing);
            finishDetach(existing);
            quarantine(existing.replicas(), existing.version, startNs + settings.putReleaseTimeoutNs);
            discardedPuts.increment();
        }

        // The tenant's quota first: a tenant at its quota makes room from its own objects, which also frees the count
        // and the bytes this put needs, instead of a pool-wide round taking other tenants' objects for it.
        final TenantQuota quota = tenantQuota(tenant);
        if (quota != null && !charge(quota, valueLength))
        {
            if (mayExist(assumeAbsent, hash))
            {
                return RETRY_WITH_LOOKUP;
            }
            quota.refused();
            return TENANT_QUOTA_EXCEEDED_VALUE;
        }
        // Every way out that creates no object gives the charge back, an unexpected exception included.
        boolean created = false;
        try
        {
            if (!roomForOneMoreObject())
            {
                return noRoom(assumeAbsent, hash, objectBudgetRefusals);
            }
            // Linked before placement, so that the eviction this put may trigger never takes its parent as a leaf.
            final byte[][] parentKey = new byte[1][];
            final Object parentUnit =
                linkParent(tenant, options.getParentKey(), keyBytes, options.getGroupId(), parentKey);
            final int wanted = Math.max(1, options.getReplicas());
            List<ReplicaRecord> placed = place(wanted, valueLength, options, avoidNodes);
            if (placed.size() < wanted && releaseDueExtents(clock.nanoTime()) > 0)
            {
                // Room just freed may take every replica asked for: place again from scratch.
                for (final ReplicaRecord r : placed)
                {
                    r.release(0); // no version yet: nothing to tell a node
                }
                placed = place(wanted, valueLength, options, avoidNodes);
            }
            if (placed.isEmpty() && allocationFailureHandler != null &&
                allocationFailureHandler.test(Math.max(1, valueLength) * wanted))
            {
                placed = place(wanted, valueLength, options, avoidNodes);
            }
            if (placed.isEmpty())
            {
                unlinkParent(parentUnit);
                return noRoom(assumeAbsent, hash, allocationFailures);
            }
            if (placed.size() < wanted)
            {
                partialAllocations.increment();
            }
            final ReplicaRecord[] replicas = placed.toArray(new ReplicaRecord[0]);

            final String groupId = options.getGroupId();
            final int h = homeShard(hash);
            final int o = groupId.isEmpty() ? h : groupShard(tenant, groupId);
            lockPair(h, o);
            try
            {
                final MetadataShard home = shards[h];
                final ObjectMeta raced = home.get(tenant, keyBytes, 0, keyBytes.length, hash);
                if (raced != null && !raced.removed)
                {
                    // Another put of the same key got in between (its state is owned elsewhere: treat as existing), or,
                    // when the lookup was skipped, the object was there all along: look it up under its lock after all.
                    for (final ReplicaRecord r : replicas)
                    {
                        r.release(0); // no version yet
                    }
                    unlinkParent(parentUnit);
                    if (assumeAbsent)
                    {
                        retriedPutLookups.increment();
                        return RETRY_WITH_LOOKUP;
                    }
                    return OBJECT_ALREADY_EXISTS_VALUE;
                }
                final MetadataShard owner = shards[o];
                final String keptTenant = strings.canonical(tenant); // the object keeps it: one instance for all
                final GroupMeta group = groupId.isEmpty() ? null : owner.groupOrCreate(keptTenant, groupId);
                final long version = nextVersion(epochMillis);
                final ObjectMeta m = new ObjectMeta(keptTenant, keyBytes, hash, o, valueLength,
                    strings.canonical(clientId), now, options.getHardPin(), group, replicas, softPinTtl[0], version,
                    false);
                m.parentUnit = parentUnit;
                m.parentKeyBytes = parentUnit == null ? null : parentKey[0];
                if (versionOut != null)
                {
                    versionOut[0] = version;
                }
                insertLocked(home, owner, raced, m);
                created = true; // from here on the object holds the charge: its detach gives it back
                owner.linkProcessing(m);
                for (final ReplicaRecord r : replicas)
                {
                    writeReplica(r, now, now, replicasOut, grants);
                }
                return OK_VALUE;
            }
            finally
            {
                unlockPair(h, o);
            }
        }
        finally
        {
            if (!created)
            {
                refund(quota, valueLength);
            }
            else if (awaitedParents.size() > 0)
            {
                linkAwaitingChildren(tenant, keyBytes, hash); // rebuilt objects that named this key as their parent
            }
        }
    }

    /**
     * Links a put to the parent it names (see {@link #addChildTo}; none named or the object itself: no parent);
     * {@code parentKeyOut[0]} gets the parent's key bytes when the store holds it. @return the unit now counting one
     * more child, or null.
     */
    private Object linkParent(
        final String tenant, final String parentKey, final byte[] key, final String groupId, final byte[][] parentKeyOut)
    {
        if (parentKey.isEmpty())
        {
            return null;
        }
        final byte[] parentBytes = KeyBytes.utf8(parentKey);
        if (Arrays.equals(parentBytes, key))
        {
            return null;
        }
        final Object unit = addChildTo(tenant, parentBytes, groupId, parentKeyOut);
        if (parentKeyOut[0] == null)
        {
            parentsMissing.increment();
        }
        else if (unit != null)
        {
            parentLinks.increment();
        }
        return unit;
    }

    /**
     * Counts one more child of the eviction unit of the object {@code parentKey} of {@code tenant}, if the store holds
     * it (complete or not) and it is not a member of the child's own group {@code groupId}. Takes only the parent's
     * owner lock, so that a child linked this way is counted before the evictor can next look at the parent.
     *
     * @param parentKeyOut {@code [0]} is set to the parent's key bytes when the store holds it, linked or not
     * @return the unit now counting one more child, or null
     */
    private Object addChildTo(
        final String tenant, final byte[] parentKey, final String groupId, final byte[][] parentKeyOut)
    {
        final ObjectMeta parent =
            lockForKey(tenant, parentKey, 0, parentKey.length, hashOf(tenant, parentKey, 0, parentKey.length));
        if (parent == null)
        {
            return null;
        }
        try
        {
            parentKeyOut[0] = parent.keyBytes;
            if (parent.group != null && parent.group.groupId.equals(groupId))
            {
                return null;
            }
            final Object unit = ParentLinks.unitOf(parent);
            ParentLinks.addChild(unit);
            return unit;
        }
        finally
        {
            unlockOwner(parent);
        }
    }

    /**
     * A rebuilt object that was waiting for its parent gets it if the store holds the parent now; else it keeps
     * waiting. Takes the parent's owner lock, then the child's, never both. Package-private so that a test can play
     * the side that loses a race (the child linked or gone by the time its lock is taken).
     */
    void linkAwaiting(final ObjectMeta child)
    {
        final byte[] parentKey = child.parentKeyBytes; // read again under the child's lock below
        if (parentKey == null)
        {
            return;
        }
        final byte[][] found = new byte[1][];
        final Object unit = addChildTo(child.tenant, parentKey, child.group == null ? "" : child.group.groupId, found);
        if (found[0] == null)
        {
            return; // still absent: its arrival links the child (linkAwaitingChildren)
        }
        boolean linked = false;
        final MetadataShard owner = shards[child.ownerShard];
        owner.lock();
        try
        {
            if (!child.removed && child.parentUnit == null && child.parentKeyBytes == parentKey)
            {
                awaitedParents.remove(child, parentKey);
                if (unit != null)
                {
                    child.parentUnit = unit;
                    linked = true;
                }
                else
                {
                    child.parentKeyBytes = null; // a member of the child's own group: no parent after all
                }
            }
        }
        finally
        {
            owner.unlock();
        }
        if (linked)
        {
            rebuild.parentsLinked.increment();
        }
        else if (unit != null)
        {
            ParentLinks.removeChild(unit); // linked already by a racing call, or gone from the store meanwhile
        }
    }

    /** A new object of {@code key} is in the store: the rebuilt objects waiting for it as their parent get it. */
    private void linkAwaitingChildren(final String tenant, final byte[] key, final long hash)
    {
        for (final ObjectMeta child : awaitedParents.childrenOf(tenant, key, hash))
        {
            linkAwaiting(child);
        }
    }

    /** Undoes {@link #linkParent} for a put that created nothing. */
    private static void unlinkParent(final Object parentUnit)
    {
        if (parentUnit != null)
        {
            ParentLinks.removeChild(parentUnit);
        }
    }

    /** Completes a put without a checksum; see {@link #putEnd(String, String, String, boolean, int)}. */
    public int putEnd(final String tenant, final String clientId, final String key)
    {
        return putEnd(tenant, clientId, key, false, 0);
    }

    /**
     * Completes a put: the object becomes readable, with the value's CRC32C when {@code hasCrc}. Grants no lease
     * (its age starts now). A repeated PutEnd of a complete object answers OK and changes nothing.
     */
    public int putEnd(
        final String tenant, final String clientId, final String key, final boolean hasCrc, final int crc32c)
    {
        final int code = checkKey(key);
        if (code != OK_VALUE)
        {
            return code;
        }
        return putEndLocked(lockForKey(tenant, key), clientId, hasCrc, crc32c, now());
    }

    /**
     * {@link #putEnd(String, String, String, boolean, int)} of key {@code i} of a batch given as bytes (the lookup
     * port decodes keys without building Strings); {@code tenantMix} is {@link #tenantMix}{@code (tenant)}.
     */
    public int putEnd(final String tenant, final long tenantMix, final String clientId, final KeyBatch keys,
        final int i, final boolean hasCrc, final int crc32c, final Now now)
    {
        final int off = keys.offsets[i];
        final int len = keys.lengths[i];
        final int code = KeyBytes.check(keys.bytes, off, len);
        if (code != OK_VALUE)
        {
            return code;
        }
        return putEndLocked(
            lockForKey(tenant, keys.bytes, off, len, combine(keys.hashes[i], tenantMix)), clientId, hasCrc, crc32c,
            now);
    }

    /** The rest of a PutEnd for {@code m} as {@link #lockForKey} returned it (owner shard locked, or null); unlocks. */
    private int putEndLocked(
        final ObjectMeta m, final String clientId, final boolean hasCrc, final int crc32c, final Now clocks)
    {
        if (m == null)
        {
            return OBJECT_NOT_FOUND_VALUE;
        }
        try
        {
            if (!m.clientId.equals(clientId))
            {
                return ILLEGAL_CLIENT_VALUE;
            }
            if (m.complete)
            {
                return OK_VALUE;
            }
            // Read per key, not per batch: a batch's objects keep distinct ages in the order they completed, which
            // eviction's age order (and a chain saved in one batch) relies on; the event time may be the batch's.
            final long now = clock.nanoTime();
            m.complete = true;
            shards[m.ownerShard].unlinkProcessing(m);
            m.pending = null; // a stored object keeps none of its put's state
            m.hasCrc = hasCrc;
            m.crc32c = crc32c;
            if (m.group == null)
            {
                m.leaseDeadlineNs = now;
            }
            else if (m.group.members.size() == 1 || m.group.leaseDeadlineNs - now < 0)
            {
                m.group.leaseDeadlineNs = now;
            }
            final long pinTtlNs = m.softPinTtlNs();
            if (pinTtlNs > 0)
            {
                pinLocked(m, now + pinTtlNs);
            }
            storedLocked(m, clocks.epochMillis());
            putEnds.increment();
            return OK_VALUE;
        }
        finally
        {
            unlockOwner(m);
        }
    }

    private List<ReplicaRecord> place(
        final int wanted, final long valueLength, final PutOptions options, final Set<String> avoidNodes)
    {
        return placement.place(registry.liveSegments(), wanted, valueLength, options.getPreferredSegment(), avoidNodes);
    }

    /** Abandons a put: the object disappears; its extents are freed after the discard timeout. */
    public int putRevoke(final String tenant, final String clientId, final String key)
    {
        return putRevoke(tenant, clientId, key, List.of());
    }

    /**
     * Abandons a put: the object disappears. Its extents named in {@code settled} (replicas the client sends no more
     * bytes to: every write answered OK, or none sent) are freed at once; the others after the discard timeout, since
     * a write that timed out on the client may still land. Entries naming no replica of the put are ignored.
     */
    public int putRevoke(
        final String tenant, final String clientId, final String key,
        final List<SettledReplica> settled)
    {
        final int code = checkKey(key);
        if (code != OK_VALUE)
        {
            return code;
        }
        final ObjectMeta m = lockForKey(tenant, key);
        if (m == null)
        {
            return OBJECT_NOT_FOUND_VALUE;
        }
        try
        {
            if (!m.clientId.equals(clientId))
            {
                return ILLEGAL_CLIENT_VALUE;
            }
            if (m.complete)
            {
                return INVALID_PARAMS_VALUE;
            }
            detachLocked(m);
        }
        finally
        {
            unlockOwner(m);
        }
        finishDetach(m);
        // A write that timed out on the client may still land: keep those extents out of use for a while.
        final ReplicaRecord[] held = releaseSettled(m.replicas(), m.version, settled);
        quarantine(held, m.version, clock.nanoTime() + settings.putDiscardTimeoutNs);
        putRevokes.increment();
        return OK_VALUE;
    }

    /** Frees the replicas named in {@code settled}; returns the others (the same array when none was freed). */
    private ReplicaRecord[] releaseSettled(
        final ReplicaRecord[] replicas, final long version, final List<SettledReplica> settled)
    {
        if (settled.isEmpty() || replicas.length == 0)
        {
            return replicas;
        }
        final ArrayList<ReplicaRecord> held = new ArrayList<>(replicas.length);
        for (final ReplicaRecord r : replicas)
        {
            if (isSettled(r, settled))
            {
                r.release(version);
                revokedExtentsReleased.increment();
            }
            else
            {
                held.add(r);
            }
        }
        return held.size() == replicas.length ? replicas : held.toArray(new ReplicaRecord[0]);
    }

    private static boolean isSettled(final ReplicaRecord r, final List<SettledReplica> settled)
    {
        for (final SettledReplica s : settled)
        {
            if (s.getOffset() == r.offset() && s.getSegmentId() == r.segment().segmentId() &&
                s.getNodeId().equals(r.segment().nodeId()))
            {
                return true;
            }
        }
        return false;
    }

    /** Releases {@code replicas} of an object of {@code version} at {@code releaseAtNs}, not before. */
    private void quarantine(final ReplicaRecord[] replicas, final long version, final long releaseAtNs)
    {
        if (replicas.length == 0)
        {
            return;
        }
        synchronized (pendingReleases)
        {
            pendingReleases.add(new PendingRelease(releaseAtNs, version, replicas));
        }
    }

    /**
     * Called with the bytes a put needs when no segment could take it; returns true when it freed
     * space (the put then tries once more). The evictor installs itself here.
     */
    public void allocationFailureHandler(final java.util.function.LongPredicate handler)
    {
        this.allocationFailureHandler = handler;
    }

    /**
     * Called with the number of objects to free when a put finds the store at {@link Settings#maxObjects}; returns
     * true when it freed any (the put then checks the budget once more). The evictor installs itself here.
     */
    public void objectBudgetHandler(final java.util.function.LongPredicate handler)
    {
        this.objectBudgetHandler = handler;
    }

    /**
     * The instance of {@code s} (a tenant or client id) that objects keep: a batch's handler asks once, so that each
     * of its puts finds that very instance in the table instead of comparing characters (see {@link StringCanon}).
     */
    public String canonical(final String s)
    {
        return strings.canonical(s);
    }

    /**
     * The answer to a put that found no room (counted in {@code refusals}), unless it skipped the lookup of an existing
     * object and one of its key may be there: that object's answer comes first ({@link #RETRY_WITH_LOOKUP}).
     */
    /**
     * Enters a new object into its home index (in place of {@code raced}, a removed object of the same key, if any), its
     * group and the counts; home and owner shard locked. The undo is {@link #detachLocked}.
     */
    private void insertLocked(final MetadataShard home, final MetadataShard owner, final ObjectMeta raced,
        final ObjectMeta m)
    {
        if (raced != null)
        {
            home.unlink(raced);
        }
        home.put(m);
        if (m.group != null)
        {
            m.group.members.add(m);
        }
        owner.ownedObjects++;
        objectCount.incrementAndGet();
    }

    /** Locks a new object's home shard {@code h} and owner shard {@code o} (the same, or both in ascending order). */
    private void lockPair(final int h, final int o)
    {
        shards[Math.min(h, o)].lock();
        if (h != o)
        {
            shards[Math.max(h, o)].lock();
        }
    }

    /** Undoes {@link #lockPair}. */
    private void unlockPair(final int h, final int o)
    {
        if (h != o)
        {
            shards[Math.max(h, o)].unlock();
        }
        shards[Math.min(h, o)].unlock();
    }

    private int noRoom(final boolean assumeAbsent, final long hash, final LongAdder refusals)
    {
        if (mayExist(assumeAbsent, hash))
        {
            return RETRY_WITH_LOOKUP;
        }
        refusals.increment();
        return NO_AVAILABLE_HANDLE_VALUE;
    }

    /**
     * Whether a put that skipped the lookup of an existing object ({@code assumeAbsent}) must be retried with it
     * before it may be refused: the key may be there after all (counted in {@code retriedPutLookups}).
     */
    private boolean mayExist(final boolean assumeAbsent, final long hash)
    {
        if (assumeAbsent && shards[homeShard(hash)].keys.mayContain(hash))
        {
            retriedPutLookups.increment();
            return true;
        }
        return false;
    }

    private static void refund(final TenantQuota quota, final long bytes)
    {
        if (quota != null)
        {
            quota.refund(bytes);
        }
    }

    /** Whether one more object fits the budget, after asking the handler to evict if it does not. No lock held. */
    private boolean roomForOneMoreObject()
    {
        final long max = settings.maxObjects;
        final long count = objectCount.get();
        if (count < max)
        {
            return true;
        }
        final java.util.function.LongPredicate handler = objectBudgetHandler;
        return handler != null && handler.test(count - max + 1) && objectCount.get() < max;
    }

    /** Soft pins an object until {@code deadlineNs} (or later, if already pinned longer); owner lock held. */
    private void pinLocked(final ObjectMeta m, final long deadlineNs)
    {
        final long now = clock.nanoTime();
        ObjectMeta.SoftPin p = m.softPin;
        if (p == null)
        {
            p = new ObjectMeta.SoftPin(0);
            m.softPin = p;
        }
        if (p.pinned && p.deadlineNs - now > 0)
        {
            if (deadlineNs - p.deadlineNs <= 0)
            {
                return;
            }
        }
        else if (!p.pinned)
        {
            p.pinned = true;
            softPinnedCount.incrementAndGet();
        }
        p.deadlineNs = deadlineNs;
        synchronized (pinExpiries)
        {
            pinExpiries.add(new PinExpiry(deadlineNs, m));
        }
    }

    private void unpinLocked(final ObjectMeta m)
    {
        final ObjectMeta.SoftPin p = m.softPin;
        if (p != null && p.pinned)
        {
            p.pinned = false;
            softPinnedCount.decrementAndGet();
        }
    }

    /**
     * A put of an existing readable object applies its soft-pin action: ENABLE pins it for the TTL
     * from now (never shortening a longer pin; TTL 0 changes nothing), DISABLE unpins it, PRESERVE
     * leaves it. Hard pins and groups are immutable. Owner lock held.
     */
    private void applySoftPinActionLocked(final ObjectMeta m, final int action, final long ttlNs, final long now)
    {
        if (action == SoftPinAction.SOFT_PIN_ENABLE_VALUE && ttlNs > 0)
        {
            // A pin given to an existing object during an eviction scan may lapse before the scan's pin horizon.
            pinEpoch.incrementAndGet();
            pinLocked(m, now + ttlNs);
        }
        else if (action == SoftPinAction.SOFT_PIN_DISABLE_VALUE)
        {
            if (m.hasSoftPin())
            {
                pinEpoch.incrementAndGet(); // an old object may become an ordinary eviction candidate
            }
            unpinLocked(m);
        }
    }

    /**
     * Counts the soft pins given to or taken off existing objects (a put's ENABLE or DISABLE of a stored key). An
     * evictor that kept candidates from an earlier scan uses them only while this is unchanged: an object whose pin
     * ends keeps its age, so it may be older than they are.
     */
    public long pinEpoch()
    {
        return pinEpoch.get();
    }

    /**
     * The earliest deadline among the soft pins pending in the expiry index, or Long.MAX_VALUE (nanoTime): until
     * then no soft pin lapses (entries of removed objects may make it earlier than needed, never later).
     */
    public long nextPinExpiryNs()
    {
        synchronized (pinExpiries)
        {
            final PinExpiry p = pinExpiries.peek();
            return p == null ? Long.MAX_VALUE : p.deadlineNs;
        }
    }

    /** The store's clock (nanoTime), for callers that compare with the ages of eviction candidates. */
    public long nowNs()
    {
        return clock.nanoTime();
    }

    /** Lapses soft pins whose deadline passed, through the expiry index. @return pins lapsed. */
    public int expireSoftPins()
    {
        final long now = clock.nanoTime();
        int lapsed = 0;
        while (true)
        {
            final PinExpiry due;
            synchronized (pinExpiries)
            {
                final PinExpiry p = pinExpiries.peek();
                if (p == null || p.deadlineNs - now > 0)
                {
                    break;
                }
                due = pinExpiries.poll();
            }
            final MetadataShard owner = shards[due.meta.ownerShard];
            owner.lock();
            try
            {
                final ObjectMeta m = due.meta;
                // A later ENABLE may have moved the deadline: only the entry matching it lapses the pin.
                if (!m.removed && m.hasSoftPin() && m.softPinDeadlineNs() == due.deadlineNs)
                {
                    unpinLocked(m);
                    lapsed++;
                }
            }
            finally
            {
                owner.unlock();
            }
        }
        return lapsed;
    }

    /** Objects currently soft pinned (pins lapse at their deadline, counted here after expiry runs). */
    public long softPinnedCount()
    {
        return softPinnedCount.get();
    }

    // ------------------------------------------------------------------------------------ reads

    public void leaseListener(final LeaseListener listener)
    {
        this.leaseListener = listener;
    }

    /** Installs the journal that records every readability change (the master does with events on); null: none. */
    public void eventJournal(final EventJournal journal)
    {
        this.events = journal;
    }

    public EventJournal eventJournal()
    {
        return events;
    }

    /** Installs the signer of access tokens (the master does when it issues them); null issues none. */
    public void replicaTokens(final ReplicaTokens tokens)
    {
        this.replicaTokens = tokens;
    }

    /** Extends a lease: {@code deadline = max(old, now + ttl)}; owner lock held. Counts one grant. */
    void grantLeaseLocked(final ObjectMeta m, final long now)
    {
        extendLeaseLocked(m, now, leaseListener);
        leaseGrants.increment();
    }

    private void extendLeaseLocked(final ObjectMeta m, final long now, final LeaseListener listener)
    {
        final long deadline = now + settings.leaseTtlNs;
        if (listener != null)
        {
            listener.onLeaseGranted(m.tenant, m.key(), deadline);
        }
        if (m.group != null)
        {
            if (deadline - m.group.leaseDeadlineNs > 0)
            {
                m.group.leaseDeadlineNs = deadline;
            }
        }
        else if (deadline - m.leaseDeadlineNs > 0)
        {
            m.leaseDeadlineNs = deadline;
        }
    }

    /** GetReplicaList: complete replicas of a readable object, granting a read lease. */
    public void getReplicaList(final String tenant, final String key, final Lookup out)
    {
        getReplicaList(tenant, key, out, null);
    }

    /**
     * {@link #getReplicaList(String, String, Lookup)} that, when {@code grants} is not null, records the replicas
     * there instead of in {@code out.replicas} (BatchGetReplicaList with shared grants; see {@link #signGrants}).
     */
    public void getReplicaList(final String tenant, final String key, final Lookup out, final SharedGrants grants)
    {
        out.code = checkKey(key);
        if (out.code != OK_VALUE)
        {
            clear(out);
            return;
        }
        replicaList(lockForKey(tenant, key), out, grants);
    }

    /**
     * {@link #getReplicaList(String, String, Lookup, SharedGrants)} of key {@code i} of a batch given as bytes (the
     * lookup port decodes keys without building Strings); {@code tenantMix} is {@link #tenantMix}{@code (tenant)}.
     */
    public void getReplicaList(final String tenant, final long tenantMix, final KeyBatch keys, final int i,
        final Lookup out, final SharedGrants grants)
    {
        final int off = keys.offsets[i];
        final int len = keys.lengths[i];
        out.code = KeyBytes.check(keys.bytes, off, len);
        if (out.code != OK_VALUE)
        {
            clear(out);
            return;
        }
        replicaList(lockForKey(tenant, keys.bytes, off, len, combine(keys.hashes[i], tenantMix)), out, grants);
    }

    /** Where {@link #touch} leaves its result, so that the JIT cannot drop the reads. */
    @SuppressWarnings("unused")
    private int touched;

    /**
     * Touches, without locks, the index slots and objects the lookups of a batch's keys will read
     * ({@link KeyIndex#touch}), so that their cache misses overlap; call before looking the keys up one by one.
     */
    public void touch(final String tenant, final long tenantMix, final KeyBatch keys)
    {
        int sink = 0;
        for (int i = 0, n = keys.size; i < n; i++)
        {
            final long hash = combine(keys.hashes[i], tenantMix);
            sink += shards[homeShard(hash)].keys.touch(hash);
        }
        touched = sink;
    }

    /** {@link #touch(String, long, KeyBatch)} for keys given as Strings (batch puts). */
    public void touch(final String tenant, final List<String> keys)
    {
        touch(tenant, tenantMix(tenant), KeyBatch.of(keys));
    }

    private static void clear(final Lookup out)
    {
        out.replicas = null;
        out.sizeBytes = 0;
        out.hasCrc = false;
        out.crc32c = 0;
    }

    /**
     * The answer for {@code m} as {@link #lockForKey} returned it (owner shard locked, or null); unlocks it. With
     * {@code grants}, the replicas are recorded there (see {@link #replicaListLocked}).
     */
    private void replicaList(final ObjectMeta m, final Lookup out, final SharedGrants grants)
    {
        clear(out);
        if (m == null)
        {
            out.code = OBJECT_NOT_FOUND_VALUE;
            return;
        }
        try
        {
            if (!m.complete)
            {
                out.code = REPLICA_IS_NOT_READY_VALUE;
                return;
            }
            if (replicaListLocked(m, out, grants))
            {
                grantLeaseLocked(m, clock.nanoTime());
            }
        }
        finally
        {
            unlockOwner(m);
        }
    }

    /**
     * Fills {@code out} with the complete replicas of {@code m} on live segments (READ tokens included), its length
     * and checksum; the caller holds {@code m}'s owner shard and leases it (BatchProbeKey with replicas leased it
     * already). No replica on a live segment is OBJECT_NOT_FOUND. When {@code grants} is not null, the replicas are
     * recorded there instead (to be signed with the whole batch, see {@link #signGrants}) and {@code out.replicas}
     * is left empty.
     *
     * @return whether {@code out} is OK.
     */
    boolean replicaListLocked(final ObjectMeta m, final Lookup out, final SharedGrants grants)
    {
        clear(out);
        final int count = m.replicaCount();
        final List<Replica> replicas = grants == null ? new ArrayList<>(count) : List.of();
        final long nowMs = replicaTokens == null ? 0 : clock.epochMillis();
        int live = 0;
        for (int i = 0; i < count; i++)
        {
            final ReplicaRecord r = m.replica(i);
            if (r.segment().isAlive())
            {
                live++;
                if (grants == null)
                {
                    replicas.add(readReplica(r, nowMs));
                }
                else
                {
                    grants.add(r, replicaTokens == null ? 0 : readTokenExpirySec(nowMs));
                }
            }
        }
        if (live == 0)
        {
            out.code = OBJECT_NOT_FOUND_VALUE;
            return false;
        }
        out.code = OK_VALUE;
        out.sizeBytes = m.sizeBytes;
        out.replicas = replicas;
        out.hasCrc = m.hasCrc;
        out.crc32c = m.crc32c;
        return true;
    }

    /**
     * ExistKey: true for a readable object, granting it a read lease when {@code grantLease}.
     *
     * @return 1 readable, 0 not readable, or a negative ErrorCode for a bad key.
     */
    public int exists(final String tenant, final String key, final boolean grantLease)
    {
        final int code = checkKey(key);
        if (code != OK_VALUE)
        {
            return code;
        }
        final ObjectMeta m = lockForKey(tenant, key);
        if (m == null)
        {
            return 0;
        }
        try
        {
            if (!m.isReadable())
            {
                return 0;
            }
            if (grantLease)
            {
                grantLeaseLocked(m, clock.nanoTime());
            }
            return 1;
        }
        finally
        {
            unlockOwner(m);
        }
    }

    /**
     * BatchExistKey: {@link #exists} for every key, with one clock read for the batch. Writes 1/0 or
     * a negative code per key into {@code out}.
     */
    public void existsBatch(final String tenant, final KeyBatch keys, final boolean grantLease, final int[] out)
    {
        final long now = clock.nanoTime();
        int granted = 0;
        final LeaseListener listener = leaseListener;
        final byte[] bytes = keys.bytes;
        final long tenantMix = tenantMix(tenant);
        touch(tenant, tenantMix, keys);
        for (int i = 0, n = keys.size; i < n; i++)
        {
            final int off = keys.offsets[i];
            final int len = keys.lengths[i];
            final int code = KeyBytes.check(bytes, off, len);
            if (code != OK_VALUE)
            {
                out[i] = code;
                continue;
            }
            final ObjectMeta m = lockForKey(tenant, bytes, off, len, combine(keys.hashes[i], tenantMix));
            if (m == null)
            {
                out[i] = 0;
                continue;
            }
            try
            {
                if (m.isReadable())
                {
                    out[i] = 1;
                    if (grantLease)
                    {
                        extendLeaseLocked(m, now, listener);
                        granted++;
                    }
                }
                else
                {
                    out[i] = 0;
                }
            }
            finally
            {
                unlockOwner(m);
            }
        }
        leaseGrants.add(granted);
    }

    // ------------------------------------------------------------------------------------ removal

    /** Remove: refused while leased unless {@code force}; incomplete objects cannot be removed. */
    public int remove(final String tenant, final String key, final boolean force)
    {
        final int code = checkKey(key);
        if (code != OK_VALUE)
        {
            return code;
        }
        return removeIf(tenant, key, force, -1);
    }

    /**
     * Removes one object when allowed; returns OK or the reason it stayed. With {@code clearedSeq} >= 0 (RemoveAll
     * announced a CLEARED of the tenant at that sequence) subscribers already forgot the object unless a STORED came
     * after the CLEARED: the removal is announced only then, and an object that stays is announced again.
     */
    private int removeIf(final String tenant, final String key, final boolean force, final long clearedSeq)
    {
        long leasedUntilNs = 0;
        final ObjectMeta m = lockForKey(tenant, key);
        if (m == null)
        {
            return OBJECT_NOT_FOUND_VALUE;
        }
        try
        {
            if (!m.complete)
            {
                return REPLICA_IS_NOT_READY_VALUE;
            }
            final long now = clock.nanoTime();
            if (m.isLeased(now))
            {
                if (!force)
                {
                    if (clearedSeq >= 0 && m.storedSeq < clearedSeq && m.isReadable())
                    {
                        storedLocked(m); // survives the RemoveAll: subscribers learn it is still there
                    }
                    return OBJECT_HAS_LEASE_VALUE;
                }
                // Readers may still hold read tokens for these extents: keep them out of use until the lease ends.
                leasedUntilNs = m.leaseDeadlineNs();
            }
            if (clearedSeq < 0 || m.storedSeq > clearedSeq)
            {
                removedLocked(m, KvEventReason.KV_REASON_REMOVED);
            }
            detachLocked(m);
            if (leasedUntilNs == 0)
            {
                m.releaseReplicas();
            }
            tombstoneIfAdopted(m);
        }
        finally
        {
            unlockOwner(m);
        }
        finishDetach(m);
        if (leasedUntilNs != 0)
        {
            quarantine(m.replicas(), m.version, leasedUntilNs);
        }
        removedObjects.increment();
        return OK_VALUE;
    }

    /** Removes every complete object of the tenant whose key matches; leased ones are skipped unless force. */
    public long removeMatching(final String tenant, final Predicate<String> keyFilter, final boolean force)
    {
        // RemoveAll with events: one CLEARED of the tenant instead of an event per key (see removeIf).
        final EventJournal journal = events;
        final long clearedSeq = keyFilter == null && journal != null ?
            journal.cleared(tenant, KvEventReason.KV_REASON_REMOVE_ALL) : -1;
        long removed = 0;
        for (final String key : collectKeys(tenant, keyFilter, Integer.MAX_VALUE))
        {
            if (removeIf(tenant, key, force, clearedSeq) == OK_VALUE)
            {
                removed++;
            }
        }
        return removed;
    }

    private List<String> collectKeys(final String tenant, final Predicate<String> keyFilter, final int limit)
    {
        final List<String> keys = new ArrayList<>();
        for (final MetadataShard shard : shards)
        {
            shard.lock();
            try
            {
                final KeyIndex index = shard.keys;
                for (int i = 0, n = index.capacity(); i < n; i++)
                {
                    final ObjectMeta m = index.at(i);
                    if (m == null || !m.tenant.equals(tenant))
                    {
                        continue;
                    }
                    final String key = m.key();
                    if (keyFilter == null || keyFilter.test(key))
                    {
                        keys.add(key);
                        if (keys.size() >= limit)
                        {
                            return keys;
                        }
                    }
                }
            }
            finally
            {
                shard.unlock();
            }
        }
        return keys;
    }

    /** Lists objects of a tenant (no lease), sorted by key, at most {@code limit} (capped by the setting). */
    public List<KeyInfo> listKeys(final String tenant, final Predicate<String> keyFilter, final int limit, final boolean[] truncatedOut)
    {
        final int cap = limit <= 0 ? settings.listKeysLimit : Math.min(limit, settings.listKeysLimit);
        final List<String> keys = collectKeys(tenant, keyFilter, cap + 1);
        truncatedOut[0] = keys.size() > cap;
        keys.sort(null);
        final List<KeyInfo> infos = new ArrayList<>(Math.min(keys.size(), cap));
        final long now = clock.nanoTime();
        for (final String key : keys)
        {
            if (infos.size() >= cap)
            {
                break;
            }
            final ObjectMeta m = lockForKey(tenant, key);
            if (m == null)
            {
                continue;
            }
            try
            {
                int live = 0;
                for (final ReplicaRecord r : m.replicas())
                {
                    live += r.segment().isAlive() ? 1 : 0;
                }
                final long leaseLeftNs = m.leaseDeadlineNs() - now;
                final KeyInfo.Builder info = KeyInfo.newBuilder();
                if (m.hasCrc)
                {
                    info.setCrc32C(m.crc32c);
                }
                infos.add(info
                    .setKey(key)
                    .setValueLength(m.sizeBytes)
                    .setStatus(m.complete ? ReplicaStatus.REPLICA_STATUS_COMPLETE : ReplicaStatus.REPLICA_STATUS_PROCESSING)
                    .setReplicas(live)
                    .setLeaseRemainingMs(leaseLeftNs > 0 ? leaseLeftNs / 1_000_000L : 0)
                    .setHardPinned(m.hardPinned)
                    .setSoftPinned(m.isSoftPinned(now))
                    .setGroupId(m.group == null ? "" : m.group.groupId)
                    .build());
            }
            finally
            {
                unlockOwner(m);
            }
        }
        return infos;
    }

    // ------------------------------------------------------------------------------------ rebuild from ledgers

    /** What became of one reported ledger entry. */
    public enum Adoption
    {
        /** A new readable object. */
        OBJECT,
        /** Another replica of an object already rebuilt with the same version. */
        REPLICA,
        /** Already known (a report repeated after a failed registration). */
        DUPLICATE,
        /** An equal or newer version of the key is known, or the key is being put on this master. */
        REJECTED_STALE,
        /** The extent overlaps one already taken in the segment. */
        REJECTED_OVERLAP,
        /** A bad key, tenant, version or range, or the same version with another length or group. */
        REJECTED_INVALID,
        /** Removed or evicted on this master after another node reported it. */
        REJECTED_REMOVED,
        /** A new object, and the master holds {@link Settings#maxObjects} already (the node drops the entry). */
        REJECTED_BUDGET;

        public boolean rejected()
        {
            return ordinal() >= REJECTED_STALE.ordinal();
        }
    }

    /**
     * Rebuilds metadata from one entry of a node's ledger: the extent becomes a replica of a complete object
     * (created if the key is unknown) and is taken in the segment's allocator. Conflicts resolve the same way
     * whatever order reports arrive in: the highest version of a key wins (a newer report replaces an older
     * rebuilt object, whose extents are freed and their nodes told); equal versions are replicas; an object put
     * on this master is never displaced; an extent that overlaps a taken one is refused. Leases start empty
     * (the object's age is now); a soft pin keeps what was left of it when the node reported.
     */
    public Adoption adopt(final MountedSegment segment, final LedgerEntry e)
    {
        rebuild.entriesReported.increment();
        final Adoption outcome = adoptEntry(segment, e);
        rebuild.count(outcome);
        return outcome;
    }

    private Adoption adoptEntry(final MountedSegment segment, final LedgerEntry e)
    {
        final String tenant = e.getTenant();
        final String key = e.getKey();
        final long length = e.getValueLength();
        final long offset = e.getOffset();
        if (tenant.isEmpty() || Limits.checkTenant(tenant) != null || checkKey(key) != OK_VALUE ||
            e.getVersion() == 0 || length < 0 || length > Limits.MAX_VALUE_BYTES || offset < 0 ||
            offset > segment.sizeBytes() || Math.max(1, length) > segment.sizeBytes() - offset ||
            e.getGroupId().length() > Limits.MAX_KEY_BYTES)
        {
            return Adoption.REJECTED_INVALID;
        }
        final long version = e.getVersion();
        lastVersion.accumulateAndGet(version, Math::max); // later puts get larger versions than anything reported
        if (tombstoned(tenant, key, version))
        {
            return Adoption.REJECTED_REMOVED;
        }
        final byte[] keyBytes = KeyBytes.utf8(key);
        final long hash = hashOf(tenant, keyBytes, 0, keyBytes.length);
        for (int attempt = 0; attempt < 4; attempt++)
        {
            final ObjectMeta existing = lockForKey(tenant, keyBytes, 0, keyBytes.length, hash);
            if (existing != null)
            {
                final Adoption decided;
                try
                {
                    decided = adoptIntoExistingLocked(existing, segment, e);
                }
                finally
                {
                    unlockOwner(existing);
                }
                if (decided != null)
                {
                    return decided;
                }
                finishDetach(existing); // a newer version replaced it: create below
                rebuild.replacedOlder.increment();
            }
            if (objectCount.get() >= settings.maxObjects)
            {
                // A rebuild must not fill the heap either: what does not fit is dropped, as if evicted.
                return Adoption.REJECTED_BUDGET;
            }
            final Adoption created = createAdopted(segment, e, keyBytes, hash);
            if (created != null)
            {
                return created;
            }
            // Another report or put of the key got in between: decide again against it.
        }
        return Adoption.REJECTED_STALE;
    }

    /**
     * Decides a report against the object already known for its key; owner lock held.
     *
     * @return the outcome, or null when the object was older and has been detached (the caller creates anew).
     */
    private Adoption adoptIntoExistingLocked(final ObjectMeta m, final MountedSegment segment, final LedgerEntry e)
    {
        final long version = e.getVersion();
        if (m.version == version)
        {
            final String group = m.group == null ? "" : m.group.groupId;
            if (!m.complete || m.sizeBytes != e.getValueLength() || !group.equals(e.getGroupId()) ||
                (m.hasCrc && e.hasCrc32C() && m.crc32c != e.getCrc32C()))
            {
                return Adoption.REJECTED_INVALID; // replicas of one version hold the same value
            }
            for (final ReplicaRecord r : m.replicas())
            {
                if (r.segment() == segment)
                {
                    return r.offset() == e.getOffset() ? Adoption.DUPLICATE : Adoption.REJECTED_STALE;
                }
            }
            if (!segment.reserve(e.getOffset(), e.getValueLength()))
            {
                return Adoption.REJECTED_OVERLAP;
            }
            final ReplicaRecord[] had = m.replicas();
            final ReplicaRecord[] replicas = Arrays.copyOf(had, had.length + 1);
            replicas[had.length] = new ReplicaRecord(segment, e.getOffset(), e.getValueLength());
            m.replicas(replicas);
            if (!m.hasCrc && e.hasCrc32C())
            {
                m.hasCrc = true;
                m.crc32c = e.getCrc32C();
            }
            return Adoption.REPLICA;
        }
        if (version < m.version || !m.adopted || !m.complete)
        {
            return Adoption.REJECTED_STALE;
        }
        // A newer version than the one rebuilt so far: the older object's extents go back and their nodes forget it.
        removedLocked(m, KvEventReason.KV_REASON_REPLACED);
        detachLocked(m);
        m.releaseReplicas();
        return null;
    }

    /** Creates a complete object from a report; null when the key appeared meanwhile (nothing changed then). */
    private Adoption createAdopted(
        final MountedSegment segment, final LedgerEntry e, final byte[] keyBytes, final long hash)
    {
        final String tenant = e.getTenant();
        if (!segment.reserve(e.getOffset(), e.getValueLength()))
        {
            return Adoption.REJECTED_OVERLAP;
        }
        final ReplicaRecord replica = new ReplicaRecord(segment, e.getOffset(), e.getValueLength());
        final String groupId = e.getGroupId();
        // The parent its writer named: linked now if the store holds it (before the object is, as a put does), else
        // the object waits for it, as reports come in any order.
        final byte[] parentKey = namedParent(e, keyBytes);
        final byte[][] parentFound = new byte[1][];
        final Object parentUnit = parentKey == null ? null : addChildTo(tenant, parentKey, groupId, parentFound);
        final ObjectMeta m;
        final int h = homeShard(hash);
        final int o = groupId.isEmpty() ? h : groupShard(tenant, groupId);
        lockPair(h, o);
        try
        {
            final MetadataShard home = shards[h];
            final ObjectMeta raced = home.get(tenant, keyBytes, 0, keyBytes.length, hash);
            if (raced != null && !raced.removed)
            {
                segment.free(e.getOffset());
                unlinkParent(parentUnit);
                return null;
            }
            final long now = clock.nanoTime();
            final MetadataShard owner = shards[o];
            final String keptTenant = strings.canonical(tenant);
            final GroupMeta group = groupId.isEmpty() ? null : owner.groupOrCreate(keptTenant, groupId);
            final boolean hardPin = (e.getFlags() & io.granary.protocol.CommitRecord.FLAG_HARD_PIN) != 0;
            m = new ObjectMeta(keptTenant, keyBytes, hash, o, e.getValueLength(), "", now, hardPin,
                group, new ReplicaRecord[] {replica}, 0, e.getVersion(), true);
            m.complete = true;
            if (parentUnit != null)
            {
                m.parentUnit = parentUnit;
                m.parentKeyBytes = parentFound[0];
                rebuild.parentsLinked.increment();
            }
            else if (parentKey != null && parentFound[0] == null)
            {
                m.parentKeyBytes = parentKey; // waiting: set before it is registered, read by whoever links it
                awaitedParents.add(m, parentKey);
            }
            m.hasCrc = e.hasCrc32C();
            m.crc32c = e.getCrc32C();
            // Its age is when it became readable, the node's COMMIT: reads before the restart are not known, but the
            // commit order is, and eviction then takes what was stored first rather than what was reported first.
            final long committedNs = now - reportedAgeNs(e);
            if (group == null)
            {
                m.leaseDeadlineNs = committedNs;
            }
            else if (group.members.isEmpty() || group.leaseDeadlineNs - committedNs < 0)
            {
                group.leaseDeadlineNs = committedNs; // a group is as young as its youngest member
            }
            insertLocked(home, owner, raced, m);
            final TenantQuota quota = tenantQuota(keptTenant);
            if (quota != null)
            {
                quota.charge(m.sizeBytes); // it exists already: counted even beyond the quota, puts then evict
            }
            final long pinLeftNs = softPinLeftNs(e);
            if (pinLeftNs > 0)
            {
                pinLocked(m, now + pinLeftNs);
            }
            storedLocked(m);
        }
        finally
        {
            unlockPair(h, o);
        }
        if (m.parentUnit == null && m.parentKeyBytes != null)
        {
            linkAwaiting(m); // its parent may have arrived since the lookup above, and seen no child waiting yet
        }
        linkAwaitingChildren(m.tenant, keyBytes, hash);
        return Adoption.OBJECT;
    }

    /**
     * The key of the parent a ledger entry's writer named, or null: none, the object itself, or a malformed key (a
     * node checks it at COMMIT; one that did not is taken without the parent).
     */
    private static byte[] namedParent(final LedgerEntry e, final byte[] keyBytes)
    {
        final String parentKey = e.getParentKey();
        if (parentKey.isEmpty() || checkKey(parentKey) != OK_VALUE)
        {
            return null;
        }
        final byte[] parentBytes = KeyBytes.utf8(parentKey);
        return Arrays.equals(parentBytes, keyBytes) ? null : parentBytes;
    }

    /** What is left of a reported soft pin: its TTL (the default, or as put, capped) minus the entry's age. */
    private long softPinLeftNs(final LedgerEntry e)
    {
        if ((e.getFlags() & io.granary.protocol.CommitRecord.FLAG_SOFT_PIN) == 0)
        {
            return 0;
        }
        final long ttlNs = (e.getFlags() & io.granary.protocol.CommitRecord.FLAG_SOFT_PIN_DEFAULT_TTL) != 0 ?
            settings.softPinDefaultTtlNs :
            Math.min(settings.softPinMaxTtlNs, Math.min(e.getSoftPinTtlMs(), Long.MAX_VALUE / 1_000_000L) * 1_000_000L);
        return ttlNs - reportedAgeNs(e);
    }

    /** The longest age a ledger entry is taken to have: ten years. */
    static final long MAX_REPORTED_AGE_NS = 10L * 365 * 24 * 3600 * 1_000_000_000L;

    /**
     * How long ago the node took the entry's COMMIT, as it reported; at most {@link #MAX_REPORTED_AGE_NS}, which is
     * also what a malformed age (a uint64 beyond 2^63 - 1, negative here) counts as: never an age in the future.
     */
    private static long reportedAgeNs(final LedgerEntry e)
    {
        final long ms = e.getAgeMs();
        return ms < 0 || ms > MAX_REPORTED_AGE_NS / 1_000_000L ? MAX_REPORTED_AGE_NS : ms * 1_000_000L;
    }

    /** A rebuilt object leaves for good (remove, eviction): remember its version against late reports. */
    private void tombstoneIfAdopted(final ObjectMeta m)
    {
        if (m.adopted)
        {
            synchronized (tombstones)
            {
                tombstones.merge(m.tenant + '\u0000' + m.key(), m.version, Math::max);
            }
        }
    }

    private boolean tombstoned(final String tenant, final String key, final long version)
    {
        synchronized (tombstones)
        {
            final Long removed = tombstones.get(tenant + '\u0000' + key);
            return removed != null && version <= removed;
        }
    }

    /** Counts of what ledger reports rebuilt on this master. */
    public RebuildCounters rebuildCounters()
    {
        return rebuild;
    }

    /**
     * Rebuilt objects whose named parent the store does not hold (not reported yet, or lost): until it arrives,
     * prefix-aware eviction treats them as objects without a parent.
     */
    public int rebuiltAwaitingParents()
    {
        return awaitedParents.size();
    }

    /** What ledger reports rebuilt on this master; thread safe. */
    public static final class RebuildCounters
    {
        final LongAdder entriesReported = new LongAdder();
        final LongAdder objects = new LongAdder();
        final LongAdder replicas = new LongAdder();
        final LongAdder duplicates = new LongAdder();
        final LongAdder rejectedStale = new LongAdder();
        final LongAdder rejectedOverlap = new LongAdder();
        final LongAdder rejectedInvalid = new LongAdder();
        final LongAdder rejectedRemoved = new LongAdder();
        final LongAdder rejectedBudget = new LongAdder();
        final LongAdder replacedOlder = new LongAdder();
        final LongAdder parentsLinked = new LongAdder();

        void count(final Adoption outcome)
        {
            switch (outcome)
            {
                case OBJECT: objects.increment(); break;
                case REPLICA: replicas.increment(); break;
                case DUPLICATE: duplicates.increment(); break;
                case REJECTED_STALE: rejectedStale.increment(); break;
                case REJECTED_OVERLAP: rejectedOverlap.increment(); break;
                case REJECTED_INVALID: rejectedInvalid.increment(); break;
                case REJECTED_REMOVED: rejectedRemoved.increment(); break;
                default: rejectedBudget.increment(); break;
            }
        }

        public long entriesReported()
        {
            return entriesReported.sum();
        }

        /** Objects created from reports. */
        public long objects()
        {
            return objects.sum();
        }

        /** Replicas rebuilt: the first of every object plus every further one. */
        public long replicas()
        {
            return objects.sum() + replicas.sum();
        }

        public long duplicates()
        {
            return duplicates.sum();
        }

        public long rejectedStale()
        {
            return rejectedStale.sum();
        }

        public long rejectedOverlap()
        {
            return rejectedOverlap.sum();
        }

        public long rejectedInvalid()
        {
            return rejectedInvalid.sum();
        }

        public long rejectedRemoved()
        {
            return rejectedRemoved.sum();
        }

        /** New objects refused because the master held {@link Settings#maxObjects} already. */
        public long rejectedBudget()
        {
            return rejectedBudget.sum();
        }

        /**
         * Rebuilt objects linked to the parent their writer named (when adopted, or when the parent arrived later),
         * so that prefix-aware eviction keeps their chain's order.
         */
        public long parentsLinked()
        {
            return parentsLinked.sum();
        }

        /** Rebuilt objects a newer reported version replaced. */
        public long replacedOlder()
        {
            return replacedOlder.sum();
        }
    }

    /** What the master holds about {@code key}, without granting a lease; null when there is no such object. */
    public ObjectSnapshot query(final String tenant, final String key)
    {
        if (checkKey(key) != OK_VALUE)
        {
            return null;
        }
        final ObjectMeta m = lockForKey(tenant, key);
        if (m == null)
        {
            return null;
        }
        try
        {
            final long now = clock.nanoTime();
            final List<ObjectSnapshot.Replica> replicas = new ArrayList<>(m.replicaCount());
            for (final ReplicaRecord r : m.replicas())
            {
                final MountedSegment s = r.segment();
                replicas.add(new ObjectSnapshot.Replica(
                    s.name(), s.nodeName(), s.endpoint(), r.offset(), r.length(), s.isAlive()));
            }
            final long leaseLeftNs = m.leaseDeadlineNs() - now;
            final boolean softPinned = m.isSoftPinned(now);
            final long pinLeftNs = softPinned && m.softPinDeadlineNs() != 0 ? m.softPinDeadlineNs() - now : 0;
            return new ObjectSnapshot(m.tenant, key, m.sizeBytes, m.complete, m.hardPinned, softPinned,
                leaseLeftNs > 0 ? leaseLeftNs / 1_000_000L : 0, pinLeftNs > 0 ? pinLeftNs / 1_000_000L : 0,
                m.group == null ? null : m.group.groupId, List.copyOf(replicas));
        }
        finally
        {
            unlockOwner(m);
        }
    }

    // ------------------------------------------------------------------------------------ housekeeping

    /**
     * Drops every replica on the given (dead or unmounted) segments and erases objects left with
     * none. @return the number of objects erased.
     */
    public long purgeSegments(final Set<MountedSegment> gone)
    {
        if (gone.isEmpty())
        {
            return 0;
        }
        long erased = 0;
        long dropped = 0;
        final List<ObjectMeta> toUnlink = new ArrayList<>();
        for (final MetadataShard shard : shards)
        {
            final List<ObjectMeta> affected = new ArrayList<>();
            shard.lock();
            try
            {
                shard.keys.forEach(m ->
                {
                    if (m.ownerShard == shard.index && touches(m, gone))
                    {
                        affected.add(m);
                    }
                });
                for (final Map<String, GroupMeta> groups : shard.groupsByTenant.values())
                {
                    for (final GroupMeta g : groups.values())
                    {
                        for (final ObjectMeta m : g.members)
                        {
                            if (homeShard(m.hash) != shard.index && touches(m, gone))
                            {
                                affected.add(m);
                            }
                        }
                    }
                }
                for (final ObjectMeta m : affected)
                {
                    final List<ReplicaRecord> kept = new ArrayList<>(m.replicaCount());
                    for (final ReplicaRecord r : m.replicas())
                    {
                        if (gone.contains(r.segment()))
                        {
                            dropped++;
                        }
                        else
                        {
                            kept.add(r);
                        }
                    }
                    m.replicas(kept.toArray(new ReplicaRecord[0]));
                    if (m.replicaCount() == 0)
                    {
                        if (m.complete)
                        {
                            removedLocked(m, KvEventReason.KV_REASON_NODE_LOST);
                        }
                        detachLocked(m);
                        erased++;
                        if (homeShard(m.hash) != m.ownerShard)
                        {
                            toUnlink.add(m);
                        }
                    }
                }
            }
            finally
            {
                shard.unlock();
            }
        }
        for (final ObjectMeta m : toUnlink)
        {
            unlinkHome(m);
        }
        lostObjects.add(erased);
        if (dropped > 0)
        {
            LOG.info("dropped {} replicas on {} lost segment(s); erased {} objects left without a replica",
                dropped, gone.size(), erased);
        }
        return erased;
    }

    private static boolean touches(final ObjectMeta m, final Set<MountedSegment> gone)
    {
        for (int i = 0, n = m.replicaCount(); i < n; i++) // every object is asked: no array per object
        {
            if (gone.contains(m.replica(i).segment()))
            {
                return true;
            }
        }
        return false;
    }

    /** Puts started and not yet finished (PROCESSING objects), counted shard by shard under each lock. */
    public int processingPuts()
    {
        int count = 0;
        for (final MetadataShard shard : shards)
        {
            shard.lock();
            try
            {
                count += shard.processingCount();
            }
            finally
            {
                shard.unlock();
            }
        }
        return count;
    }

    /**
     * Reclaims puts never completed within the release timeout and frees quarantined extents whose
     * time has come. Cheap when there is nothing to do. @return objects reclaimed.
     */
    public int reclaimAbandonedPuts()
    {
        final long now = clock.nanoTime();
        int reclaimed = 0;
        for (final MetadataShard shard : shards)
        {
            // A hint read without the lock (a pending state's start is final; the state may be gone if the put just
            // completed: then look under the lock); checked again under it.
            final ObjectMeta oldest = shard.processingHead;
            final ObjectMeta.PendingPut hint = oldest == null ? null : oldest.pending;
            if (oldest == null || (hint != null && now - hint.startNs <= settings.putReleaseTimeoutNs))
            {
                continue;
            }
            final List<ObjectMeta> expired = new ArrayList<>();
            shard.lock();
            try
            {
                ObjectMeta head;
                while ((head = shard.processingHead) != null &&
                    now - head.pending.startNs > settings.putReleaseTimeoutNs)
                {
                    detachLocked(head); // takes it off the list
                    head.releaseReplicas();
                    expired.add(head);
                }
            }
            finally
            {
                shard.unlock();
            }
            for (final ObjectMeta m : expired)
            {
                finishDetach(m);
                reclaimed++;
                releasedPuts.increment();
            }
        }

        releaseDueExtents(now);
        if (reclaimed > 0)
        {
            LOG.info("reclaimed {} abandoned put(s) older than the release timeout", reclaimed);
        }
        return reclaimed;
    }

    /**
     * Frees the quarantined extents whose time has come (those of force-removed objects whose lease ended, of revoked
     * puts past the discard timeout). The housekeeper calls it every period; a put that finds no room calls it first,
     * so that space already due is never refused for waiting on the next period. @return extents freed.
     */
    private int releaseDueExtents(final long now)
    {
        int freed = 0;
        while (true)
        {
            final PendingRelease due;
            synchronized (pendingReleases)
            {
                final PendingRelease p = pendingReleases.peek();
                if (p == null || p.releaseAtNs - now > 0)
                {
                    break;
                }
                due = pendingReleases.poll();
            }
            for (final ReplicaRecord r : due.replicas)
            {
                r.release(due.version);
                freed++;
            }
        }
        return freed;
    }

    public int pendingReleaseCount()
    {
        synchronized (pendingReleases)
        {
            return pendingReleases.size();
        }
    }

    // ------------------------------------------------------------------------------------ eviction mechanism

    /** Where {@link #scanEvictionCandidates} puts the units it finds. */
    public interface EvictionSink
    {
        /**
         * Whether a unit of this age ({@link EvictionCandidate#ageNs()}) and pin state could be kept: false skips an
         * ungrouped object before a candidate is built for it (a round refuses most of the units it scans).
         */
        boolean wants(long ageNs, boolean softPinned);

        void accept(EvictionCandidate candidate);
    }

    /**
     * Offers every unit that may be evicted now to {@code sink}, one shard at a time under its lock:
     * ungrouped complete objects that are not leased or hard pinned, and groups with no lease and at
     * least one complete, unpinned member. Soft-pinned units are offered only with {@code includeSoftPinned}.
     */
    public void scanEvictionCandidates(final boolean includeSoftPinned, final EvictionSink sink)
    {
        scanEvictionCandidates(includeSoftPinned, null, sink);
    }

    /** {@link #scanEvictionCandidates(boolean, EvictionSink)} of one tenant's units only ({@code tenant} null: all). */
    public void scanEvictionCandidates(final boolean includeSoftPinned, final String tenant, final EvictionSink sink)
    {
        for (final MetadataShard shard : shards)
        {
            shard.lock();
            try
            {
                final long now = clock.nanoTime();
                final KeyIndex keys = shard.keys;
                for (int i = 0, n = keys.capacity(); i < n; i++)
                {
                    final ObjectMeta m = keys.at(i);
                    if (m == null || m.group != null || m.ownerShard != shard.index || !evictableMember(m) ||
                        m.leaseDeadlineNs - now > 0 || (tenant != null && !m.tenant.equals(tenant)))
                    {
                        continue;
                    }
                    final boolean soft = m.isSoftPinned(now);
                    if ((includeSoftPinned || !soft) && sink.wants(m.leaseDeadlineNs, soft))
                    {
                        sink.accept(
                            new EvictionCandidate(m, m.ownerShard, m.leaseDeadlineNs, m.sizeBytes, soft, m.childRefs));
                    }
                }
                for (final Map<String, GroupMeta> groups : tenant == null ? shard.groupsByTenant.values() :
                    List.of(shard.groupsByTenant.getOrDefault(tenant, Map.of())))
                {
                    for (final GroupMeta g : groups.values())
                    {
                        final EvictionCandidate c = candidateLocked(g, now);
                        if (c != null && (includeSoftPinned || !c.softPinned))
                        {
                            sink.accept(c);
                        }
                    }
                }
            }
            finally
            {
                shard.unlock();
            }
        }
    }

    private static boolean evictableMember(final ObjectMeta m)
    {
        return m.complete && !m.removed && !m.hardPinned;
    }

    /** The unit as an eviction candidate now, or null when it must not be evicted; owner lock held. */
    private EvictionCandidate candidateLocked(final Object unit, final long now)
    {
        if (unit instanceof ObjectMeta)
        {
            final ObjectMeta m = (ObjectMeta)unit;
            if (!evictableMember(m) || m.isLeased(now))
            {
                return null;
            }
            return new EvictionCandidate(
                m, m.ownerShard, m.leaseDeadlineNs, m.sizeBytes, m.isSoftPinned(now), m.childRefs);
        }
        final GroupMeta g = (GroupMeta)unit;
        if (g.leaseDeadlineNs - now > 0)
        {
            return null;
        }
        long bytes = 0;
        int evictable = 0;
        boolean soft = false;
        for (final ObjectMeta m : g.members)
        {
            if (evictableMember(m))
            {
                evictable++;
                bytes += m.sizeBytes;
                soft |= m.isSoftPinned(now);
            }
        }
        return evictable == 0 ? null : new EvictionCandidate(g, g.shard, g.leaseDeadlineNs, bytes, soft, g.childRefs);
    }

    /**
     * Evicts a candidate if it is still evictable (rechecked under its shard lock): the object, or
     * every complete, not hard-pinned member of the group. Soft-pinned units only when allowed.
     *
     * @return objects evicted (0 when the candidate changed and was skipped); bytes added to {@code bytesOut[0]}.
     */
    public int evict(final EvictionCandidate candidate, final boolean allowSoftPinned, final long[] bytesOut)
    {
        return evict(candidate, allowSoftPinned, false, bytesOut, null);
    }

    /**
     * {@link #evict(EvictionCandidate, boolean, long[])} for prefix-aware eviction. With {@code leafOnly} the unit is
     * skipped when a live child names it as its parent (rechecked under its lock). {@code bytesOut[1]} is set to 1
     * when the unit evicted still had children (a fallback eviction that leaves a hole), else 0. When
     * {@code newLeaves} is not null, every parent unit of the victims that this eviction left without children, and
     * that may be evicted now, is offered to it as a fresh candidate.
     */
    public int evict(
        final EvictionCandidate candidate,
        final boolean allowSoftPinned,
        final boolean leafOnly,
        final long[] bytesOut,
        final java.util.function.Consumer<EvictionCandidate> newLeaves)
    {
        return evict(candidate, allowSoftPinned, leafOnly, false, bytesOut, newLeaves);
    }

    /**
     * Evicts an unpinned candidate taken from an earlier scan only if its age is still the one the scan saw (a unit
     * leased since then is younger now, and must wait for a later scan to place it); otherwise as
     * {@link #evict(EvictionCandidate, boolean, long[])} without soft-pinned units.
     */
    public int evictIfUnchanged(final EvictionCandidate candidate, final long[] bytesOut)
    {
        return evict(candidate, false, false, true, bytesOut, null);
    }

    private int evict(
        final EvictionCandidate candidate,
        final boolean allowSoftPinned,
        final boolean leafOnly,
        final boolean sameAge,
        final long[] bytesOut,
        final java.util.function.Consumer<EvictionCandidate> newLeaves)
    {
        final MetadataShard owner = shards[candidate.shard];
        final List<ObjectMeta> victims = new ArrayList<>();
        List<Object> parents = null;
        owner.lock();
        try
        {
            final long now = clock.nanoTime();
            final EvictionCandidate fresh = candidateLocked(candidate.unit, now);
            if (fresh == null || (fresh.softPinned && !allowSoftPinned) ||
                (candidate.unit instanceof ObjectMeta && ((ObjectMeta)candidate.unit).removed) ||
                (leafOnly && !fresh.isLeaf()) || (sameAge && fresh.ageNs != candidate.ageNs))
            {
                return 0;
            }
            if (bytesOut.length > 1)
            {
                bytesOut[1] = fresh.isLeaf() ? 0 : 1;
            }
            if (candidate.unit instanceof ObjectMeta)
            {
                victims.add((ObjectMeta)candidate.unit);
            }
            else
            {
                for (final ObjectMeta m : ((GroupMeta)candidate.unit).members)
                {
                    if (evictableMember(m))
                    {
                        victims.add(m);
                    }
                }
            }
            for (final ObjectMeta m : victims)
            {
                removedLocked(m, KvEventReason.KV_REASON_EVICTED);
                if (newLeaves != null && m.parentUnit != null)
                {
                    if (parents == null)
                    {
                        parents = new ArrayList<>(2);
                    }
                    if (!parents.contains(m.parentUnit))
                    {
                        parents.add(m.parentUnit);
                    }
                }
                detachLocked(m);
                m.releaseReplicas();
                tombstoneIfAdopted(m);
                bytesOut[0] += m.sizeBytes;
            }
        }
        finally
        {
            owner.unlock();
        }
        for (final ObjectMeta m : victims)
        {
            finishDetach(m);
        }
        if (parents != null)
        {
            offerIfLeaf(parents, newLeaves);
        }
        return victims.size();
    }

    /** Offers each unit that has no child left and may be evicted now, as a candidate taken under its lock. */
    private void offerIfLeaf(final List<Object> units, final java.util.function.Consumer<EvictionCandidate> sink)
    {
        for (final Object unit : units)
        {
            if (ParentLinks.childRefs(unit) > 0)
            {
                continue;
            }
            final MetadataShard shard = shards[ParentLinks.shardOf(unit)];
            final EvictionCandidate c;
            shard.lock();
            try
            {
                final boolean gone = unit instanceof ObjectMeta ? ((ObjectMeta)unit).removed :
                    ((GroupMeta)unit).members.isEmpty();
                c = gone ? null : candidateLocked(unit, clock.nanoTime());
            }
            finally
            {
                shard.unlock();
            }
            if (c != null && c.isLeaf())
            {
                sink.accept(c);
            }
        }
    }

    // ------------------------------------------------------------------------------------ events

    /** Records that {@code m} became readable (or is announced again); owner lock held. */
    private void storedLocked(final ObjectMeta m)
    {
        storedLocked(m, clock.epochMillis());
    }

    /** {@link #storedLocked(ObjectMeta)} at {@code epochMillis} (the wall clock as the caller read it). */
    private void storedLocked(final ObjectMeta m, final long epochMillis)
    {
        final EventJournal journal = events;
        if (journal != null)
        {
            m.storedSeq = journal.stored(m.tenant, m.keyBytes, m.group == null ? null : m.group.groupId, m.sizeBytes,
                m.group != null && groupReadableLocked(m.group), m.parentKeyBytes, epochMillis);
        }
    }

    /**
     * An unfinished member left group {@code g} (revoked, preempted, abandoned, or lost with its node): when every
     * member left is readable, the group just became complete without a STORED saying so, so the member announced
     * last is announced again, now with {@code group_complete} (a consumer's view is unchanged by it). Owner lock held.
     */
    private void announceGroupCompletedLocked(final GroupMeta g)
    {
        if (events == null || !groupReadableLocked(g))
        {
            return;
        }
        ObjectMeta last = null;
        for (final ObjectMeta member : g.members)
        {
            if (last == null || member.storedSeq > last.storedSeq)
            {
                last = member;
            }
        }
        storedLocked(last);
    }

    /** Records that a readable {@code m} stops being readable; owner lock held, before it is detached. */
    private void removedLocked(final ObjectMeta m, final KvEventReason reason)
    {
        final EventJournal journal = events;
        if (journal != null)
        {
            journal.removed(m.tenant, m.keyBytes, m.group == null ? null : m.group.groupId, m.sizeBytes, reason);
        }
    }

    /** Every member the group has now is readable; its shard lock held. */
    private static boolean groupReadableLocked(final GroupMeta g)
    {
        for (final ObjectMeta member : g.members)
        {
            if (!member.isReadable())
            {
                return false;
            }
        }
        return !g.members.isEmpty();
    }

    @Override
    public void scanShard(final int index, final String tenantOrNull, final SnapshotSource.Sink sink)
    {
        final MetadataShard shard = shards[index];
        shard.lock();
        try
        {
            // Every object once: those this shard owns through its key index, then group members homed elsewhere.
            shard.keys.forEach(m ->
            {
                if (m.ownerShard == shard.index && m.isReadable() &&
                    (tenantOrNull == null || tenantOrNull.equals(m.tenant)))
                {
                    sink.onObject(m.tenant, m.keyBytes, m.group == null ? null : m.group.groupId, m.sizeBytes,
                        m.parentKeyBytes);
                }
            });
            for (final Map.Entry<String, Map<String, GroupMeta>> byTenant : shard.groupsByTenant.entrySet())
            {
                if (tenantOrNull != null && !tenantOrNull.equals(byTenant.getKey()))
                {
                    continue;
                }
                for (final GroupMeta g : byTenant.getValue().values())
                {
                    for (final ObjectMeta m : g.members)
                    {
                        if (homeShard(m.hash) != shard.index && m.isReadable())
                        {
                            sink.onObject(m.tenant, m.keyBytes, g.groupId, m.sizeBytes, m.parentKeyBytes);
                        }
                    }
                }
            }
        }
        finally
        {
            shard.unlock();
        }
    }

    // ------------------------------------------------------------------------------------ proto helpers

    static Replica toProto(final ReplicaRecord r, final ReplicaStatus status)
    {
        return protoBuilder(r, status).build();
    }

    /**
     * The replica's fields, its strings as the segment's UTF-8 bytes (encoded once per segment, not at every
     * serialization). Built afresh rather than by {@code toBuilder()} of a cached message, whose copy would turn them
     * back into Strings.
     */
    static Replica.Builder protoBuilder(final ReplicaRecord r, final ReplicaStatus status)
    {
        final MountedSegment s = r.segment();
        return Replica.newBuilder()
            .setNodeIdBytes(s.nodeIdUtf8())
            .setEndpointBytes(s.endpointUtf8())
            .setSegmentId(s.segmentId())
            .setSegmentNameBytes(s.nameUtf8())
            .setOffset(r.offset())
            .setLength(r.length())
            .setStatus(status);
    }

    /**
     * A complete replica as a reader gets it: with a READ token when tokens are on, expiring no later than the
     * lease this lookup grants (the token cached per replica for the second it expires in). Owner lock held.
     */
    private Replica readReplica(final ReplicaRecord r, final long nowMs)
    {
        final ReplicaTokens tokens = replicaTokens;
        if (tokens == null)
        {
            // Built per read, as with tokens: a message cached in the record is a young object stored into an old
            // one, which cost more (card refinement, then a promoted copy per object read) than building it saved.
            return toProto(r, ReplicaStatus.REPLICA_STATUS_COMPLETE);
        }
        // Only the token's bytes are kept, signed once per second of expiry; the message is built per read. Caching
        // the whole message cost more than it saved: refreshed every second on every object read, each new message
        // was a young object stored into an old record (G1 refinement took ~9 % of the CPU in a get loop).
        final long expirySec = readTokenExpirySec(nowMs);
        if (r.readTokenExpirySec() != expirySec)
        {
            r.readToken(tokens.sign(r, Opcode.READ, expirySec), expirySec);
        }
        // A fresh array per answer: the record's token changes under a later read while this one is on its way out.
        return protoBuilder(r, ReplicaStatus.REPLICA_STATUS_COMPLETE)
            .setAccessToken(UnsafeByteOperations.unsafeWrap(r.readToken())).build();
    }

    /**
     * A PROCESSING replica as the writer gets it: with a WRITE token when tokens are on, expiring with the put's
     * discard timeout (after which the put may be preempted; its extents stay quarantined until the release timeout).
     */
    private Replica writeReplica(final ReplicaRecord r, final long putStartNs, final long nowNs)
    {
        final ReplicaTokens tokens = replicaTokens;
        if (tokens == null)
        {
            return toProto(r, ReplicaStatus.REPLICA_STATUS_PROCESSING);
        }
        return protoBuilder(r, ReplicaStatus.REPLICA_STATUS_PROCESSING)
            .setAccessToken(UnsafeByteOperations.unsafeWrap(
                tokens.sign(r, Opcode.WRITE, writeTokenExpirySec(putStartNs, nowNs))))
            .build();
    }

    /** Adds the writer's replica to {@code out}, or records it in {@code grants} to be signed with its batch. */
    private void writeReplica(
        final ReplicaRecord r, final long putStartNs, final long nowNs, final List<Replica> out,
        final SharedGrants grants)
    {
        if (grants == null)
        {
            out.add(writeReplica(r, putStartNs, nowNs));
        }
        else
        {
            grants.add(r, replicaTokens == null ? 0 : writeTokenExpirySec(putStartNs, nowNs));
        }
    }

    /** A READ token's expiry: the end of the lease the lookup grants, rounded down to the second. */
    private long readTokenExpirySec(final long nowMs)
    {
        return AccessTokenCodec.expirySec(nowMs + settings.leaseTtlNs / 1_000_000L, nowMs);
    }

    /** A WRITE token's expiry: the put's discard deadline, rounded down to the second. */
    private long writeTokenExpirySec(final long putStartNs, final long nowNs)
    {
        final long nowMs = clock.epochMillis();
        final long deadlineMs = nowMs + (putStartNs + settings.putDiscardTimeoutNs - nowNs) / 1_000_000L;
        return AccessTokenCodec.expirySec(deadlineMs, nowMs);
    }

    /**
     * Signs the replicas a batch recorded in {@code grants}: one token per run of contiguous extents (none
     * when the master issues no tokens). Takes no lock: a recorded extent's offset, length and segment never
     * change, and a run's token expires no later than the token of any extent in it would have.
     */
    public void signGrants(final SharedGrants grants)
    {
        grants.sign(replicaTokens);
    }

    // ------------------------------------------------------------------------------------ stats

    /** Puts that skipped the lookup of an existing object (its key's index showed no entry) and then found one. */
    long retriedPutLookups()
    {
        return retriedPutLookups.sum();
    }

    public long objectCount()
    {
        return objectCount.get();
    }

    public long putStarts()
    {
        return putStarts.sum();
    }

    public long putEnds()
    {
        return putEnds.sum();
    }

    public long putRevokes()
    {
        return putRevokes.sum();
    }

    /** Extents of revoked puts freed at once because their client named them settled (see {@link #putRevoke}). */
    public long revokedExtentsReleased()
    {
        return revokedExtentsReleased.sum();
    }

    public long allocationFailures()
    {
        return allocationFailures.sum();
    }

    /** PutStart calls refused because the store held {@link Settings#maxObjects} objects and eviction freed none. */
    public long objectBudgetRefusals()
    {
        return objectBudgetRefusals.sum();
    }

    public long partialAllocations()
    {
        return partialAllocations.sum();
    }

    public long discardedPuts()
    {
        return discardedPuts.sum();
    }

    public long releasedPuts()
    {
        return releasedPuts.sum();
    }

    public long leaseGrants()
    {
        return leaseGrants.sum();
    }

    public long removedObjects()
    {
        return removedObjects.sum();
    }

    public long lostObjects()
    {
        return lostObjects.sum();
    }

    /** Puts whose named parent was live and now counts them as a child. */
    public long parentLinks()
    {
        return parentLinks.sum();
    }

    /** Puts that named a parent key not live in their tenant (stored without a parent). */
    public long parentsMissing()
    {
        return parentsMissing.sum();
    }
}
