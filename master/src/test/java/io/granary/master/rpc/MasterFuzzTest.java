package io.granary.master.rpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import io.granary.common.FuzzRun;
import io.granary.common.LeakWatch;
import io.granary.common.ManualClock;
import io.granary.master.MasterServer;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.ErrorCode;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveRequest;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.ServerMethodDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.protocol.LookupDescriptor.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Random and mutated protobuf messages at every master RPC over real gRPC (raw bytes, so nothing is checked on the
 * way out) and at the framed lookup port: every answer is a reply with a known code, or a transport status for
 * bytes that are not the request message; the master keeps serving valid clients; once every node is gone no
 * object and no segment is left.
 */
class MasterFuzzTest
{
    private static final int CI_GRPC_CASES = 1500;
    private static final int CI_LOOKUP_CASES = 3000;
    private static final long DEADLINE_MS = 10_000;
    private static final String[] TENANTS = {"", "default", "t1", "t2"};

    private ManualClock clock;
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    @BeforeEach
    void start()
    {
        clock = new ManualClock();
        master = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(0).adminPort(-1).clock(clock)
            .housekeeping(false).metadataShards(64));
        master.registry().mount("real-node", "real", "127.0.0.1:7001", 9, "real/seg0", 64L << 20);
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().directExecutor()
            .build();
        stub = MasterServiceGrpc.newBlockingStub(channel);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        master.close();
    }

    // ------------------------------------------------------------------------------------------- gRPC

    @Test
    void shouldAnswerEveryRandomOrMutatedRpcWithACodeOrATransportStatus() throws Exception
    {
        final int leaksBefore = LeakWatch.install();
        final FuzzRun run = new FuzzRun("master-grpc", CI_GRPC_CASES);
        final SplittableRandom random = new SplittableRandom(run.seed());
        final List<ServerMethodDefinition<?, ?>> methods =
            new ArrayList<>(new MasterGrpcService(null).bindService().getMethods());
        // Unary calls only: the SubscribeEvents stream never ends by itself; EventStreamTest checks its validation.
        methods.removeIf(m -> m.getMethodDescriptor().getType() != MethodDescriptor.MethodType.UNARY);
        final MethodDescriptor.Marshaller<byte[]> raw = new RawMarshaller();
        int ran = 0;
        try
        {
            for (int i = 0; i < run.cases(); i++)
            {
                final MethodDescriptor<?, ?> method = methods.get(random.nextInt(methods.size())).getMethodDescriptor();
                final Message requestPrototype = prototype(method.getRequestMarshaller());
                final Message responsePrototype = prototype(method.getResponseMarshaller());
                final byte[] request = fuzzBytes(random, requestPrototype);
                final MethodDescriptor<byte[], byte[]> rawMethod = MethodDescriptor.<byte[], byte[]>newBuilder()
                    .setType(MethodDescriptor.MethodType.UNARY)
                    .setFullMethodName(method.getFullMethodName())
                    .setRequestMarshaller(raw)
                    .setResponseMarshaller(raw)
                    .build();
                boolean parses = true;
                try
                {
                    requestPrototype.getParserForType().parseFrom(request);
                }
                catch (final InvalidProtocolBufferException ex)
                {
                    parses = false;
                }
                try
                {
                    final byte[] reply = ClientCalls.blockingUnaryCall(channel, rawMethod,
                        CallOptions.DEFAULT.withDeadlineAfter(DEADLINE_MS, TimeUnit.MILLISECONDS), request);
                    assertThat(parses).as(run.where(i) + ": " + method.getBareMethodName() +
                        " accepted bytes that are not its request message").isTrue();
                    final int code = codeOf(responsePrototype.getParserForType().parseFrom(reply));
                    assertThat(ErrorCode.forNumber(code)).as(run.where(i) + ": " + method.getBareMethodName() +
                        " answered an unknown code " + code).isNotNull();
                    run.count(code == OK_VALUE ? "ok" : "code");
                }
                catch (final StatusRuntimeException ex)
                {
                    assertThat(ex.getStatus().getCode()).as(run.where(i) + ": " + method.getBareMethodName() + " " +
                        ex.getStatus()).isEqualTo(Status.Code.INVALID_ARGUMENT);
                    assertThat(parses).as(run.where(i) + ": " + method.getBareMethodName() +
                        " failed on a well-formed request: " + ex.getStatus()).isFalse();
                    assertThat(ex.getStatus().getDescription()).as(run.where(i)).startsWith("malformed ");
                    run.count("malformed");
                }
                ran++;
                if (i % 500 == 499)
                {
                    assertServesValidClients("grpc-" + i);
                }
            }
            assertServesValidClients("grpc-end");
            assertNothingLeftOnceEveryNodeIsGone();
            assertThat(LeakWatch.collect()).as("ByteBuf leaks reported by Netty").isEqualTo(leaksBefore);
        }
        finally
        {
            run.report(ran);
        }
    }

    // ------------------------------------------------------------------------------------------- lookup port

    @Test
    void shouldAnswerEveryRandomOrMutatedLookupFrameWithAStatusOrHangUp() throws Exception
    {
        final int leaksBefore = LeakWatch.install();
        final FuzzRun run = new FuzzRun("master-lookup", CI_LOOKUP_CASES);
        final SplittableRandom random = new SplittableRandom(run.seed() + 1);
        final Message[] requests = {
            null, KeyRequest.getDefaultInstance(), BatchKeysRequest.getDefaultInstance(),
            BatchProbeKeyRequest.getDefaultInstance(), KeyRequest.getDefaultInstance(),
            BatchKeysRequest.getDefaultInstance(), PutStartRequest.getDefaultInstance(),
            PutEndRequest.getDefaultInstance(), PutRevokeRequest.getDefaultInstance(),
            BatchPutStartRequest.getDefaultInstance(), BatchKeysRequest.getDefaultInstance(),
            BatchKeysRequest.getDefaultInstance()};
        Socket socket = null;
        int ran = 0;
        try
        {
            for (int i = 0; i < run.cases(); i++)
            {
                if (socket == null)
                {
                    socket = new Socket("127.0.0.1", master.lookupPort());
                    socket.setSoTimeout((int)DEADLINE_MS);
                    socket.setTcpNoDelay(true);
                }
                final DataOutputStream out = new DataOutputStream(new java.io.BufferedOutputStream(
                    socket.getOutputStream(), 1 << 16));
                final DataInputStream in = new DataInputStream(socket.getInputStream());
                final int kind = random.nextInt(100);
                final int method = kind < 85 ? 1 + random.nextInt(requests.length - 1) : random.nextInt(256);
                final int version = kind >= 85 && kind < 90 ? random.nextInt(256) : VERSION;
                final Message prototype = method >= 1 && method < requests.length ? requests[method] : null;
                final byte[] payload = prototype == null ? randomBytes(random, random.nextInt(200)) :
                    fuzzBytes(random, prototype);
                final long id = random.nextLong();
                if (kind >= 95)
                {
                    // A frame length below a header, far above the limit, or promising more than comes: hang-up cases.
                    final int length = random.nextInt(3) == 0 ? random.nextInt(HEADER_LENGTH - LENGTH_FIELD_LENGTH) :
                        random.nextBoolean() ? MAX_FRAME_LENGTH + 1 + random.nextInt(1000) : 100 + payload.length;
                    try
                    {
                        out.writeInt(length);
                        out.writeByte(version);
                        out.writeByte(method);
                        out.writeShort(0);
                        out.writeLong(id);
                        out.write(payload);
                        out.flush();
                    }
                    catch (final IOException ex)
                    {
                        // the server hung up while we were still writing: what these cases expect
                    }
                    if (length < HEADER_LENGTH - LENGTH_FIELD_LENGTH || length > MAX_FRAME_LENGTH)
                    {
                        assertThat(readOrEof(in)).as(run.where(i) + ": the server must hang up").isEqualTo(-1);
                    }
                    socket.close();
                    socket = null;
                    run.count("hung-up");
                    ran++;
                    continue;
                }
                LookupServerTest.send(out, version, method, id, payload);
                final LookupServerTest.Reply reply = LookupServerTest.receive(in);
                assertThat(reply.requestId).as(run.where(i)).isEqualTo(id);
                assertThat(reply.method).as(run.where(i)).isEqualTo((method | RESPONSE_BIT) & 0xFF);
                assertThat(reply.status).as(run.where(i) + ": never an internal error").isNotEqualTo(STATUS_INTERNAL);
                if (version != VERSION)
                {
                    assertThat(reply.status).as(run.where(i)).isEqualTo(STATUS_BAD_VERSION);
                    run.count("bad-version");
                }
                else if (prototype == null)
                {
                    assertThat(reply.status).as(run.where(i)).isEqualTo(STATUS_UNKNOWN_METHOD);
                    run.count("unknown-method");
                }
                else
                {
                    boolean parses = true;
                    try
                    {
                        prototype.getParserForType().parseFrom(payload);
                    }
                    catch (final InvalidProtocolBufferException ex)
                    {
                        parses = false;
                    }
                    // BatchExistKey and BatchProbeKey go through BatchRequestDecoder, not protobuf: same verdicts.
                    if (reply.status == STATUS_OK)
                    {
                        assertThat(parses).as(run.where(i) + ": accepted bytes protobuf refuses (method " + method +
                            ", payload " + java.util.HexFormat.of().formatHex(payload) + ")").isTrue();
                        final Message response = responseOf(method).getParserForType().parseFrom(reply.payload);
                        assertThat(ErrorCode.forNumber(codeOf(response))).as(run.where(i)).isNotNull();
                        run.count("ok");
                    }
                    else
                    {
                        assertThat(reply.status).as(run.where(i)).isEqualTo(STATUS_MALFORMED);
                        assertThat(parses).as(run.where(i) + ": refused a well-formed request: " +
                            new String(reply.payload, java.nio.charset.StandardCharsets.UTF_8)).isFalse();
                        run.count("malformed");
                    }
                }
                ran++;
                if (i % 500 == 499)
                {
                    assertServesValidClients("lookup-" + i);
                }
            }
        }
        finally
        {
            if (socket != null)
            {
                socket.close();
            }
            run.report(ran);
        }
        assertServesValidClients("lookup-end");
        assertNothingLeftOnceEveryNodeIsGone();
        assertThat(LeakWatch.collect()).as("ByteBuf leaks reported by Netty").isEqualTo(leaksBefore);
    }

    private static int readOrEof(final InputStream in) throws IOException
    {
        try
        {
            return in.read();
        }
        catch (final SocketTimeoutException ex)
        {
            throw new AssertionError("the lookup port neither answered nor closed", ex);
        }
        catch (final IOException ex)
        {
            return -1; // reset
        }
    }

    private static Message responseOf(final int method)
    {
        switch (method)
        {
            case METHOD_EXIST_KEY: return ExistKeyResponse.getDefaultInstance();
            case METHOD_BATCH_EXIST_KEY: return BatchExistKeyResponse.getDefaultInstance();
            case METHOD_BATCH_PROBE_KEY: return io.granary.proto.BatchProbeKeyResponse.getDefaultInstance();
            case METHOD_GET_REPLICA_LIST: return GetReplicaListResponse.getDefaultInstance();
            case METHOD_BATCH_GET_REPLICA_LIST: return io.granary.proto.BatchGetReplicaListResponse.getDefaultInstance();
            case METHOD_PUT_START: return PutStartResponse.getDefaultInstance();
            case METHOD_BATCH_PUT_START: return io.granary.proto.BatchPutStartResponse.getDefaultInstance();
            case METHOD_PUT_END:
            case METHOD_PUT_REVOKE: return io.granary.proto.CodeResponse.getDefaultInstance();
            default: return io.granary.proto.BatchCodeResponse.getDefaultInstance();
        }
    }

    // ------------------------------------------------------------------------------------------- checks

    /** A put, a read, an exists over gRPC and over the lookup port, and a remove, all as a well-behaved client does. */
    private void assertServesValidClients(final String when) throws IOException
    {
        final MasterServiceGrpc.MasterServiceBlockingStub s = stub.withDeadlineAfter(DEADLINE_MS, TimeUnit.MILLISECONDS);
        final String key = "valid/" + when;
        final PutStartResponse started = s.putStart(PutStartRequest.newBuilder().setTenant("t1").setClientId("valid")
            .setKey(key).setValueLength(4096).build());
        assertThat(started.getCode()).as(when + " PutStart").isEqualTo(OK_VALUE);
        assertThat(s.putEnd(PutEndRequest.newBuilder().setTenant("t1").setClientId("valid").setKey(key).build())
            .getCode()).as(when + " PutEnd").isEqualTo(OK_VALUE);
        final GetReplicaListResponse replicas =
            s.getReplicaList(KeyRequest.newBuilder().setTenant("t1").setKey(key).build());
        assertThat(replicas.getCode()).as(when + " GetReplicaList").isEqualTo(OK_VALUE);
        assertThat(replicas.getValueLength()).isEqualTo(4096);
        assertThat(replicas.getReplicas(0).getOffset() + replicas.getReplicas(0).getLength())
            .isLessThanOrEqualTo(replicas.getReplicas(0).getLength() == 0 ? 0 : 1L << 40);
        try (Socket socket = new Socket("127.0.0.1", master.lookupPort()))
        {
            socket.setSoTimeout((int)DEADLINE_MS);
            LookupServerTest.send(new DataOutputStream(socket.getOutputStream()), METHOD_EXIST_KEY, 1,
                KeyRequest.newBuilder().setTenant("t1").setKey(key).build());
            final LookupServerTest.Reply reply = LookupServerTest.receive(new DataInputStream(socket.getInputStream()));
            assertThat(reply.status).as(when + " lookup ExistKey").isEqualTo(STATUS_OK);
            assertThat(ExistKeyResponse.parseFrom(reply.payload).getExists()).as(when + " lookup ExistKey").isTrue();
        }
        assertThat(s.remove(RemoveRequest.newBuilder().setTenant("t1").setKey(key).setForce(true).build()).getCode())
            .as(when + " Remove").isEqualTo(OK_VALUE);
    }

    /**
     * Removes what the fuzz stored in the tenants it named, lets abandoned puts be reclaimed, then lets every node
     * expire: no object may outlive its segments, and the real segment's extents must all have come back.
     */
    private void assertNothingLeftOnceEveryNodeIsGone()
    {
        for (final String tenant : TENANTS)
        {
            stub.withDeadlineAfter(DEADLINE_MS, TimeUnit.MILLISECONDS)
                .removeAll(RemoveAllRequest.newBuilder().setTenant(tenant).setForce(true).build());
        }
        final Duration step = master.context().putReleaseTimeout().plus(master.context().putDiscardTimeout())
            .plusSeconds(1);
        for (int round = 0; round < 2; round++)
        {
            clock.advance(step);
            master.registry().heartbeat("real-node");
            master.housekeep();
            master.registry().heartbeat("real-node");
        }
        for (final String tenant : TENANTS)
        {
            stub.withDeadlineAfter(DEADLINE_MS, TimeUnit.MILLISECONDS)
                .removeAll(RemoveAllRequest.newBuilder().setTenant(tenant).setForce(true).build());
        }
        if (master.store().objectCount() == 0)
        {
            for (final io.granary.master.segment.MountedSegment segment : master.registry().liveSegments())
            {
                assertThat(segment.allocatedBytes()).as("extents left on " + segment.name() + " with no object")
                    .isZero();
            }
        }
        clock.advance(master.context().nodeTtl().plusSeconds(1));
        master.housekeep();
        assertThat(master.registry().liveSegments()).as("segments once every node went silent").isEmpty();
        assertThat(master.store().objectCount()).as("objects once every segment is gone").isZero();
    }

    // ------------------------------------------------------------------------------------------- generation

    /** Bytes for a request: a random message of its type, often mutated at the byte level, or plain noise. */
    static byte[] fuzzBytes(final SplittableRandom random, final Message prototype)
    {
        final int kind = random.nextInt(10);
        if (kind == 0)
        {
            return randomBytes(random, random.nextInt(random.nextInt(20) == 0 ? 4096 : 64));
        }
        final byte[] valid = randomMessage(random, prototype, 0).toByteArray();
        return kind < 6 ? valid : mutateBytes(random, valid);
    }

    static Message randomMessage(final SplittableRandom random, final Message prototype, final int depth)
    {
        final Message.Builder builder = prototype.newBuilderForType();
        for (final FieldDescriptor field : prototype.getDescriptorForType().getFields())
        {
            if (random.nextInt(4) == 0)
            {
                continue;
            }
            if (field.isRepeated())
            {
                final int count = random.nextInt(50) == 0 ? 100 + random.nextInt(500) : random.nextInt(8);
                for (int i = 0; i < count; i++)
                {
                    builder.addRepeatedField(field, randomValue(random, builder, field, depth));
                }
            }
            else
            {
                builder.setField(field, randomValue(random, builder, field, depth));
            }
        }
        return builder.build();
    }

    private static Object randomValue(
        final SplittableRandom random, final Message.Builder builder, final FieldDescriptor field, final int depth)
    {
        switch (field.getJavaType())
        {
            case INT:
                return pick(random, new Integer[]{0, 1, -1, 2, 16, 17, Integer.MAX_VALUE, Integer.MIN_VALUE,
                    random.nextInt(), random.nextInt(100)});
            case LONG:
                return pick(random, new Long[]{0L, 1L, -1L, 4096L, 1L << 40, (1L << 40) + 1, Long.MAX_VALUE,
                    Long.MIN_VALUE, random.nextLong(), (long)random.nextInt(1 << 20)});
            case BOOLEAN:
                return random.nextBoolean();
            case STRING:
                return randomString(random, field.getName());
            case BYTE_STRING:
                return ByteString.copyFrom(randomBytes(random, random.nextInt(40)));
            case ENUM:
                final int number = random.nextInt(4) == 0 ? random.nextInt() :
                    random.nextInt(field.getEnumType().getValues().size() + 1);
                final EnumValueDescriptor value = field.getEnumType().findValueByNumberCreatingIfUnknown(number);
                return value;
            case MESSAGE:
                if (depth > 2)
                {
                    return builder.newBuilderForField(field).build();
                }
                return randomMessage(random, builder.newBuilderForField(field).build(), depth + 1);
            case FLOAT:
                return random.nextInt() / 7f;
            case DOUBLE:
                return random.nextDouble();
            default:
                throw new IllegalStateException("no generator for " + field);
        }
    }

    /** Strings by field name: mostly names the master knows (so puts, leases and removals really happen). */
    private static String randomString(final SplittableRandom random, final String fieldName)
    {
        final int kind = random.nextInt(10);
        if (kind == 0)
        {
            return "";
        }
        if (kind == 1)
        {
            return "x".repeat(4000 + random.nextInt(200)); // around the key limit
        }
        if (kind == 2)
        {
            return "bad\u0000" + random.nextInt(10) + "\u0007\uD83D\uDE00";
        }
        switch (fieldName)
        {
            case "tenant":
                return TENANTS[random.nextInt(TENANTS.length)];
            case "client_id":
                return random.nextInt(4) == 0 ? "c".repeat(250 + random.nextInt(20)) : "c" + random.nextInt(3);
            case "regex":
                return pick(random, new String[]{".*", "k.*", "(a+)+b", "(a|a)*c", "[", "a{1,99999}", "(?s).*x",
                    "\\", "k" + random.nextInt(10) + ".*"});
            case "key":
            case "keys":
                return random.nextInt(8) == 0 ? "a".repeat(28 + random.nextInt(4)) : "k" + random.nextInt(64);
            case "endpoint":
                return pick(random, new String[]{"127.0.0.1:7002", "host:0", "host:65536", ":1", "h:x", "[::1]:9",
                    "fuzz-" + random.nextInt(4) + ":7000"});
            case "node_id":
            case "node_name":
                return "fuzz-node-" + random.nextInt(4);
            case "name":
                return "fuzz-node-" + random.nextInt(4) + "/seg" + random.nextInt(2);
            case "group_id":
                return "g" + random.nextInt(4);
            case "preferred_segment":
                return random.nextBoolean() ? "real/seg0" : "fuzz-node-1/seg0";
            default:
                return "s" + random.nextInt(100);
        }
    }

    static byte[] mutateBytes(final SplittableRandom random, final byte[] valid)
    {
        byte[] bytes = valid.clone();
        final int mutations = 1 + random.nextInt(4);
        for (int m = 0; m < mutations; m++)
        {
            switch (random.nextInt(5))
            {
                case 0:
                    if (bytes.length > 0)
                    {
                        bytes[random.nextInt(bytes.length)] ^= (byte)(1 << random.nextInt(8));
                    }
                    break;
                case 1:
                    bytes = java.util.Arrays.copyOf(bytes, bytes.length == 0 ? 0 : random.nextInt(bytes.length));
                    break;
                case 2:
                {
                    final int at = bytes.length == 0 ? 0 : random.nextInt(bytes.length + 1);
                    final byte[] extra = randomBytes(random, 1 + random.nextInt(8));
                    final byte[] grown = new byte[bytes.length + extra.length];
                    System.arraycopy(bytes, 0, grown, 0, at);
                    System.arraycopy(extra, 0, grown, at, extra.length);
                    System.arraycopy(bytes, at, grown, at + extra.length, bytes.length - at);
                    bytes = grown;
                    break;
                }
                case 3:
                    if (bytes.length > 0)
                    {
                        bytes[random.nextInt(bytes.length)] = (byte)random.nextInt(256);
                    }
                    break;
                default:
                {
                    final byte[] doubled = java.util.Arrays.copyOf(bytes, bytes.length * 2);
                    System.arraycopy(bytes, 0, doubled, bytes.length, bytes.length);
                    bytes = doubled; // fields repeated: last one wins, repeated ones append
                    break;
                }
            }
        }
        return bytes;
    }

    static byte[] randomBytes(final SplittableRandom random, final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    @SafeVarargs
    private static <T> T pick(final SplittableRandom random, final T... values)
    {
        return values[random.nextInt(values.length)];
    }

    /** Field 1 of every reply is its int32 code. */
    static int codeOf(final Message response)
    {
        final FieldDescriptor code = response.getDescriptorForType().findFieldByNumber(1);
        return (Integer)response.getField(code);
    }

    private static Message prototype(final MethodDescriptor.Marshaller<?> marshaller)
    {
        return (Message)((MethodDescriptor.PrototypeMarshaller<?>)marshaller).getMessagePrototype();
    }

    /** Bytes in, bytes out: the fuzz sends what it likes and reads what comes back. */
    private static final class RawMarshaller implements MethodDescriptor.Marshaller<byte[]>
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
                throw Status.INTERNAL.withCause(ex).asRuntimeException();
            }
        }
    }
}
