package io.granary.it;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The master's object budget across processes: a master started with {@code --max-objects 300} and a node whose
 * segment could hold thirty times that many pages. Puts of 1,000 pages all succeed, the master evicting the oldest
 * to stay within its budget, and the newest pages read back byte for byte; once every object it holds is leased, a
 * new key is refused with NO_AVAILABLE_HANDLE and the master keeps serving.
 */
class ObjectBudgetIT
{
    private static final long SEED = 0x6f626a6563747321L;
    private static final int BUDGET = 300;
    private static final int PAGES = 1000;
    private static final int PAGE_BYTES = 4096;
    private static final int BATCH = 50;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void shouldEvictToStayWithinItsObjectBudgetAndRefuseOnlyWhenEverythingIsLeased(final TestInfo test)
        throws IOException, InterruptedException
    {
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            // Watermark 1.0: only a put at the budget evicts (on demand), so nothing is evicted between a put and
            // the read that leases its object below (the background round would take that fresh, unleased object).
            final ServiceProcess master = cluster.startMaster("--max-objects", Integer.toString(BUDGET),
                "--eviction-ratio", "0.1", "--eviction-high-watermark", "1.0", "--lease-ttl", "60s");
            cluster.startNode("node-0", "--segment-size", "48m", "--pre-touch", "false");
            final GranaryClient client = cluster.newClient();

            final List<Page> pages = Pages.uniform("page-", PAGES, PAGE_BYTES);
            for (int from = 0; from < PAGES; from += BATCH)
            {
                final List<String> keys = new ArrayList<>();
                final List<ByteBuffer> values = new ArrayList<>();
                for (final Page page : pages.subList(from, from + BATCH))
                {
                    keys.add(page.key());
                    values.add(ByteBuffer.wrap(Pages.content(page, SEED)));
                }
                final List<OpResult<Void>> results = client.putBatch(keys, values, PutOptions.defaults());
                for (int i = 0; i < BATCH; i++)
                {
                    assertThat(results.get(i).ok()).as("put %s: %s", keys.get(i), results.get(i)).isTrue();
                }
            }
            final long held = client.clusterStatus().objects();
            assertThat(held).as("objects held after %d puts", PAGES).isLessThanOrEqualTo(BUDGET).isGreaterThanOrEqualTo(BUDGET * 9 / 10);
            assertThat(client.exists(pages.get(0).key())).as("the oldest page, evicted").isFalse();
            // The newest pages are there, whole (a read leases them: from here on nothing may be evicted).
            final List<Page> newest = pages.subList(PAGES - BUDGET / 2, PAGES);
            final List<OpResult<byte[]>> read = client.getBatch(newest.stream().map(Page::key).toList());
            for (int i = 0; i < newest.size(); i++)
            {
                assertThat(read.get(i).ok()).as("get %s: %s", newest.get(i).key(), read.get(i)).isTrue();
                assertThat(read.get(i).value()).as(newest.get(i).key()).isEqualTo(Pages.content(newest.get(i), SEED));
            }
            final List<String> present = new ArrayList<>();
            for (final Page page : pages)
            {
                present.add(page.key());
            }
            client.existsBatch(present); // leases every page still held
            // Counted once all are leased: from here on nothing may be evicted.
            final long leased = client.clusterStatus().objects();
            assertThat(leased).as("nothing evicted without a put").isEqualTo(held);

            // New keys, each leased once stored, until the budget is full of leased objects: then a refusal.
            int added = 0;
            GranaryException refused = null;
            while (refused == null && added <= BUDGET)
            {
                final String key = "extra-" + added;
                try
                {
                    client.put(key, new byte[PAGE_BYTES]);
                    assertThat(client.exists(key)).as(key).isTrue();
                    added++;
                }
                catch (final GranaryException ex)
                {
                    refused = ex;
                }
            }
            assertThat(refused).as("a put beyond a budget of leased objects").isNotNull();
            assertThat(refused.code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE);
            assertThat(added).isEqualTo(BUDGET - leased);
            assertThat(client.clusterStatus().objects()).isEqualTo(BUDGET);
            assertThatThrownBy(() -> client.put("extra-again", new byte[PAGE_BYTES]))
                .isInstanceOf(GranaryException.class).hasMessageContaining("NO_AVAILABLE_HANDLE");

            final String metrics = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://" + master.ready("admin") + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
            assertThat(metrics).contains("granary_master_objects_max " + BUDGET + ".0")
                .contains("granary_master_put_object_budget_refusals_total 2.0")
                .contains("granary_master_put_allocation_failures_total 0.0");
            assertThat(master.isAlive()).isTrue();
            assertThat(client.get("page-" + String.format("%05d", PAGES - 1))).as("still served")
                .isEqualTo(Pages.content(pages.get(PAGES - 1), SEED));
        }
    }
}
