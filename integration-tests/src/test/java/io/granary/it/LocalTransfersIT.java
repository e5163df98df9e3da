package io.granary.it;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.it.Pages.Page;
import io.granary.transfer.TransportKind;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * Same-host transfers between real processes (docs/protocol.md "LOCAL_CONNECT"): a client in this JVM with the
 * native transport puts and reads pages on a storage node process of this host; pages of 64 KiB and more are written
 * with process_vm_writev into the node's memory, smaller ones over TCP; every page is read with process_vm_readv;
 * every page of a node started with {@code --local-transfers false} moves over TCP, and every byte reads back. A node
 * killed with -9 leaves its pages failing with an error, not a hang, and the client keeps working against the other
 * node.
 */
class LocalTransfersIT
{
    private static final long SEED = 0x6c6f63616cL;
    private static final String METER = "granary.client.transfer.local";

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void shouldCopyBigPagesStraightIntoANodeOnThisHostAndFallBackToTcpWhereItCannot(final TestInfo test)
    {
        try (ProcessCluster cluster = new ProcessCluster(test))
        {
            cluster.startMaster();
            final ServiceProcess nearNode = cluster.startNode("near");
            cluster.startNode("tcp-only", "--local-transfers", "false");
            final SimpleMeterRegistry meters = new SimpleMeterRegistry();
            final GranaryClient client = cluster.newClient(b -> b.transport(TransportKind.NATIVE).meterRegistry(meters));

            // Near node: a 1 MiB, a 300 KiB and a 64 KiB + 1 page are written locally, a 60 KiB page over TCP; all four
            // are read locally.
            final List<Page> near = List.of(new Page("near-big", Pages.MIB), new Page("near-mid", 300 * Pages.KIB),
                new Page("near-edge", 64 * Pages.KIB + 1), new Page("near-small", 60 * Pages.KIB));
            final PutOptions onNear = PutOptions.builder().preferredSegment("near/seg0").build();
            client.put(near.get(0).key(), Pages.directContent(near.get(0), SEED), onNear);
            final List<ByteBuffer> values = new ArrayList<>();
            for (final Page page : near.subList(1, near.size()))
            {
                values.add(Pages.directContent(page, SEED));
            }
            for (final OpResult<Void> result : client.putBatch(keys(near.subList(1, near.size())), values, onNear))
            {
                assertThat(result.ok()).as(result.toString()).isTrue();
            }
            assertThat(count(meters, "local")).as("pages of 64 KiB and more written locally").isEqualTo(3);
            readBack(client, near);
            assertThat(count(meters, "local")).as("and all four read locally").isEqualTo(7);
            assertThat(count(meters, "tcp")).isZero();

            // A node that refuses: over TCP, counted as such, every byte right.
            final Page refused = new Page("far-big", 2 * Pages.MIB);
            client.put(refused.key(), Pages.directContent(refused, SEED),
                PutOptions.builder().preferredSegment("tcp-only/seg0").build());
            readBack(client, List.of(refused));
            assertThat(count(meters, "local")).isEqualTo(7);
            assertThat(count(meters, "tcp")).as("its put and its read took TCP").isEqualTo(2);

            // kill -9 of the near node: its page fails cleanly; the client goes on with the other node.
            nearNode.kill9();
            final GranaryException lost = catchThrowableOfType(() -> client.get(near.get(0).key()),
                GranaryException.class);
            assertThat(lost).as("a page of the killed node").isNotNull();
            assertThat(lost.code()).isIn(ErrorCode.TRANSFER_FAIL, ErrorCode.OBJECT_NOT_FOUND);
            readBack(client, List.of(refused));
        }
    }

    private static void readBack(final GranaryClient client, final List<Page> pages)
    {
        for (final Page page : pages)
        {
            final ByteBuffer into = ByteBuffer.allocateDirect(page.sizeBytes());
            assertThat(client.getInto(page.key(), into)).as(page.key()).isEqualTo(page.sizeBytes());
            into.flip();
            assertThat(Pages.check(page, SEED, into)).as(page.key()).isNull();
        }
    }

    private static List<String> keys(final List<Page> pages)
    {
        return pages.stream().map(Page::key).toList();
    }

    private static long count(final SimpleMeterRegistry meters, final String outcome)
    {
        final FunctionCounter counter = meters.find(METER).tag("outcome", outcome).functionCounter();
        assertThat(counter).as(METER + " " + outcome).isNotNull();
        return (long)counter.count();
    }
}
