package io.granary.master.rpc;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.MessageLite;
import io.granary.master.meta.KeyBatch;
import io.granary.master.meta.MetadataFixture;
import io.granary.master.meta.MetadataStore;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.PutOptions;
import io.granary.protocol.FrameDescriptor;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link BatchReplicaAnswer} writes the bytes protobuf-java writes for the message the handler builds for the same
 * answer. Two masters in the same state (same clock, same segments, same deterministic token signer and placement) get
 * the same requests; one answers through the message, the other straight to the wire, and the bytes must be equal.
 * BatchPutEnd over keys as bytes (the lookup port's decoding) is held to the message path the same way.
 */
class BatchReplicaAnswerTest
{
    /** A master whose every answer is deterministic: manual clock, tokens that spell out what they grant. */
    private static final class Master
    {
        final MetadataFixture fixture = new MetadataFixture(4, 42); // both masters place alike
        final MasterRequestHandler handler;

        Master(final boolean tokens, final int nodes, final long segmentBytes)
        {
            for (int i = 0; i < nodes; i++)
            {
                fixture.mount("node-" + i, segmentBytes);
            }
            if (tokens)
            {
                fixture.store.replicaTokens((segment, offset, length, opcode, expirySec) ->
                    // The expiry first, as in every token.
                    ByteBuffer.allocate(FrameDescriptor.ACCESS_TOKEN_LENGTH).putInt((int)expirySec)
                        .putInt(segment.segmentId()).putInt((int)offset).putInt((int)length).putInt(opcode).array());
            }
            handler = new MasterRequestHandler(null, fixture.store, fixture.probe, fixture.registry);
        }
    }

    private static byte[] bytes(final Object answer) throws IOException
    {
        if (answer instanceof MessageLite)
        {
            return ((MessageLite)answer).toByteArray();
        }
        final LookupServer.WireAnswer wire = (LookupServer.WireAnswer)answer;
        final byte[] out = new byte[wire.serializedSize()];
        final CodedOutputStream cos = CodedOutputStream.newInstance(out);
        wire.writeTo(cos);
        cos.checkNoSpaceLeft(); // exactly serializedSize() bytes were written
        return out;
    }

    @Test
    void shouldWriteTheBytesOfTheBuiltMessagesForRandomBatches() throws IOException
    {
        for (final boolean tokens : new boolean[] {true, false})
        {
            final Random random = new Random(tokens ? 17 : 18);
            // Refusals come from invalid and repeated keys; lookups meet every outcome.
            final Master built = new Master(tokens, 3, 64L << 20);
            final Master wired = new Master(tokens, 3, 64L << 20);
            final BatchReplicaAnswer answer = new BatchReplicaAnswer(); // reused across batches, as per connection
            final BatchRequestDecoder decoder = new BatchRequestDecoder();
            final Map<String, List<String>> stored = new HashMap<>(); // complete keys per tenant
            int written = 0;
            int refused = 0;
            int leased = 0;
            for (int round = 0; round < 60; round++)
            {
                // A batch of puts: new keys, keys of this batch again, invalid keys, zero-length and large values,
                // one to three replicas.
                final BatchPutStartRequest.Builder put = BatchPutStartRequest.newBuilder()
                    .setTenant(random.nextBoolean() ? "" : "t" + random.nextInt(2)).setClientId(MetadataFixture.CLIENT)
                    .setSharedGrants(true)
                    .setOptions(PutOptions.newBuilder().setReplicas(1 + random.nextInt(3)));
                if (random.nextInt(4) == 0)
                {
                    put.addAvoidNodeIds("node-" + random.nextInt(3)); // placed elsewhere when others have room
                }
                final boolean perKey = random.nextInt(4) == 0;
                final int n = 1 + random.nextInt(40);
                for (int i = 0; i < n; i++)
                {
                    final int kind = random.nextInt(20);
                    final String key = kind == 0 ? "" : kind == 1 && i > 0 ? put.getKeys(i - 1) : "k" + round + "-" + i;
                    final long length = kind == 2 ? 0 : kind == 3 ? random.nextInt(2 << 20) : 1 + random.nextInt(8192);
                    put.addKeys(key).addValueLengths(length);
                    if (perKey)
                    {
                        // Per-key options: replica counts, a parent (the previous key, or the key itself), a group.
                        final PutOptions.Builder o = PutOptions.newBuilder().setReplicas(1 + random.nextInt(3));
                        final int extra = random.nextInt(6);
                        o.setParentKey(extra == 0 && i > 0 ? put.getKeys(i - 1) : extra == 1 ? key : "");
                        o.setGroupId(extra == 2 ? "g" + round : "");
                        put.addPerKeyOptions(o);
                    }
                }
                // One master answers through the message; the other decodes the request as the lookup port does
                // (keys as bytes) and writes the answer straight to the wire.
                final Object fromMessage = built.handler.batchPutStart(put.build(), null);
                decoder.decodeBatchPutStart(Unpooled.wrappedBuffer(put.build().toByteArray()));
                final Object fromWire = wired.handler.batchPutStart(decoder.tenant, decoder.clientId, decoder.keys,
                    decoder.lengths, decoder.lengthCount, decoder.options, decoder.perKeyOptions, decoder.avoidNodeIds,
                    decoder.sharedGrants, answer);
                assertThat(fromMessage).isInstanceOf(BatchPutStartResponse.class);
                assertThat(fromWire).isSameAs(answer);
                final byte[] expected = bytes(fromMessage);
                assertThat(Arrays.equals(bytes(fromWire), expected)).as("BatchPutStart round %d: %s", round,
                    BatchPutStartResponse.parseFrom(bytes(fromWire))).isTrue();
                final BatchPutStartResponse started = (BatchPutStartResponse)fromMessage;
                assertThat(BatchPutStartResponse.parseFrom(bytes(fromWire))).isEqualTo(started);

                // Complete most of the puts with one BatchPutEnd: the message path on one master, the bytes path
                // (what the lookup port decodes) on the other; also keys never started, invalid keys and, now and
                // then, another client's end of them or a checksum count that does not match.
                final boolean crc = random.nextBoolean();
                final BatchKeysRequest.Builder end = BatchKeysRequest.newBuilder().setTenant(put.getTenant())
                    .setClientId(random.nextInt(10) == 0 ? "someone-else" : MetadataFixture.CLIENT);
                for (int i = 0; i < n; i++)
                {
                    final int code = started.getResults(i).getCode();
                    written += code == OK_VALUE ? 1 : 0;
                    refused += code == OK_VALUE ? 0 : 1;
                    if (random.nextInt(8) != 0)
                    {
                        end.addKeys(random.nextInt(30) == 0 ? "never-started-" + i : put.getKeys(i));
                        if (crc)
                        {
                            end.addCrc32C(random.nextInt(4) == 0 ? 0 : random.nextInt());
                        }
                    }
                }
                if (crc && random.nextInt(20) == 0)
                {
                    end.addCrc32C(1); // one checksum too many: the whole batch is refused
                }
                final BatchKeysRequest ends = end.build();
                final BatchCodeResponse ended = built.handler.batchPutEnd(ends);
                final int[] crcs = ends.getCrc32CList().stream().mapToInt(Integer::intValue).toArray();
                assertThat(wired.handler.batchPutEnd(ends.getTenant(), ends.getClientId(), KeyBatch.of(ends.getKeysList()),
                    crcs, crcs.length)).as("BatchPutEnd round %d", round).isEqualTo(ended);
                for (int i = 0; i < ended.getCodesCount(); i++)
                {
                    if (ended.getCodes(i) == OK_VALUE)
                    {
                        stored.computeIfAbsent(put.getTenant(), t -> new ArrayList<>()).add(ends.getKeys(i));
                    }
                }

                // A batch of lookups: stored keys, keys still being written, missing and invalid keys.
                final String tenant = put.getTenant();
                final List<String> complete = stored.getOrDefault(tenant, List.of("none"));
                final List<String> keys = new ArrayList<>();
                for (int i = 0, m = 1 + random.nextInt(40); i < m; i++)
                {
                    final int kind = random.nextInt(10);
                    keys.add(kind == 0 ? "" : kind == 1 ? "missing-" + i : kind < 4 ?
                        put.getKeys(random.nextInt(n)) : complete.get(random.nextInt(complete.size())));
                }
                final Object lookedUp = built.handler.batchGetReplicaList(tenant, KeyBatch.of(keys), true, null);
                final Object lookedUpWire = wired.handler.batchGetReplicaList(tenant, KeyBatch.of(keys), true, answer);
                assertThat(lookedUpWire).isSameAs(answer);
                assertThat(Arrays.equals(bytes(lookedUpWire), bytes(lookedUp))).as("BatchGetReplicaList round %d: %s",
                    round, BatchGetReplicaListResponse.parseFrom(bytes(lookedUpWire))).isTrue();
                for (final var result : ((BatchGetReplicaListResponse)lookedUp).getResultsList())
                {
                    leased += result.getCode() == OK_VALUE ? 1 : 0;
                }
                // Time moves: tokens expire in other seconds, leases lapse, one answer differs from the next.
                final Duration step = Duration.ofMillis(random.nextInt(1500));
                built.fixture.clock.advance(step);
                wired.fixture.clock.advance(step);
            }
            // The rounds met what they were meant to: placed, refused and looked-up keys.
            assertThat(written).as("puts placed").isGreaterThan(800);
            assertThat(refused).as("puts refused (invalid key, no room, repeated key)").isGreaterThan(20);
            assertThat(leased).as("lookups answered OK").isGreaterThan(200);
        }
    }

    private static String tenantOf(final String tenant)
    {
        return tenant.isEmpty() ? MetadataFixture.T : tenant;
    }

    @Test
    void shouldAnswerWithTheMessageWhenTheBatchAsksForNoSharedGrants() throws IOException
    {
        final Master built = new Master(true, 2, 8L << 20);
        final Master wired = new Master(true, 2, 8L << 20);
        final BatchPutStartRequest put = BatchPutStartRequest.newBuilder().setClientId(MetadataFixture.CLIENT)
            .addKeys("a").addValueLengths(100).addKeys("b").addValueLengths(4096).build();
        final Object fromMessage = built.handler.batchPutStart(put, null);
        final Object withoutGrants = wired.handler.batchPutStart(put, new BatchReplicaAnswer());
        assertThat(withoutGrants).isInstanceOf(BatchPutStartResponse.class);
        assertThat(bytes(withoutGrants)).isEqualTo(bytes(fromMessage));
        // An invalid batch is refused as a whole with the message, grants asked for or not.
        final Object invalid = wired.handler.batchPutStart(put.toBuilder().setSharedGrants(true).addKeys("c").build(),
            new BatchReplicaAnswer());
        assertThat(invalid).isInstanceOf(BatchPutStartResponse.class);
        assertThat(((BatchPutStartResponse)invalid).getCode()).isNotEqualTo(OK_VALUE);
        final Object invalidLookup = wired.handler.batchGetReplicaList("bad tenant \u0000", KeyBatch.of(List.of("a")),
            true, new BatchReplicaAnswer());
        assertThat(invalidLookup).isInstanceOf(BatchGetReplicaListResponse.class);
        assertThat(((BatchGetReplicaListResponse)invalidLookup).getCode()).isNotEqualTo(OK_VALUE);
        assertThat(MetadataStore.checkTenant("bad tenant \u0000")).isNotEqualTo(OK_VALUE);
    }
}
