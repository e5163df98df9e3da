package io.granary.master.rpc;

import com.google.protobuf.MessageLite;
import io.granary.master.MasterServer;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.LeaseMode;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.concurrent.TimeUnit;

import static io.granary.proto.ErrorCode.INVALID_KEY_VALUE;
import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static io.granary.proto.ErrorCode.REPLICA_IS_NOT_READY_VALUE;
import static io.granary.protocol.LookupDescriptor.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LookupServerTest
{
    MasterServer master;

    /** A raw frame exchange: what the client library does, byte by byte. */
    static final class Reply
    {
        int method;
        int status;
        long requestId;
        byte[] payload;
    }

    @BeforeEach
    void start()
    {
        master = MasterServer.launch(new MasterServer.Context().port(0).lookupPort(0).adminPort(-1).housekeeping(false));
        master.registry().mount("n1", "n1", "127.0.0.1:7001", 9, "n1/seg0", 1 << 20);
        master.store().putStart("default", "c", "present", 100, PutOptions.getDefaultInstance(), new ArrayList<>());
        master.store().putEnd("default", "c", "present");
    }

    @AfterEach
    void stop()
    {
        master.close();
    }

    static void send(final DataOutputStream out, final int version, final int method, final long id, final byte[] payload)
        throws IOException
    {
        out.writeInt(HEADER_LENGTH - LENGTH_FIELD_LENGTH + payload.length);
        out.writeByte(version);
        out.writeByte(method);
        out.writeShort(0);
        out.writeLong(id);
        out.write(payload);
        out.flush();
    }

    static void send(final DataOutputStream out, final int method, final long id, final MessageLite request)
        throws IOException
    {
        send(out, VERSION, method, id, request.toByteArray());
    }

    static Reply receive(final DataInputStream in) throws IOException
    {
        final int length = in.readInt();
        final Reply r = new Reply();
        in.readUnsignedByte();
        r.method = in.readUnsignedByte();
        r.status = in.readUnsignedShort();
        r.requestId = in.readLong();
        r.payload = new byte[length - (HEADER_LENGTH - LENGTH_FIELD_LENGTH)];
        in.readFully(r.payload);
        return r;
    }

    @Test
    void shouldAnswerLookupsWithTheSameMessagesAsGrpc() throws IOException
    {
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            final DataInputStream in = new DataInputStream(s.getInputStream());

            // Two pipelined requests; replies come back in order with their ids.
            send(out, METHOD_BATCH_EXIST_KEY, 41, BatchKeysRequest.newBuilder().addKeys("present").addKeys("absent").build());
            send(out, METHOD_EXIST_KEY, 42, KeyRequest.newBuilder().setKey("present").build());
            final Reply batch = receive(in);
            assertThat(batch.method).isEqualTo(METHOD_BATCH_EXIST_KEY | RESPONSE_BIT);
            assertThat(batch.requestId).isEqualTo(41);
            assertThat(batch.status).isEqualTo(STATUS_OK);
            assertThat(BatchExistKeyResponse.parseFrom(batch.payload).getExistsList()).containsExactly(true, false);
            final Reply single = receive(in);
            assertThat(single.requestId).isEqualTo(42);
            assertThat(ExistKeyResponse.parseFrom(single.payload).getExists()).isTrue();

            send(out, METHOD_BATCH_PROBE_KEY, 43, BatchProbeKeyRequest.newBuilder()
                .setMode(LeaseMode.LEASE_MODE_LAST_HIT_ONLY).setCandidateSize(1).addKeys("present").addKeys("absent").build());
            final BatchProbeKeyResponse probe = BatchProbeKeyResponse.parseFrom(receive(in).payload);
            assertThat(probe.getCode()).isEqualTo(OK_VALUE);
            assertThat(probe.getMaskList()).containsExactly(true, false);
        }
    }

    @Test
    void shouldAnswerBatchReplicaListsAsTheGrpcHandlerDoesForEveryKindOfKey() throws IOException
    {
        master.store().putStart("default", "c", "unfinished", 64, PutOptions.getDefaultInstance(), new ArrayList<>());
        master.store().putStart("tenant-b", "c", "present", 200, PutOptions.getDefaultInstance(), new ArrayList<>());
        master.store().putEnd("tenant-b", "c", "present");
        final String tooLong = "k".repeat(5000);
        for (final String tenant : new String[]{"", "tenant-b", "no-such-tenant"})
        {
            final BatchKeysRequest request = BatchKeysRequest.newBuilder().setTenant(tenant).addKeys("present")
                .addKeys("absent").addKeys("unfinished").addKeys("").addKeys(tooLong).addKeys("present").addKeys("ключ")
                .build();
            final BatchGetReplicaListResponse viaGrpc;
            final ManagedChannel channel =
                ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
            try
            {
                viaGrpc = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .batchGetReplicaList(request);
            }
            finally
            {
                channel.shutdownNow();
            }
            final BatchGetReplicaListResponse viaLookupPort;
            try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
            {
                send(new DataOutputStream(s.getOutputStream()), METHOD_BATCH_GET_REPLICA_LIST, 7, request);
                final Reply reply = receive(new DataInputStream(s.getInputStream()));
                assertThat(reply.status).isEqualTo(STATUS_OK);
                viaLookupPort = BatchGetReplicaListResponse.parseFrom(reply.payload);
            }
            // Equal but for READ tokens, which may be signed for another second of expiry in the second call.
            assertThat(withoutTokens(viaLookupPort)).as(tenant).isEqualTo(withoutTokens(viaGrpc));
            if (!tenant.equals("no-such-tenant"))
            {
                assertThat(viaLookupPort.getResults(0).getReplicas(0).getAccessToken().size()).isEqualTo(20);
            }
            assertThat(viaLookupPort.getResultsList()).extracting(GetReplicaListResponse::getCode).as(tenant)
                .containsExactly(tenant.equals("no-such-tenant") ? OBJECT_NOT_FOUND_VALUE : OK_VALUE,
                    OBJECT_NOT_FOUND_VALUE, tenant.isEmpty() ? REPLICA_IS_NOT_READY_VALUE : OBJECT_NOT_FOUND_VALUE,
                    INVALID_KEY_VALUE, INVALID_KEY_VALUE,
                    tenant.equals("no-such-tenant") ? OBJECT_NOT_FOUND_VALUE : OK_VALUE, OBJECT_NOT_FOUND_VALUE);
        }
    }

    @Test
    void shouldAnswerAProbesReplicaListsAsGetReplicaListWouldOverBothPaths() throws IOException
    {
        final GetReplicaListResponse direct;
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            send(new DataOutputStream(s.getOutputStream()), METHOD_GET_REPLICA_LIST, 8,
                KeyRequest.newBuilder().setKey("present").build());
            direct = GetReplicaListResponse.parseFrom(receive(new DataInputStream(s.getInputStream())).payload);
        }
        assertThat(direct.getCode()).isEqualTo(OK_VALUE);
        final BatchProbeKeyRequest.Builder probe = BatchProbeKeyRequest.newBuilder()
            .setMode(LeaseMode.LEASE_MODE_LONGEST_PREFIX).setCandidateSize(1).setWithReplicas(true);
        final BatchProbeKeyRequest leases = probe.clone().addKeys("present").addKeys("absent").build();
        final BatchProbeKeyRequest badKey = probe.clone().addKeys("present").addKeys("").build();
        final BatchProbeKeyRequest none = probe.clone().setMode(LeaseMode.LEASE_MODE_NONE).setCandidateSize(0)
            .addKeys("present").build();
        final BatchProbeKeyRequest without = probe.clone().setWithReplicas(false).addKeys("present").build();
        final BatchProbeKeyRequest.Builder pair =
            probe.clone().setCandidateSize(2).addKeys("present").addKeys("present");
        for (final boolean lookupPort : new boolean[]{true, false})
        {
            final BatchProbeKeyResponse found = probe(lookupPort, leases);
            assertThat(found.getCode()).isEqualTo(OK_VALUE);
            assertThat(found.getMaskList()).containsExactly(true, false);
            assertThat(found.getReplicasCount()).isEqualTo(2);
            assertThat(found.getReplicas(0).getReplicas(0).getAccessToken().size()).isEqualTo(20);
            assertThat(withoutTokens(found.getReplicas(0))).isEqualTo(withoutTokens(direct));
            assertThat(found.getReplicas(1)).isEqualTo(GetReplicaListResponse.getDefaultInstance());

            // A bad key: the probe leases nothing, so no key gets a list; the bad one carries its code.
            final BatchProbeKeyResponse refused = probe(lookupPort, badKey);
            assertThat(refused.getMaskList()).containsExactly(false, false);
            assertThat(refused.getReplicasList()).extracting(GetReplicaListResponse::getCode)
                .containsExactly(OK_VALUE, INVALID_KEY_VALUE);
            assertThat(refused.getReplicasList()).extracting(GetReplicaListResponse::getReplicasCount)
                .containsExactly(0, 0);

            assertThat(probe(lookupPort, none).getCode()).isEqualTo(INVALID_PARAMS_VALUE);

            // Lists for the second member of each candidate only: the first is leased, its entry carries no list.
            final BatchProbeKeyResponse second = probe(lookupPort, pair.clone().setReplicasFrom(1).setReplicasCount(1)
                .build());
            assertThat(second.getMaskList()).containsExactly(true, true);
            assertThat(second.getReplicas(0)).isEqualTo(GetReplicaListResponse.getDefaultInstance());
            assertThat(withoutTokens(second.getReplicas(1))).isEqualTo(withoutTokens(direct));
            for (final int[] bad : new int[][]{{2, 1}, {1, 2}, {1, 0}, {-1, 1}})
            {
                assertThat(probe(lookupPort, pair.clone().setReplicasFrom(bad[0]).setReplicasCount(bad[1]).build())
                    .getCode()).as("members %d, %d", bad[0], bad[1]).isEqualTo(INVALID_PARAMS_VALUE);
            }
            assertThat(probe(lookupPort, without).getReplicasCount()).isZero();
        }
    }

    private BatchProbeKeyResponse probe(final boolean lookupPort, final BatchProbeKeyRequest request)
        throws IOException
    {
        if (!lookupPort)
        {
            final ManagedChannel channel =
                ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
            try
            {
                return MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .batchProbeKey(request);
            }
            finally
            {
                channel.shutdownNow();
            }
        }
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            send(new DataOutputStream(s.getOutputStream()), METHOD_BATCH_PROBE_KEY, 9, request);
            final Reply reply = receive(new DataInputStream(s.getInputStream()));
            assertThat(reply.status).isEqualTo(STATUS_OK);
            return BatchProbeKeyResponse.parseFrom(reply.payload);
        }
    }

    private static GetReplicaListResponse withoutTokens(final GetReplicaListResponse response)
    {
        final GetReplicaListResponse.Builder b = response.toBuilder();
        for (final io.granary.proto.Replica.Builder replica : b.getReplicasBuilderList())
        {
            replica.clearAccessToken();
        }
        return b.build();
    }

    private static BatchGetReplicaListResponse withoutTokens(final BatchGetReplicaListResponse response)
    {
        final BatchGetReplicaListResponse.Builder b = response.toBuilder();
        for (final GetReplicaListResponse.Builder result : b.getResultsBuilderList())
        {
            for (final io.granary.proto.Replica.Builder replica : result.getReplicasBuilderList())
            {
                replica.clearAccessToken();
            }
        }
        return b.build();
    }

    @Test
    void shouldServePutsOnTheLookupPort() throws IOException
    {
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            final DataInputStream in = new DataInputStream(s.getInputStream());
            send(out, METHOD_PUT_START, 1, PutStartRequest.newBuilder().setClientId("c2").setKey("fresh").setValueLength(64)
                .build());
            final PutStartResponse started = PutStartResponse.parseFrom(receive(in).payload);
            assertThat(started.getCode()).isEqualTo(OK_VALUE);
            assertThat(started.getReplicasCount()).isEqualTo(1);
            send(out, METHOD_PUT_END, 2, PutEndRequest.newBuilder().setClientId("c2").setKey("fresh").build());
            assertThat(CodeResponse.parseFrom(receive(in).payload).getCode()).isEqualTo(OK_VALUE);
            send(out, METHOD_EXIST_KEY, 3, KeyRequest.newBuilder().setKey("fresh").build());
            assertThat(ExistKeyResponse.parseFrom(receive(in).payload).getExists()).isTrue();
        }
    }

    @Test
    void shouldAnswerMalformedAndUnknownRequestsAndKeepTheConnection() throws IOException
    {
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            final DataInputStream in = new DataInputStream(s.getInputStream());

            send(out, VERSION, METHOD_BATCH_EXIST_KEY, 1, new byte[]{(byte)0xFF, (byte)0xFF, (byte)0xFF});
            final Reply malformed = receive(in);
            assertThat(malformed.status).isEqualTo(STATUS_MALFORMED);
            assertThat(new String(malformed.payload, StandardCharsets.UTF_8)).contains("malformed");

            send(out, VERSION, 99, 2, new byte[0]);
            assertThat(receive(in).status).isEqualTo(STATUS_UNKNOWN_METHOD);

            send(out, 7, METHOD_EXIST_KEY, 3, new byte[0]);
            assertThat(receive(in).status).isEqualTo(STATUS_BAD_VERSION);

            send(out, METHOD_EXIST_KEY, 4, KeyRequest.newBuilder().setKey("present").build());
            final Reply ok = receive(in);
            assertThat(ok.status).isEqualTo(STATUS_OK);
            assertThat(ExistKeyResponse.parseFrom(ok.payload).getExists()).isTrue();
        }
    }

    @Test
    void shouldCloseAConnectionThatSendsAnOversizedOrTruncatedFrameAndKeepServingOthers() throws IOException
    {
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(MAX_FRAME_LENGTH + 1);
            out.flush();
            final DataInputStream in = new DataInputStream(s.getInputStream());
            assertThatThrownBy(in::readInt).isInstanceOf(EOFException.class);
        }
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.writeInt(3); // shorter than a header
            out.write(new byte[3]);
            out.flush();
            assertThatThrownBy(() -> new DataInputStream(s.getInputStream()).readInt()).isInstanceOf(IOException.class);
        }
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            send(new DataOutputStream(s.getOutputStream()), METHOD_EXIST_KEY, 5, KeyRequest.newBuilder().setKey("present").build());
            assertThat(ExistKeyResponse.parseFrom(receive(new DataInputStream(s.getInputStream())).payload).getExists())
                .isTrue();
        }
    }
}
