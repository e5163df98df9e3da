package io.granary.master.rpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnknownFieldSet;
import io.granary.common.ManualClock;
import io.granary.master.MasterServer;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.CountResponse;
import io.granary.proto.DeregisterNodeRequest;
import io.granary.proto.HeartbeatRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.SettledReplica;
import io.granary.proto.SettledReplicas;
import io.granary.proto.UnmountSegmentRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The master's checks of request fields beyond keys and tenants, over real gRPC. */
class InputValidationTest
{
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    @BeforeEach
    void start()
    {
        master = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(-1).adminPort(-1)
            .clock(new ManualClock()).housekeeping(false).metadataShards(16));
        master.registry().mount("n1", "n1", "127.0.0.1:7001", 9, "n1/seg0", 1 << 20);
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    private int putStart(final String clientId, final PutOptions options)
    {
        return stub.putStart(PutStartRequest.newBuilder().setClientId(clientId).setKey("k").setValueLength(64)
            .setOptions(options).build()).getCode();
    }

    @Test
    void shouldRefuseClientIdsThatAreTooLongOrHoldControlCharacters()
    {
        assertThat(putStart("c".repeat(257), PutOptions.getDefaultInstance())).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("c\u0001", PutOptions.getDefaultInstance())).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c".repeat(300)).setKey("k").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("").addKeys("k").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("c".repeat(256), PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldReadReplicasAsUnsignedAndGroupIdsAsKeys()
    {
        assertThat(putStart("c", PutOptions.newBuilder().setReplicas(-1).build())).as("2^32 - 1 replicas")
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("c", PutOptions.newBuilder().setGroupId("g\u0000").build())).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("c", PutOptions.newBuilder().setGroupId("\u00e9".repeat(2100)).build()))
            .as("a group id of 4200 UTF-8 bytes").isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("c", PutOptions.newBuilder().setPreferredSegment("s".repeat(5000)).build()))
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(master.store().objectCount()).isZero();
    }

    @Test
    void shouldRefuseRevokesNamingMoreSettledReplicasThanAPutCanHaveAndFreeTheOnesNamed()
    {
        final io.granary.proto.PutStartResponse started = stub.putStart(PutStartRequest.newBuilder().setClientId("c")
            .setKey("k").setValueLength(64).build());
        assertThat(started.getCode()).isEqualTo(OK_VALUE);
        final io.granary.proto.Replica r = started.getReplicas(0);
        final SettledReplica mine = SettledReplica.newBuilder().setNodeId(r.getNodeId())
            .setSegmentId(r.getSegmentId()).setOffset(r.getOffset()).build();
        final PutRevokeRequest.Builder revoke = PutRevokeRequest.newBuilder().setClientId("c").setKey("k");
        for (int i = 0; i < 17; i++)
        {
            revoke.addSettled(mine);
        }
        assertThat(stub.putRevoke(revoke.build()).getCode()).as("17 settled replicas").isEqualTo(INVALID_PARAMS_VALUE);
        final BatchKeysRequest.Builder batch = BatchKeysRequest.newBuilder().setClientId("c").addKeys("k").addKeys("j")
            .addSettled(SettledReplicas.newBuilder().addReplicas(mine));
        assertThat(stub.batchPutRevoke(batch.build()).getCode()).as("settled entries for 1 of 2 keys")
            .isEqualTo(INVALID_PARAMS_VALUE);
        batch.addSettled(SettledReplicas.newBuilder().addAllReplicas(revoke.getSettledList()));
        assertThat(stub.batchPutRevoke(batch.build()).getCode()).as("17 settled replicas for one key")
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(master.store().objectCount()).as("nothing revoked by a refused request").isEqualTo(1);

        batch.setSettled(1, SettledReplicas.getDefaultInstance());
        final io.granary.proto.BatchCodeResponse revoked = stub.batchPutRevoke(batch.build());
        assertThat(revoked.getCode()).isEqualTo(OK_VALUE);
        assertThat(revoked.getCodesList()).containsExactly(OK_VALUE, io.granary.proto.ErrorCode.OBJECT_NOT_FOUND_VALUE);
        assertThat(master.store().revokedExtentsReleased()).isEqualTo(1);
        assertThat(master.store().pendingReleaseCount()).isZero();
    }

    @Test
    void shouldRefuseMalformedNodeIds()
    {
        assertThat(stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("").build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.unmountSegment(UnmountSegmentRequest.newBuilder().setNodeId("n\n").setSegmentId(9).build())
            .getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.deregisterNode(DeregisterNodeRequest.newBuilder().setNodeId("x".repeat(300)).build()).getCode())
            .isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.heartbeat(HeartbeatRequest.newBuilder().setNodeId("n1").build()).getCode()).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldRefuseASegmentSmallerThanOneAllocationUnit()
    {
        final io.granary.proto.MountSegmentRequest.Builder mount = io.granary.proto.MountSegmentRequest.newBuilder()
            .setNodeId("n2").setNodeName("n2").setEndpoint("127.0.0.1:7002")
            .setSegment(io.granary.proto.SegmentInfo.newBuilder().setSegmentId(3).setName("n2/seg0").setSizeBytes(1));

        assertThat(stub.mountSegment(mount.build()).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        mount.getSegmentBuilder().setSizeBytes(master.context().allocationGranularity());
        assertThat(stub.mountSegment(mount.build()).getCode()).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldBoundAPathologicalRegexInsteadOfHoldingTheThread()
    {
        for (int i = 0; i < 20; i++)
        {
            assertThat(putStart("c", PutOptions.getDefaultInstance())).isIn(OK_VALUE, -705);
            stub.putStart(PutStartRequest.newBuilder().setClientId("c").setKey("a".repeat(40 + i)).setValueLength(8)
                .build());
        }
        // Exponential backtracking on every "aaa...a" key without the budget: this call would not return.
        final CountResponse removed = stub.removeByRegex(RemoveByRegexRequest.newBuilder().setRegex("(a+)+b").build());

        assertThat(removed.getCode()).isEqualTo(OK_VALUE);
        assertThat(removed.getCount()).isZero();
        assertThat(MasterRequestHandler.keyFilter("(a|b)*c", false).test("ab".repeat(20) + "c")).isTrue();
    }

    @Test
    void shouldAnswerBytesThatAreNotTheRequestMessageWithInvalidArgument()
    {
        final MethodDescriptor<byte[], byte[]> raw = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MasterServiceGrpc.getPutStartMethod().getFullMethodName())
            .setRequestMarshaller(new Bytes())
            .setResponseMarshaller(new Bytes())
            .build();

        assertThatThrownBy(() -> ClientCalls.blockingUnaryCall(channel, raw,
            io.grpc.CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), new byte[]{(byte)0xFF, 0x01, 0x02}))
            .isInstanceOfSatisfying(StatusRuntimeException.class, ex ->
            {
                assertThat(ex.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
                assertThat(ex.getStatus().getDescription()).startsWith("malformed PutStart request");
            });
        assertThat(putStart("c", PutOptions.getDefaultInstance())).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldDecodeBatchKeysLikeProtobufOnTheLookupPath() throws InvalidProtocolBufferException
    {
        final BatchRequestDecoder decoder = new BatchRequestDecoder();
        final byte[] withGroup = BatchKeysRequest.newBuilder().addKeys("k1")
            .setUnknownFields(UnknownFieldSet.newBuilder().addField(50, UnknownFieldSet.Field.newBuilder()
                .addGroup(UnknownFieldSet.newBuilder().addField(1, UnknownFieldSet.Field.newBuilder().addVarint(3)
                    .build()).build()).build()).build())
            .build().toByteArray();
        BatchKeysRequest.parseFrom(withGroup);
        decoder.decodeBatchKeys(Unpooled.wrappedBuffer(withGroup));
        assertThat(BatchRequestDecoderTest.keysOf(decoder)).containsExactly("k1");

        final byte[] badUtf8 = BatchKeysRequest.newBuilder().addKeys("k").build().toByteArray();
        badUtf8[badUtf8.length - 1] = (byte)0xC3; // a lead byte with nothing after it
        assertThatThrownBy(() -> BatchKeysRequest.parseFrom(badUtf8)).isInstanceOf(InvalidProtocolBufferException.class);
        assertThatThrownBy(() -> decoder.decodeBatchKeys(Unpooled.wrappedBuffer(badUtf8)))
            .isInstanceOf(InvalidProtocolBufferException.class).hasMessageContaining("UTF-8");

        // A tag whose field number is 0 once cut to 32 bits, as protobuf reads it.
        final byte[] wideTag = {(byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, (byte)0x80, 0x01, 0x00};
        assertThatThrownBy(() -> BatchKeysRequest.parseFrom(wideTag)).isInstanceOf(InvalidProtocolBufferException.class);
        assertThatThrownBy(() -> decoder.decodeBatchKeys(Unpooled.wrappedBuffer(wideTag)))
            .isInstanceOf(InvalidProtocolBufferException.class);
        assertThat(io.granary.protocol.ProtoWireReader.validUtf8(ByteString.copyFromUtf8("ключ😀").toByteArray(), 0, 12)).isTrue();
    }

    private static final class Bytes implements MethodDescriptor.Marshaller<byte[]>
    {
        @Override
        public InputStream stream(final byte[] value)
        {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(final InputStream stream)
        {
            try
            {
                return stream.readAllBytes();
            }
            catch (final IOException ex)
            {
                throw new IllegalStateException(ex);
            }
        }
    }
}
