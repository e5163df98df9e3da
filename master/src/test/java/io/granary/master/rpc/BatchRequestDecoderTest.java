package io.granary.master.rpc;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnknownFieldSet;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.LeaseMode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

class BatchRequestDecoderTest
{
    static List<String> keysOf(final BatchRequestDecoder d)
    {
        final List<String> keys = new ArrayList<>();
        for (int i = 0; i < d.keys.size(); i++)
        {
            keys.add(d.keys.key(i));
        }
        return keys;
    }

    @Test
    void shouldDecodeWhatProtobufEncodesIncludingUnknownFields() throws InvalidProtocolBufferException
    {
        final BatchProbeKeyRequest probe = BatchProbeKeyRequest.newBuilder()
            .setTenant("team-a").setMode(LeaseMode.LEASE_MODE_LONGEST_PREFIX).setCandidateSize(5)
            .addKeys("a").addKeys("ключ/ü").addKeys("x".repeat(300))
            .setUnknownFields(UnknownFieldSet.newBuilder()
                .addField(99, UnknownFieldSet.Field.newBuilder().addVarint(7).addFixed32(1).addFixed64(2)
                    .addLengthDelimited(com.google.protobuf.ByteString.copyFromUtf8("zz")).build())
                .build())
            .build();
        final BatchRequestDecoder d = new BatchRequestDecoder();
        final ByteBuf buf = Unpooled.wrappedBuffer(probe.toByteArray());
        d.decodeBatchProbe(buf);
        assertThat(d.tenant).isEqualTo("team-a");
        assertThat(d.mode).isEqualTo(LeaseMode.LEASE_MODE_LONGEST_PREFIX_VALUE);
        assertThat(d.candidateSize).isEqualTo(5);
        assertThat(keysOf(d)).containsExactly("a", "ключ/ü", "x".repeat(300));
        assertThat(d.withReplicas).isFalse();
        assertThat(d.sharedGrants).isFalse();
        d.decodeBatchProbe(Unpooled.wrappedBuffer(probe.toBuilder().setWithReplicas(true).setReplicasFrom(3)
            .setReplicasCount(-2).setSharedGrants(true).build().toByteArray()));
        assertThat(d.withReplicas).isTrue();
        assertThat(d.sharedGrants).isTrue();
        assertThat(d.replicasFrom).isEqualTo(3);
        assertThat(d.replicasCount).as("a uint32, kept as its bits").isEqualTo(-2);
        assertThat(keysOf(d)).containsExactly("a", "ключ/ü", "x".repeat(300));

        d.decodeBatchKeys(Unpooled.wrappedBuffer(BatchKeysRequest.newBuilder().setClientId("c").addKeys("k1").build()
            .toByteArray()));
        assertThat(d.tenant).isEmpty();
        assertThat(keysOf(d)).containsExactly("k1");
        assertThat(d.sharedGrants).isFalse();
        d.decodeBatchKeys(Unpooled.wrappedBuffer(BatchKeysRequest.newBuilder().addKeys("k2").setSharedGrants(true)
            .build().toByteArray()));
        assertThat(d.sharedGrants).isTrue();
        assertThat(keysOf(d)).containsExactly("k2");
        d.decodeBatchProbe(Unpooled.wrappedBuffer(probe.toByteArray()));
        assertThat(d.sharedGrants).as("reset for every request").isFalse();
    }

    @Test
    void shouldRefuseAPackedChecksumRunProtobufRefusesAndTakeOneItAccepts() throws InvalidProtocolBufferException
    {
        // Found by the 100,000-case lookup fuzz: field 4 (BatchPutEnd's packed fixed32 checksums) of 27 bytes.
        final byte[] ragged = java.util.HexFormat.of()
            .parseHex("221bc2aff4416ae9941cebbe3babdd47ed6c8e4bf465106fabb9db5439");
        final BatchRequestDecoder d = new BatchRequestDecoder();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BatchKeysRequest.parseFrom(ragged))
            .isInstanceOf(InvalidProtocolBufferException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> d.decodeBatchKeys(Unpooled.wrappedBuffer(ragged)))
            .isInstanceOf(InvalidProtocolBufferException.class);

        final byte[] whole = BatchKeysRequest.newBuilder().addKeys("k").addCrc32C(1).addCrc32C(-2).build().toByteArray();
        d.decodeBatchKeys(Unpooled.wrappedBuffer(whole));
        assertThat(keysOf(d)).containsExactly("k");
    }

    @Test
    void shouldTakeTheClientIdAndEveryChecksumPackedOrNotAsProtobufDoes() throws java.io.IOException
    {
        final BatchRequestDecoder d = new BatchRequestDecoder();
        final BatchKeysRequest packed = BatchKeysRequest.newBuilder().setTenant("t").setClientId("client-ü")
            .addKeys("a").addKeys("b").addKeys("c").addCrc32C(0).addCrc32C(-1).addCrc32C(0x12345678).build();
        d.decodeBatchKeys(Unpooled.wrappedBuffer(packed.toByteArray()));
        assertThat(d.clientId).isEqualTo("client-ü");
        assertThat(java.util.Arrays.copyOf(d.crcs, d.crcCount)).containsExactly(0, -1, 0x12345678);

        // The same checksums unpacked (tag 0x25 = field 4, fixed32) and split around a packed run of one: protobuf
        // reads them in order, and so must the decoder.
        final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        final com.google.protobuf.CodedOutputStream cos = com.google.protobuf.CodedOutputStream.newInstance(out);
        cos.writeString(3, "a");
        cos.writeFixed32(4, 7);
        cos.writeTag(4, 2);
        cos.writeUInt32NoTag(4);
        cos.writeFixed32NoTag(8);
        cos.writeFixed32(4, 9);
        cos.flush();
        final byte[] mixed = out.toByteArray();
        assertThat(BatchKeysRequest.parseFrom(mixed).getCrc32CList()).containsExactly(7, 8, 9);
        d.decodeBatchKeys(Unpooled.wrappedBuffer(mixed));
        assertThat(java.util.Arrays.copyOf(d.crcs, d.crcCount)).containsExactly(7, 8, 9);
        assertThat(d.clientId).as("reset for every request").isEmpty();

        // More checksums than the array holds at first; a truncated unpacked one is refused as protobuf refuses it.
        final BatchKeysRequest.Builder many = BatchKeysRequest.newBuilder();
        for (int i = 0; i < 1000; i++)
        {
            many.addKeys("k" + i).addCrc32C(i * 31);
        }
        d.decodeBatchKeys(Unpooled.wrappedBuffer(many.build().toByteArray()));
        assertThat(d.crcCount).isEqualTo(1000);
        assertThat(d.crcs[999]).isEqualTo(999 * 31);
        final byte[] truncated = {0x25, 1, 2};
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BatchKeysRequest.parseFrom(truncated))
            .isInstanceOf(InvalidProtocolBufferException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> d.decodeBatchKeys(Unpooled.wrappedBuffer(truncated)))
            .isInstanceOf(InvalidProtocolBufferException.class);
    }

    @Test
    void shouldDecodeABatchPutStartAsProtobufDoes() throws java.io.IOException
    {
        final BatchRequestDecoder d = new BatchRequestDecoder();
        final io.granary.proto.PutOptions one = io.granary.proto.PutOptions.newBuilder().setReplicas(2).setGroupId("g")
            .build();
        final io.granary.proto.BatchPutStartRequest request = io.granary.proto.BatchPutStartRequest.newBuilder()
            .setTenant("t").setClientId("c-ü").addKeys("a").addKeys("ключ").addValueLengths(0)
            .addValueLengths(Long.MAX_VALUE).setOptions(one).addAvoidNodeIds("n1").addAvoidNodeIds("n2")
            .addPerKeyOptions(one).addPerKeyOptions(io.granary.proto.PutOptions.getDefaultInstance())
            .setSharedGrants(true).build();
        d.decodeBatchPutStart(Unpooled.wrappedBuffer(request.toByteArray()));
        assertThat(d.tenant).isEqualTo("t");
        assertThat(d.clientId).isEqualTo("c-ü");
        assertThat(keysOf(d)).containsExactly("a", "ключ");
        assertThat(java.util.Arrays.copyOf(d.lengths, d.lengthCount)).containsExactly(0, Long.MAX_VALUE);
        assertThat(d.options).isEqualTo(one);
        assertThat(d.perKeyOptions).containsExactly(one, io.granary.proto.PutOptions.getDefaultInstance());
        assertThat(d.avoidNodeIds).containsExactly("n1", "n2");
        assertThat(d.sharedGrants).isTrue();

        // Lengths unpacked and packed in turn, the options twice (protobuf merges them), a key after both.
        final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        final com.google.protobuf.CodedOutputStream cos = com.google.protobuf.CodedOutputStream.newInstance(out);
        cos.writeString(3, "x");
        cos.writeUInt64(4, 5);
        cos.writeTag(4, 2);
        cos.writeUInt32NoTag(com.google.protobuf.CodedOutputStream.computeUInt64SizeNoTag(300) + 1);
        cos.writeUInt64NoTag(300);
        cos.writeUInt64NoTag(7);
        cos.writeMessage(5, io.granary.proto.PutOptions.newBuilder().setReplicas(3).build());
        cos.writeMessage(5, io.granary.proto.PutOptions.newBuilder().setGroupId("h").build());
        cos.writeString(3, "y");
        cos.writeString(3, "z");
        cos.flush();
        final byte[] mixed = out.toByteArray();
        final io.granary.proto.BatchPutStartRequest parsed = io.granary.proto.BatchPutStartRequest.parseFrom(mixed);
        d.decodeBatchPutStart(Unpooled.wrappedBuffer(mixed));
        assertThat(keysOf(d)).isEqualTo(parsed.getKeysList());
        assertThat(java.util.Arrays.stream(d.lengths, 0, d.lengthCount).boxed().toList())
            .isEqualTo(parsed.getValueLengthsList()).containsExactly(5L, 300L, 7L);
        assertThat(d.options).isEqualTo(parsed.getOptions());
        assertThat(d.options.getReplicas()).isEqualTo(3);
        assertThat(d.options.getGroupId()).isEqualTo("h");
        assertThat(d.tenant).as("reset for every request").isEmpty();
        assertThat(d.perKeyOptions).isEmpty();
        assertThat(d.avoidNodeIds).isEmpty();
        assertThat(d.sharedGrants).isFalse();

        // A packed run whose last varint crosses the end of its field is refused, as protobuf refuses it.
        final byte[] crossing = {0x22, 0x01, (byte)0x80, 0x01};
        org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> io.granary.proto.BatchPutStartRequest.parseFrom(crossing))
            .isInstanceOf(InvalidProtocolBufferException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> d.decodeBatchPutStart(Unpooled.wrappedBuffer(crossing)))
            .isInstanceOf(InvalidProtocolBufferException.class);
        // Options that are no PutOptions message are refused, as protobuf refuses them.
        final byte[] badOptions = {0x2a, 0x02, 0x08};
        org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> io.granary.proto.BatchPutStartRequest.parseFrom(badOptions))
            .isInstanceOf(InvalidProtocolBufferException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> d.decodeBatchPutStart(Unpooled.wrappedBuffer(badOptions)))
            .isInstanceOf(InvalidProtocolBufferException.class);
    }

    @Test
    void shouldAcceptExactlyTheBatchPutStartsProtobufAccepts()
    {
        final byte[] valid = io.granary.proto.BatchPutStartRequest.newBuilder().setTenant("t").setClientId("c")
            .addKeys("alpha").addKeys("beta").addValueLengths(4096).addValueLengths(300)
            .setOptions(io.granary.proto.PutOptions.newBuilder().setReplicas(2).setParentKey("p"))
            .addAvoidNodeIds("n").setSharedGrants(true).build().toByteArray();
        final SplittableRandom random = new SplittableRandom(21);
        final BatchRequestDecoder d = new BatchRequestDecoder();
        int refused = 0;
        for (int i = 0; i < 20_000; i++)
        {
            final byte[] bytes = valid.clone();
            for (int m = 1 + random.nextInt(3); m > 0; m--)
            {
                bytes[random.nextInt(bytes.length)] = (byte)random.nextInt(256);
            }
            io.granary.proto.BatchPutStartRequest expected = null;
            try
            {
                expected = io.granary.proto.BatchPutStartRequest.parseFrom(bytes);
            }
            catch (final InvalidProtocolBufferException ex)
            {
                refused++;
            }
            try
            {
                d.decodeBatchPutStart(Unpooled.wrappedBuffer(bytes));
                assertThat(expected).as("accepted what protobuf refuses: %s", java.util.HexFormat.of().formatHex(bytes))
                    .isNotNull();
                assertThat(keysOf(d)).isEqualTo(expected.getKeysList());
                assertThat(java.util.Arrays.stream(d.lengths, 0, d.lengthCount).boxed().toList())
                    .isEqualTo(expected.getValueLengthsList());
                assertThat(d.tenant).isEqualTo(expected.getTenant());
                assertThat(d.clientId).isEqualTo(expected.getClientId());
                assertThat(d.options).isEqualTo(expected.getOptions());
                assertThat(d.perKeyOptions).isEqualTo(expected.getPerKeyOptionsList());
                assertThat(d.avoidNodeIds).isEqualTo(expected.getAvoidNodeIdsList());
                assertThat(d.sharedGrants).isEqualTo(expected.getSharedGrants());
            }
            catch (final InvalidProtocolBufferException ex)
            {
                assertThat(expected).as("refused what protobuf accepts: %s", java.util.HexFormat.of().formatHex(bytes))
                    .isNull();
            }
        }
        assertThat(refused).as("some mutations are malformed").isPositive();
    }

    @Test
    void shouldRefuseMalformedSettledReplicasAsProtobufDoesAndSkipWellFormedOnes() throws InvalidProtocolBufferException
    {
        // Field 5 (BatchPutRevoke's settled replicas) holding an entry whose node id (field 1 of field 1) is not UTF-8.
        final byte[] bad = java.util.HexFormat.of().parseHex("1a016b" + "2a05" + "0a03" + "0a01ff");
        final BatchRequestDecoder d = new BatchRequestDecoder();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BatchKeysRequest.parseFrom(bad))
            .isInstanceOf(InvalidProtocolBufferException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> d.decodeBatchKeys(Unpooled.wrappedBuffer(bad)))
            .isInstanceOf(InvalidProtocolBufferException.class);

        final byte[] good = BatchKeysRequest.newBuilder().addKeys("k").addSettled(io.granary.proto.SettledReplicas
            .newBuilder().addReplicas(io.granary.proto.SettledReplica.newBuilder().setNodeId("n").setSegmentId(3)
                .setOffset(4096))).build().toByteArray();
        d.decodeBatchKeys(Unpooled.wrappedBuffer(good));
        assertThat(keysOf(d)).containsExactly("k");
    }

    @Test
    void shouldEitherDecodeOrRefuseRandomAndMutatedBytes()
    {
        final byte[] valid = BatchKeysRequest.newBuilder().setTenant("t").addKeys("alpha").addKeys("beta").build()
            .toByteArray();
        final SplittableRandom random = new SplittableRandom(9);
        final BatchRequestDecoder d = new BatchRequestDecoder();
        int refused = 0;
        for (int i = 0; i < 20_000; i++)
        {
            final byte[] bytes;
            if (i % 2 == 0)
            {
                bytes = valid.clone();
                bytes[random.nextInt(bytes.length)] = (byte)random.nextInt(256);
            }
            else
            {
                bytes = new byte[random.nextInt(40)];
                for (int j = 0; j < bytes.length; j++)
                {
                    bytes[j] = (byte)random.nextInt(256);
                }
            }
            try
            {
                d.decodeBatchKeys(Unpooled.wrappedBuffer(bytes));
                assertThat(d.keys.size()).isLessThanOrEqualTo(bytes.length);
            }
            catch (final InvalidProtocolBufferException ex)
            {
                refused++;
            }
        }
        assertThat(refused).as("malformed inputs were refused").isPositive();
    }
}
