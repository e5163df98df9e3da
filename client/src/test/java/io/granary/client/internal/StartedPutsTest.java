package io.granary.client.internal;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.PutStartResponse;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.proto.SettledReplica;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The client's own decoder of BatchPutStart answers, held to protobuf-java's parser. */
class StartedPutsTest
{
    private static final String[] NODES = {"n1", "node-2", "", "узел-3"};
    private static final String[] ENDPOINTS = {"127.0.0.1:7001", "127.0.0.1:7002", "", "[::1]:7003"};

    @Test
    void shouldDecodeWhatTheMessagePathGivesForRandomAnswers() throws InvalidProtocolBufferException
    {
        final SplittableRandom random = new SplittableRandom(41);
        for (int round = 0; round < 500; round++)
        {
            final BatchPutStartResponse message = randomAnswer(random);
            final byte[] bytes = message.toByteArray();
            final byte[] framed = new byte[bytes.length + 7];
            System.arraycopy(bytes, 0, framed, 5, bytes.length);
            final StartedPuts decoded = StartedPuts.decode(framed, 5, bytes.length);
            final StartedPuts fromMessage = StartedPuts.of(message);
            assertThat(decoded.toString()).isEqualTo(fromMessage.toString());
            assertThat(decoded.count).isEqualTo(message.getResultsCount());
            for (int j = 0; j < decoded.count; j++)
            {
                assertThat(decoded.replicas(j)).isEqualTo(message.getResults(j).getReplicasCount());
                assertThat(decoded.version(j)).isEqualTo(message.getResults(j).getVersion());
                assertThat(decoded.code(j)).isEqualTo(message.getResults(j).getCode());
            }
        }
    }

    @Test
    void shouldTakeTheLastOccurrenceOfAScalarAndSkipUnknownFieldsAsProtobufDoes() throws IOException
    {
        // Hand-written: a result whose code appears twice, a replica with an unknown varint, an unknown group and a
        // known field number sent with the wrong wire type (protobuf keeps such a field as unknown), then a token
        // that is replaced by an empty one.
        final ByteArrayOutputStream replica = new ByteArrayOutputStream();
        final CodedOutputStream r = CodedOutputStream.newInstance(replica);
        r.writeString(1, "n1");
        r.writeString(2, "127.0.0.1:7001");
        r.writeUInt64(99, 7);
        r.writeTag(50, 3); // start group 50
        r.writeUInt64(1, 1);
        r.writeTag(50, 4); // its end
        r.writeFixed64(4, 12345); // offset with the wrong wire type: an unknown field
        r.writeUInt64(4, 8192);
        r.writeUInt64(5, 4096);
        r.writeByteArray(8, new byte[] {1, 2, 3});
        r.writeByteArray(8, new byte[0]);
        r.flush();
        final ByteArrayOutputStream result = new ByteArrayOutputStream();
        final CodedOutputStream p = CodedOutputStream.newInstance(result);
        p.writeInt32(1, 5);
        p.writeByteArray(2, replica.toByteArray());
        p.writeInt32(1, 0);
        p.writeUInt64(3, 77);
        p.flush();
        final ByteArrayOutputStream answer = new ByteArrayOutputStream();
        final CodedOutputStream a = CodedOutputStream.newInstance(answer);
        a.writeByteArray(2, result.toByteArray());
        a.writeInt32(1, 0);
        a.flush();
        final byte[] bytes = answer.toByteArray();

        final BatchPutStartResponse parsed = BatchPutStartResponse.parseFrom(bytes);
        final StartedPuts decoded = StartedPuts.decode(bytes, 0, bytes.length);
        assertThat(decoded.toString()).isEqualTo(StartedPuts.of(parsed).toString())
            .isEqualTo("code=0 results=1\n[0] code=0 version=77 {n1|127.0.0.1:7001|0|8192+4096|-|0+0}");
    }

    @Test
    void shouldShareTheStringsAndTokenOfARunOfEqualBytes() throws InvalidProtocolBufferException
    {
        final ByteString shared = ByteString.copyFrom(new byte[] {9, 9, 9, 9});
        final BatchPutStartResponse.Builder answer = BatchPutStartResponse.newBuilder();
        for (int j = 0; j < 3; j++)
        {
            answer.addResults(PutStartResponse.newBuilder().addReplicas(Replica.newBuilder().setNodeId("n1")
                .setEndpoint("127.0.0.1:7001").setOffset(4096L * j).setLength(4096).setAccessToken(shared)
                .setGrantOffset(0).setGrantLength(3 * 4096)));
        }
        answer.addResults(PutStartResponse.newBuilder().addReplicas(Replica.newBuilder().setNodeId("n2")
            .setEndpoint("127.0.0.1:7002").setOffset(0).setLength(4096)
            .setAccessToken(ByteString.copyFrom(new byte[] {8, 8, 8, 8}))));
        final byte[] bytes = answer.build().toByteArray();
        final StartedPuts decoded = StartedPuts.decode(bytes, 0, bytes.length);

        final ReplicaExtent first = decoded.extents(0, "k0").get(0);
        final ReplicaExtent second = decoded.extents(1, "k1").get(0);
        final ReplicaExtent other = decoded.extents(3, "k3").get(0);
        assertThat(second.nodeId()).isSameAs(first.nodeId());
        assertThat(second.endpoint()).isSameAs(first.endpoint());
        assertThat(second.accessToken()).isSameAs(first.accessToken()).containsExactly(9, 9, 9, 9);
        assertThat(other.accessToken()).containsExactly(8, 8, 8, 8);
        assertThat(other.nodeId()).isEqualTo("n2");
        assertThat(other.endpoint()).isEqualTo("127.0.0.1:7002");
        assertThat(first.grantLength()).isEqualTo(3 * 4096);
        assertThat(other.grantOffset()).isZero();
        assertThat(other.grantLength()).isEqualTo(4096);
    }

    @Test
    void shouldRefuseAnUnusableReplicaForItsKeyOnlyAndListEveryReplicaForARevoke()
        throws InvalidProtocolBufferException
    {
        final byte[] bytes = BatchPutStartResponse.newBuilder()
            .addResults(PutStartResponse.newBuilder()
                .addReplicas(Replica.newBuilder().setNodeId("n1").setEndpoint("127.0.0.1:7001").setSegmentId(2)
                    .setOffset(4096).setLength(4096))
                .addReplicas(Replica.newBuilder().setNodeId("n2").setSegmentId(5).setOffset(0).setLength(4096)))
            .addResults(PutStartResponse.newBuilder().addReplicas(Replica.newBuilder().setNodeId("n1")
                .setEndpoint("127.0.0.1:7001").setOffset(8192).setLength(4096)))
            .build().toByteArray();
        final StartedPuts decoded = StartedPuts.decode(bytes, 0, bytes.length);

        assertThatThrownBy(() -> decoded.extents(0, "bad"))
            .isInstanceOfSatisfying(GranaryException.class,
                ex -> assertThat(ex.code()).isEqualTo(ErrorCode.INTERNAL_ERROR))
            .hasMessageContaining("'bad'").hasMessageContaining("no endpoint");
        assertThat(decoded.extents(1, "good")).singleElement()
            .satisfies(e -> assertThat(e.offset()).isEqualTo(8192));
        assertThat(decoded.unwritten(0)).containsExactly(
            SettledReplica.newBuilder().setNodeId("n1").setSegmentId(2).setOffset(4096).build(),
            SettledReplica.newBuilder().setNodeId("n2").setSegmentId(5).setOffset(0).build());
    }

    @Test
    void shouldAcceptExactlyWhatProtobufAcceptsAmongMutatedAnswers()
    {
        final SplittableRandom random = new SplittableRandom(17);
        int refused = 0;
        int accepted = 0;
        for (int i = 0; i < 20_000; i++)
        {
            final byte[] bytes = randomAnswer(random).toByteArray();
            final int mutations = 1 + random.nextInt(3);
            for (int m = 0; m < mutations && bytes.length > 0; m++)
            {
                bytes[random.nextInt(bytes.length)] = (byte)random.nextInt(256);
            }
            final int cut = random.nextInt(8) == 0 ? random.nextInt(bytes.length + 1) : bytes.length;
            BatchPutStartResponse parsed = null;
            try
            {
                parsed = BatchPutStartResponse.parser().parseFrom(bytes, 0, cut);
            }
            catch (final InvalidProtocolBufferException ex)
            {
                refused++;
            }
            try
            {
                final StartedPuts decoded = StartedPuts.decode(bytes, 0, cut);
                assertThat(parsed).as("protobuf refused what the decoder took, case %d", i).isNotNull();
                assertThat(decoded.toString()).as("case %d", i).isEqualTo(StartedPuts.of(parsed).toString());
                accepted++;
            }
            catch (final InvalidProtocolBufferException ex)
            {
                assertThat(parsed).as("the decoder refused what protobuf took, case %d: %s", i, ex.getMessage())
                    .isNull();
            }
        }
        assertThat(refused).as("some mutations are malformed").isGreaterThan(1000);
        assertThat(accepted).as("some mutations still parse").isGreaterThan(1000);
    }

    /** A BatchPutStart answer with 0-6 results of 0-3 replicas, fields drawn at random (some unusable on purpose). */
    private static BatchPutStartResponse randomAnswer(final SplittableRandom random)
    {
        final BatchPutStartResponse.Builder answer = BatchPutStartResponse.newBuilder();
        if (random.nextInt(8) == 0)
        {
            answer.setCode(random.nextInt(-1200, 10));
        }
        final ByteString shared = token(random);
        final int results = random.nextInt(7);
        for (int j = 0; j < results; j++)
        {
            final PutStartResponse.Builder result = PutStartResponse.newBuilder();
            if (random.nextInt(4) == 0)
            {
                result.setCode(random.nextInt(-1200, 0));
            }
            if (random.nextBoolean())
            {
                result.setVersion(random.nextLong());
            }
            final int replicas = random.nextInt(4);
            for (int k = 0; k < replicas; k++)
            {
                final Replica.Builder r = Replica.newBuilder()
                    .setNodeId(NODES[random.nextInt(NODES.length)])
                    .setEndpoint(ENDPOINTS[random.nextInt(ENDPOINTS.length)])
                    .setSegmentId(random.nextInt())
                    .setOffset(random.nextBoolean() ? random.nextLong(1L << 40) : random.nextLong())
                    .setLength(random.nextInt(3) == 0 ? 0 : random.nextLong(1L << 22));
                if (random.nextInt(3) == 0)
                {
                    r.setStatus(ReplicaStatus.forNumber(random.nextInt(1, 3)));
                }
                if (random.nextInt(5) == 0)
                {
                    r.setSegmentName("seg-" + random.nextInt(9));
                }
                final int tokenKind = random.nextInt(3);
                if (tokenKind > 0)
                {
                    r.setAccessToken(tokenKind == 1 ? shared : token(random));
                }
                if (random.nextBoolean())
                {
                    r.setGrantOffset(random.nextLong(1L << 40)).setGrantLength(random.nextLong(1L << 33));
                }
                result.addReplicas(r);
            }
            answer.addResults(result);
        }
        return answer.build();
    }

    private static ByteString token(final SplittableRandom random)
    {
        final byte[] bytes = new byte[random.nextInt(3) == 0 ? 0 : 20];
        for (int i = 0; i < bytes.length; i++)
        {
            bytes[i] = (byte)random.nextInt(256);
        }
        return ByteString.copyFrom(bytes);
    }

    @Test
    void shouldListNoReplicaForAResultWithout() throws InvalidProtocolBufferException
    {
        final byte[] bytes = BatchPutStartResponse.newBuilder().addResults(PutStartResponse.newBuilder().setCode(-704))
            .build().toByteArray();
        final StartedPuts decoded = StartedPuts.decode(bytes, 0, bytes.length);
        assertThat(decoded.count).isEqualTo(1);
        assertThat(decoded.code(0)).isEqualTo(-704);
        assertThat(decoded.replicas(0)).isZero();
        assertThat(decoded.unwritten(0)).isEqualTo(List.of());
    }
}
