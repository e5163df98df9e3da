package io.granary.master.meta;

import io.granary.common.ManualClock;
import io.granary.master.alloc.SegmentAllocation;
import io.granary.master.alloc.TlsfExtentAllocator;
import io.granary.master.segment.SegmentRegistry;
import io.granary.proto.PutOptions;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Set;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Objects keep one instance of each tenant and client id, not the copies every decoded request brings
 * ({@link StringCanon}).
 */
class StringCanonTest
{
    /** An equal String with its own bytes, as decoding a request makes one. */
    private static String decoded(final String s)
    {
        return new String(s.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    }

    @Test
    void shouldHandBackTheFirstInstanceOfEqualStringsAndNeverAnUnequalOne()
    {
        final StringCanon canon = new StringCanon();
        final String first = decoded("5f0c2d4e-8a1b-4c3d-9e7f-0123456789ab");
        assertThat(canon.canonical(first)).isSameAs(first);
        final String copy = decoded(first);
        assertThat(copy).isNotSameAs(first);
        assertThat(canon.canonical(copy)).isSameAs(first);

        // Far more distinct Strings than slots: every answer equals what was asked, whatever slot it shares.
        final Set<String> distinct = new HashSet<>();
        for (int i = 0; i < StringCanon.SLOTS * 8; i++)
        {
            final String s = decoded("client-" + i);
            final String kept = canon.canonical(s);
            assertThat(kept).isEqualTo(s);
            distinct.add(kept);
        }
        assertThat(distinct).hasSize(StringCanon.SLOTS * 8);
        // Two Strings of one hash code (the classic "Aa"/"BB" pair) stay apart.
        assertThat("Aa".hashCode()).isEqualTo("BB".hashCode());
        assertThat(canon.canonical(decoded("Aa"))).isEqualTo("Aa");
        assertThat(canon.canonical(decoded("BB"))).isEqualTo("BB");
        assertThat(canon.canonical(decoded("Aa"))).isEqualTo("Aa");
    }

    @Test
    void shouldKeepOneTenantAndClientIdInstanceForObjectsPutWithCopies()
    {
        final ManualClock clock = new ManualClock();
        final SegmentRegistry registry = new SegmentRegistry(clock,
            (id, name, size) -> new SegmentAllocation(id, name, new TlsfExtentAllocator(size, 64)));
        final MetadataStore store = new MetadataStore(new MetadataStore.Settings(), clock, registry);
        assertThat(registry.mount("node-1", "node-1", "127.0.0.1:7001", 11, "node-1/seg0", 64L << 20).code)
            .isEqualTo(OK_VALUE);
        final String tenant = "team-a";
        final String client = "5f0c2d4e-8a1b-4c3d-9e7f-0123456789ab";
        final PutOptions options = PutOptions.newBuilder().setReplicas(1).setGroupId("").build();
        final int objects = 50;
        for (int i = 0; i < objects; i++)
        {
            final String key = "k" + i;
            assertThat(store.putStart(decoded(tenant), decoded(client), key, 4096, options, new ArrayList<>()))
                .isEqualTo(OK_VALUE);
            assertThat(store.putEnd(decoded(tenant), decoded(client), key)).isEqualTo(OK_VALUE);
        }
        final Set<String> tenants = Collections.newSetFromMap(new IdentityHashMap<>());
        final Set<String> clients = Collections.newSetFromMap(new IdentityHashMap<>());
        for (int i = 0; i < objects; i++)
        {
            final ObjectMeta m = store.lockForKey(tenant, "k" + i);
            try
            {
                assertThat(m.tenant).isEqualTo(tenant);
                assertThat(m.clientId).isEqualTo(client);
                tenants.add(m.tenant);
                clients.add(m.clientId);
            }
            finally
            {
                store.unlockOwner(m);
            }
        }
        assertThat(tenants).as("tenant instances kept by %d objects", objects).hasSize(1);
        assertThat(clients).as("client id instances kept by %d objects", objects).hasSize(1);
        // The kept client id still tells clients apart: another client's PutEnd of the same key is refused.
        assertThat(store.putEnd(tenant, "another-client", "k0")).isNotEqualTo(OK_VALUE);
    }
}
