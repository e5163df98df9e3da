package io.granary.cli;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.master.MasterServer;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Tenant byte quotas through the whole stack: a real master (gRPC, lookup port, admin HTTP), a storage node and
 * clients of two tenants. Within its quota a tenant's puts evict its own oldest values; when all of them are leased
 * its puts fail with TENANT_QUOTA_EXCEEDED (single and batch), while another tenant keeps putting; the admin port and
 * the metrics show the use.
 */
class TenantQuotaClusterTest
{
    private static final int PAGE = 4096;

    @Test
    void shouldKeepATenantWithinItsQuotaAndTellItsClientsWhenNothingCanGo() throws Exception
    {
        try (LocalCluster cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(8L << 20)
            .masterContext(LocalCluster.defaultMasterContext().adminPort(0).evictionRatio(0.25)
                .tenantQuotas(Map.of("small", 4L * PAGE))).start())
        {
            final GranaryClient small = cluster.newClient(cluster.clientConfig().tenant("small").build());
            final GranaryClient other = cluster.newClient(cluster.clientConfig().tenant("other").build());
            for (int i = 0; i < 4; i++)
            {
                small.put("s" + i, value(i));
            }
            small.put("s4", value(4)); // beyond the quota: s0, the oldest, makes room
            assertThat(small.exists("s0")).isFalse();
            for (int i = 1; i <= 4; i++)
            {
                assertThat(small.get("s" + i)).as("s" + i).isEqualTo(value(i));
                assertThat(small.exists("s" + i)).isTrue(); // leased from here on
            }

            assertThatThrownBy(() -> small.put("s5", value(5))).isInstanceOfSatisfying(GranaryException.class,
                ex -> assertThat(ex.code()).isEqualTo(ErrorCode.TENANT_QUOTA_EXCEEDED));
            final List<String> keys = List.of("b0", "b1");
            final List<ByteBuffer> values = new ArrayList<>();
            values.add(ByteBuffer.wrap(value(10)));
            values.add(ByteBuffer.wrap(value(11)));
            final List<OpResult<Void>> batch = small.putBatch(keys, values, PutOptions.defaults());
            assertThat(batch).extracting(OpResult::error)
                .containsExactly(ErrorCode.TENANT_QUOTA_EXCEEDED, ErrorCode.TENANT_QUOTA_EXCEEDED);
            for (int i = 0; i < 8; i++)
            {
                other.put("o" + i, value(20 + i)); // no quota: the other tenant is not held back
            }
            assertThat(small.get("s4")).as("nothing of the tenant was lost").isEqualTo(value(4));

            final MasterServer master = cluster.master();
            final HttpClient http = HttpClient.newHttpClient();
            final String status = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" +
                master.adminPort() + "/status")).build(), HttpResponse.BodyHandlers.ofString()).body();
            assertThat(status).contains("\"tenant_quotas\":[{\"tenant\":\"small\",\"quota_bytes\":16384," +
                "\"used_bytes\":16384,\"refusals\":3,\"evicted_bytes\":4096}]").contains("\"tenant_quota_refusals\":3");
            final String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" +
                master.adminPort() + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
            assertThat(metrics).contains("granary_master_tenant_used_bytes{tenant=\"small\"} 16384.0")
                .contains("granary_master_tenant_quota_refusals_total{tenant=\"small\"} 3.0")
                .contains("granary_master_put_tenant_quota_refusals_total 3.0");

            final CliRun stat = CliRun.run("stat", "--admin", "127.0.0.1:" + master.adminPort());
            assertThat(stat.exitCode()).as(stat.toString()).isZero();
            assertThat(stat.out()).contains("tenant quotas: 1").containsPattern(
                "small +16\\.00 KiB +16\\.00 KiB +100\\.0% +3 +4\\.00 KiB");
        }
    }

    private static byte[] value(final int seed)
    {
        final byte[] v = new byte[PAGE];
        for (int i = 0; i < v.length; i++)
        {
            v[i] = (byte)(seed * 31 + i);
        }
        return v;
    }
}
