package io.granary.master.evict;

import io.granary.master.meta.MetadataFixture;
import io.granary.master.meta.TenantQuota;
import io.granary.proto.LedgerEntry;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.granary.master.meta.MetadataFixture.CLIENT;
import static io.granary.proto.ErrorCode.NO_AVAILABLE_HANDLE_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_ALREADY_EXISTS_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.proto.ErrorCode.TENANT_QUOTA_EXCEEDED_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Tenant byte quotas ({@code --tenant-quotas}, {@code --default-tenant-quota}): a tenant's objects never hold more
 * value bytes than its quota. A put of a new key that would pass it evicts that tenant's own oldest objects, never
 * another tenant's, and is refused with TENANT_QUOTA_EXCEEDED when none of them may go; every way an object leaves
 * gives its bytes back.
 */
class TenantQuotaTest
{
    private static final long PAGE = 4096;
    private static final PutOptions DEFAULTS = PutOptions.getDefaultInstance();

    /** Tenant "small" with a quota of 10 pages, "big" without one; a pool with room for far more. */
    private static MetadataFixture fixture(final long defaultQuota)
    {
        return new MetadataFixture(8, s ->
        {
            s.tenantQuotaBytes = Map.of("small", 10 * PAGE);
            s.defaultTenantQuotaBytes = defaultQuota;
        }).mount("node-a", 64L << 20);
    }

    private static void put(final MetadataFixture f, final String tenant, final String key)
    {
        f.clock.advance(Duration.ofMillis(1)); // distinct ages in the order put
        assertThat(f.putCode(tenant, key, PAGE, DEFAULTS)).as("put " + tenant + "/" + key).isEqualTo(OK_VALUE);
    }

    private static boolean present(final MetadataFixture f, final String tenant, final String key)
    {
        return f.store.exists(tenant, key, false) == 1;
    }

    @Test
    void shouldEvictTheTenantsOwnOldestObjectsAndNoOneElses()
    {
        final MetadataFixture f = fixture(0);
        final Evictor evictor = f.evictor(1.0, 0.1, false); // a tenant round frees 10 % of the quota: one page
        for (int i = 0; i < 5; i++)
        {
            put(f, "big", "b" + i); // older than every object of "small": a pool-wide round would take these first
        }
        for (int i = 0; i < 10; i++)
        {
            put(f, "small", "s" + i);
        }
        final TenantQuota quota = f.store.tenantQuota("small");
        assertThat(quota.usedBytes()).isEqualTo(10 * PAGE);
        assertThat(evictor.tenantRounds()).isZero();

        put(f, "small", "s10");

        assertThat(present(f, "small", "s0")).as("the tenant's oldest").isFalse();
        for (int i = 1; i <= 10; i++)
        {
            assertThat(present(f, "small", "s" + i)).as("s" + i).isTrue();
        }
        for (int i = 0; i < 5; i++)
        {
            assertThat(present(f, "big", "b" + i)).as("another tenant's b" + i).isTrue();
        }
        assertThat(quota.usedBytes()).isEqualTo(10 * PAGE);
        assertThat(quota.evictedBytes()).isEqualTo(PAGE);
        assertThat(quota.refusals()).isZero();
        assertThat(evictor.tenantRounds()).isEqualTo(1);
        assertThat(evictor.evictedObjects(0)).isEqualTo(1);
        assertThat(f.store.tenantQuota("big")).as("no quota named, none by default").isNull();
    }

    @Test
    void shouldMakeRoomFromTheTenantsOwnObjectsWhenTheMasterIsAlsoAtItsObjectBudget()
    {
        final MetadataFixture f = new MetadataFixture(8, s ->
        {
            s.tenantQuotaBytes = Map.of("small", 10 * PAGE);
            s.maxObjects = 15;
        }).mount("node-a", 64L << 20);
        final Evictor evictor = f.evictor(1.0, 0.1, false);
        for (int i = 0; i < 5; i++)
        {
            put(f, "big", "b" + i); // the oldest objects: a round for the budget would take them first
        }
        for (int i = 0; i < 10; i++)
        {
            put(f, "small", "s" + i);
        }
        assertThat(f.store.objectCount()).as("at the budget").isEqualTo(15);

        put(f, "small", "s10");

        assertThat(present(f, "small", "s0")).isFalse();
        for (int i = 0; i < 5; i++)
        {
            assertThat(present(f, "big", "b" + i)).as("another tenant's b" + i).isTrue();
        }
        assertThat(evictor.tenantRounds()).isEqualTo(1);
        assertThat(evictor.onDemandRounds()).as("no round for the budget: the tenant's freed the object").isZero();
        assertThat(f.store.objectCount()).isEqualTo(15);
    }

    @Test
    void shouldRefuseWhenAllTheTenantsObjectsAreLeasedWhileOtherTenantsStillPut()
    {
        final MetadataFixture f = fixture(0);
        final Evictor evictor = f.evictor(1.0, 0.1, false);
        for (int i = 0; i < 10; i++)
        {
            put(f, "small", "s" + i);
            assertThat(f.store.exists("small", "s" + i, true)).isEqualTo(1); // leased: not evictable
        }

        assertThat(f.putCode("small", "s10", PAGE, DEFAULTS)).isEqualTo(TENANT_QUOTA_EXCEEDED_VALUE);
        assertThat(f.putCode("small", "s11", PAGE, DEFAULTS)).as("held off: nothing changed")
            .isEqualTo(TENANT_QUOTA_EXCEEDED_VALUE);
        final TenantQuota quota = f.store.tenantQuota("small");
        assertThat(quota.refusals()).isEqualTo(2);
        assertThat(f.store.tenantQuotaRefusals()).isEqualTo(2);
        assertThat(quota.usedBytes()).as("a refused put charges nothing").isEqualTo(10 * PAGE);
        assertThat(evictor.tenantRounds()).isEqualTo(1);
        assertThat(evictor.heldOffRounds()).isEqualTo(1);
        assertThat(present(f, "small", "s10")).isFalse();
        assertThat(f.putCode("small", "s3", PAGE, DEFAULTS)).as("an existing key is answered as always")
            .isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        put(f, "big", "b0"); // the quota is the tenant's alone

        f.clock.advance(Duration.ofSeconds(11)); // the leases (10 s) run out
        put(f, "small", "s10");
        assertThat(present(f, "small", "s0")).as("oldest, now evictable").isFalse();
        assertThat(quota.usedBytes()).isEqualTo(10 * PAGE);
    }

    @Test
    void shouldRefuseAValueLargerThanTheWholeQuotaWithoutEvicting()
    {
        final MetadataFixture f = fixture(0);
        final Evictor evictor = f.evictor(1.0, 0.1, false);
        put(f, "small", "s0");

        assertThat(f.putCode("small", "huge", 11 * PAGE, DEFAULTS)).isEqualTo(TENANT_QUOTA_EXCEEDED_VALUE);

        assertThat(evictor.tenantRounds()).isZero();
        assertThat(present(f, "small", "s0")).isTrue();
        assertThat(f.putCode("small", "exact", 9 * PAGE, DEFAULTS)).as("what is left of the quota fits")
            .isEqualTo(OK_VALUE);
        assertThat(f.store.tenantQuota("small").usedBytes()).isEqualTo(10 * PAGE);
    }

    @Test
    void shouldGiveTheBytesBackWhateverWayAnObjectLeaves()
    {
        final MetadataFixture f = fixture(0);
        final TenantQuota quota = f.store.tenantQuota("small");
        put(f, "small", "removed");
        put(f, "small", "kept");
        assertThat(f.store.putStart("small", CLIENT, "revoked", 3 * PAGE, DEFAULTS, new ArrayList<>()))
            .isEqualTo(OK_VALUE);
        assertThat(quota.usedBytes()).as("an unfinished put counts").isEqualTo(5 * PAGE);

        assertThat(f.store.remove("small", "removed", false)).isEqualTo(OK_VALUE);
        assertThat(f.store.putRevoke("small", CLIENT, "revoked")).isEqualTo(OK_VALUE);
        assertThat(quota.usedBytes()).isEqualTo(PAGE);

        // No room in the pool: the put is refused for that reason and its charge given back.
        final MetadataFixture tight = new MetadataFixture(8, s -> s.tenantQuotaBytes = Map.of("small", 1L << 30))
            .mount("node-a", 8 * PAGE);
        assertThat(tight.putCode("small", "no-room", 16 * PAGE, DEFAULTS)).isEqualTo(NO_AVAILABLE_HANDLE_VALUE);
        assertThat(tight.store.tenantQuota("small").usedBytes()).isZero();

        assertThat(f.store.removeMatching("small", key -> true, false)).isEqualTo(1);
        assertThat(quota.usedBytes()).isZero();
    }

    @Test
    void shouldGiveEveryUnnamedTenantTheDefaultQuotaAndChargeRebuiltObjects()
    {
        final MetadataFixture f = fixture(2 * PAGE);
        put(f, "other", "o0");
        put(f, "other", "o1");
        assertThat(f.putCode("other", "o2", PAGE, DEFAULTS)).as("no evictor: refused at the default quota")
            .isEqualTo(TENANT_QUOTA_EXCEEDED_VALUE);
        assertThat(f.store.tenantQuota("other").limitBytes()).isEqualTo(2 * PAGE);
        assertThat(f.store.tenantQuota("small").limitBytes()).as("a named tenant keeps its own").isEqualTo(10 * PAGE);
        assertThat(f.store.tenantQuotas()).extracting(TenantQuota::tenant).containsExactly("other", "small");

        // A rebuild adopts what the nodes hold, beyond the quota if need be, and counts it.
        final MetadataFixture rebuilt = new MetadataFixture(8, s -> s.defaultTenantQuotaBytes = 1000);
        assertThat(rebuilt.registry.mount("a", "a", "127.0.0.1:7011", 11, "a/seg0", 1 << 20, true).code)
            .isEqualTo(OK_VALUE);
        for (int i = 0; i < 3; i++)
        {
            rebuilt.store.adopt(rebuilt.registry.segment("a", 11), LedgerEntry.newBuilder().setTenant("t")
                .setKey("k" + i).setOffset(i * 1024L).setValueLength(600).setVersion(5 + i).build());
        }
        assertThat(rebuilt.store.objectCount()).isEqualTo(3);
        assertThat(rebuilt.store.tenantQuota("t").usedBytes()).isEqualTo(1800);
    }

    @Test
    void shouldTakeTheTenantsOldestGroupWholeUnderPrefixLeafFirst()
    {
        final MetadataFixture f = fixture(0);
        final Evictor evictor = f.evictor(1.0, 0.1, false, EvictionPolicy.PREFIX_LEAF_FIRST);
        f.clock.advance(Duration.ofMillis(1));
        assertThat(f.putCode("big", "b0", PAGE, PutOptions.newBuilder().setGroupId("block-0").build()))
            .as("another tenant's group, of the same name and older").isEqualTo(OK_VALUE);
        for (int block = 0; block < 5; block++)
        {
            final PutOptions inGroup = PutOptions.newBuilder().setGroupId("block-" + block).build();
            for (int rank = 0; rank < 2; rank++)
            {
                f.clock.advance(Duration.ofMillis(1));
                assertThat(f.putCode("small", "s" + block + "r" + rank, PAGE, inGroup)).isEqualTo(OK_VALUE);
            }
        }

        put(f, "small", "next");

        assertThat(present(f, "small", "s0r0")).as("the oldest group goes whole").isFalse();
        assertThat(present(f, "small", "s0r1")).isFalse();
        assertThat(present(f, "small", "s1r0")).isTrue();
        assertThat(present(f, "big", "b0")).as("another tenant's, older").isTrue();
        assertThat(f.store.tenantQuota("small").usedBytes()).isEqualTo(9 * PAGE);
        assertThat(evictor.tenantRounds()).isEqualTo(1);
    }

    @Test
    void shouldKeepItsCountExactWhenPutsOfTheSameKeysRaceEvictionsAndRemoves() throws Exception
    {
        final MetadataFixture f = new MetadataFixture(8, s -> s.tenantQuotaBytes = Map.of("small", 64 * PAGE))
            .mount("node-a", 64L << 20);
        final Evictor evictor = f.evictor(1.0, 0.1, false);
        final TenantQuota quota = f.store.tenantQuota("small");
        final int threads = 4;
        final java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(threads + 1);
        final java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        final java.util.concurrent.atomic.AtomicLong overQuota = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong refused = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try
        {
            final List<java.util.concurrent.Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final int id = t;
                workers.add(pool.submit(() ->
                {
                    final java.util.Random random = new java.util.Random(id);
                    start.await();
                    for (int i = 0; i < 3000; i++)
                    {
                        // 200 keys shared by all threads, sizes 1-3 pages: the same key raced, evictions and removes.
                        final String key = "k" + random.nextInt(200);
                        final int op = random.nextInt(10);
                        if (op == 0)
                        {
                            f.store.remove("small", key, true);
                            continue;
                        }
                        final String client = "c" + id;
                        final int code = f.store.putStart("small", client, key, (1 + random.nextInt(3)) * PAGE,
                            DEFAULTS, new ArrayList<>());
                        if (code == TENANT_QUOTA_EXCEEDED_VALUE)
                        {
                            refused.incrementAndGet();
                        }
                        else if (code == OK_VALUE)
                        {
                            if (op == 1)
                            {
                                f.store.putRevoke("small", client, key);
                            }
                            else
                            {
                                f.store.putEnd("small", client, key);
                            }
                        }
                    }
                    return null;
                }));
            }
            start.await();
            final Thread sampler = new Thread(() ->
            {
                while (!done.get())
                {
                    if (quota.usedBytes() > quota.limitBytes())
                    {
                        overQuota.incrementAndGet();
                    }
                }
            });
            sampler.start();
            for (final java.util.concurrent.Future<?> w : workers)
            {
                w.get(60, java.util.concurrent.TimeUnit.SECONDS);
            }
            done.set(true);
            sampler.join();
        }
        finally
        {
            pool.shutdownNow();
        }

        assertThat(overQuota.get()).as("samples with the tenant above its quota").isZero();
        long held = 0;
        for (final io.granary.proto.KeyInfo k : f.store.listKeys("small", key -> true, 0, new boolean[1]))
        {
            held += k.getValueLength();
        }
        assertThat(quota.usedBytes()).as("the count equals the value bytes held, unfinished puts included")
            .isEqualTo(held);
        assertThat(quota.refusals()).isEqualTo(refused.get());
        assertThat(f.store.objectCount()).isPositive();
        assertThat(evictor.tenantRounds()).as("the quota made the tenant evict").isPositive();
    }
}
