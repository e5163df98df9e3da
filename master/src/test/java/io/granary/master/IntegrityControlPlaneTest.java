package io.granary.master;

import com.google.protobuf.ByteString;
import io.granary.common.ManualClock;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyInfo;
import io.granary.proto.KeyRequest;
import io.granary.proto.LeaseMode;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.MountSegmentRequest;
import io.granary.proto.MountSegmentResponse;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveRequest;
import io.granary.proto.Replica;
import io.granary.proto.ReplicaStatus;
import io.granary.proto.SegmentInfo;
import io.granary.protocol.AccessTokenCodec;
import io.granary.protocol.FrameDescriptor;
import io.granary.protocol.LookupDescriptor;
import io.granary.protocol.Opcode;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static io.granary.proto.ErrorCode.INVALID_PARAMS_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_ALREADY_EXISTS_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_HAS_LEASE_VALUE;
import static io.granary.proto.ErrorCode.OBJECT_NOT_FOUND_VALUE;
import static io.granary.proto.ErrorCode.OK_VALUE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The master's side of end-to-end checksums and data-plane access tokens, over gRPC and the lookup port. */
class IntegrityControlPlaneTest
{
    private static final int SEGMENT_ID = 5;
    private static final String NODE_ID = "node-1";

    private final ManualClock clock = new ManualClock();
    private MasterServer master;
    private ManagedChannel channel;
    private MasterServiceGrpc.MasterServiceBlockingStub stub;

    private void start(final Consumer<MasterServer.Context> settings)
    {
        final MasterServer.Context ctx = new MasterServer.Context()
            .port(0).lookupPort(0).adminPort(-1).clock(clock).housekeeping(false).metadataShards(64);
        settings.accept(ctx);
        master = MasterServer.launch(ctx);
        channel = ManagedChannelBuilder.forAddress("127.0.0.1", master.grpcPort()).usePlaintext().build();
        stub = MasterServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    /** Starts the master with a token key file in {@code dir} and a 10 s lease; returns node {@link #NODE_ID}'s key. */
    private byte[] startWithTokenKey(final Path dir) throws IOException
    {
        final byte[] masterKey = AccessTokenCodec.newRandomKey();
        final Path keyFile = dir.resolve("token.key");
        Files.writeString(keyFile, HexFormat.of().formatHex(masterKey) + "\n");
        start(ctx -> ctx.tokenKeyFile(keyFile.toString()).leaseTtl(java.time.Duration.ofSeconds(10)));
        return AccessTokenCodec.deriveNodeKey(masterKey, NODE_ID);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        if (channel != null)
        {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (master != null)
        {
            master.close();
        }
    }

    private MountSegmentResponse mount()
    {
        return stub.mountSegment(MountSegmentRequest.newBuilder()
            .setNodeId(NODE_ID).setNodeName("n1").setEndpoint("127.0.0.1:7001")
            .setSegment(SegmentInfo.newBuilder().setSegmentId(SEGMENT_ID).setName("n1/seg0").setSizeBytes(1 << 20))
            .build());
    }

    private PutStartResponse putStart(final String key, final long length)
    {
        return stub.putStart(PutStartRequest.newBuilder().setClientId("c").setKey(key).setValueLength(length).build());
    }

    private static int expiryOf(final Replica replica)
    {
        return ByteBuffer.wrap(replica.getAccessToken().toByteArray()).getInt();
    }

    private static boolean grants(
        final byte[] nodeKey, final Replica replica, final int opcode, final long expirySec)
    {
        final byte[] token = replica.getAccessToken().toByteArray();
        return new AccessTokenCodec(nodeKey).verify(opcode, replica.getSegmentId(), replica.getOffset(),
            replica.getLength(), expirySec, Arrays.copyOfRange(token, 4, FrameDescriptor.ACCESS_TOKEN_LENGTH));
    }

    /**
     * Checks that {@code replicas} (in key order) come in the runs a master must form: each extent that begins where
     * the previous one ends joins its run; every member of a run carries one token, signed for {@code opcode} over the
     * run and expiring with the earliest of the members' own expiries, and, in a run of two or more, the run as its
     * grant. @return the number of runs.
     */
    private static int checkRuns(
        final byte[] nodeKey, final int opcode, final List<Replica> replicas, final List<Long> ownExpiry)
    {
        int runs = 0;
        for (int i = 0; i < replicas.size(); )
        {
            int end = i + 1;
            while (end < replicas.size() &&
                replicas.get(end).getOffset() == replicas.get(end - 1).getOffset() + replicas.get(end - 1).getLength())
            {
                end++;
            }
            final long grantOffset = replicas.get(i).getOffset();
            final long grantLength = replicas.get(end - 1).getOffset() + replicas.get(end - 1).getLength() - grantOffset;
            final long expiry = ownExpiry.subList(i, end).stream().mapToLong(Long::longValue).min().orElseThrow();
            for (int j = i; j < end; j++)
            {
                final Replica r = replicas.get(j);
                assertThat(r.getAccessToken()).as("one token per run").isEqualTo(replicas.get(i).getAccessToken());
                assertThat(expiryOf(r)).as("the run's earliest expiry").isEqualTo(expiry);
                assertThat(grants(nodeKey, r, opcode == Opcode.READ ? Opcode.WRITE : Opcode.READ, expiry))
                    .as("not a token for the other operation").isFalse();
                if (end - i == 1)
                {
                    assertThat(r.getGrantLength()).as("a run of one grants its extent").isZero();
                    assertThat(grants(nodeKey, r, opcode, expiry)).isTrue();
                }
                else
                {
                    assertThat(r.getGrantOffset()).isEqualTo(grantOffset);
                    assertThat(r.getGrantLength()).isEqualTo(grantLength);
                    final byte[] token = r.getAccessToken().toByteArray();
                    assertThat(new AccessTokenCodec(nodeKey).verify(opcode, SEGMENT_ID, grantOffset, grantLength,
                        expiry, Arrays.copyOfRange(token, 4, FrameDescriptor.ACCESS_TOKEN_LENGTH))).isTrue();
                    assertThat(grants(nodeKey, r, opcode, expiry)).as("not a token of the extent alone").isFalse();
                }
            }
            runs++;
            i = end;
        }
        return runs;
    }

    private static void send(final DataOutputStream out, final int method, final long id,
        final com.google.protobuf.MessageLite request) throws IOException
    {
        final byte[] payload = request.toByteArray();
        out.writeInt(LookupDescriptor.HEADER_LENGTH - LookupDescriptor.LENGTH_FIELD_LENGTH + payload.length);
        out.writeByte(LookupDescriptor.VERSION);
        out.writeByte(method);
        out.writeShort(0);
        out.writeLong(id);
        out.write(payload);
        out.flush();
    }

    /** The payload of the next lookup reply, which must be OK. */
    private static byte[] receive(final DataInputStream in) throws IOException
    {
        final int length = in.readInt();
        in.readUnsignedByte();
        in.readUnsignedByte();
        assertThat(in.readUnsignedShort()).isEqualTo(LookupDescriptor.STATUS_OK);
        in.readLong();
        final byte[] payload = new byte[length - (LookupDescriptor.HEADER_LENGTH - LookupDescriptor.LENGTH_FIELD_LENGTH)];
        in.readFully(payload);
        return payload;
    }

    // ------------------------------------------------------------------------------------------ checksums

    @Test
    void shouldRecordTheChecksumOfPutEndAndReturnItWithReplicaListsAndListKeys()
    {
        start(ctx -> ctx.dataTokens(false));
        mount();
        putStart("with", 100);
        putStart("without", 100);
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("with").setCrc32C(0xDEADBEEF)
            .build()).getCode()).isEqualTo(OK_VALUE);
        assertThat(stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("without").build()).getCode())
            .isEqualTo(OK_VALUE);

        final GetReplicaListResponse with = stub.getReplicaList(KeyRequest.newBuilder().setKey("with").build());
        assertThat(with.hasCrc32C()).isTrue();
        assertThat(with.getCrc32C()).isEqualTo(0xDEADBEEF);
        final GetReplicaListResponse without = stub.getReplicaList(KeyRequest.newBuilder().setKey("without").build());
        assertThat(without.getCode()).isEqualTo(OK_VALUE);
        assertThat(without.hasCrc32C()).as("no checksum is not crc 0").isFalse();

        final BatchGetReplicaListResponse batch = stub.batchGetReplicaList(
            BatchKeysRequest.newBuilder().addKeys("with").addKeys("without").build());
        assertThat(batch.getResults(0).getCrc32C()).isEqualTo(0xDEADBEEF);
        assertThat(batch.getResults(1).hasCrc32C()).isFalse();

        final KeyInfo[] infos = stub.listKeys(ListKeysRequest.getDefaultInstance()).getKeysList()
            .toArray(new KeyInfo[0]);
        assertThat(infos[0].getKey()).isEqualTo("with");
        assertThat(infos[0].hasCrc32C()).isTrue();
        assertThat(infos[0].getCrc32C()).isEqualTo(0xDEADBEEF);
        assertThat(infos[1].hasCrc32C()).isFalse();
    }

    @Test
    void shouldRecordBatchChecksumsPerKeyAndRefuseAMismatchedCount()
    {
        start(ctx -> ctx.dataTokens(false));
        mount();
        putStart("a", 10);
        putStart("b", 10);
        putStart("c", 10);

        final BatchCodeResponse wrongCount = stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c")
            .addKeys("a").addKeys("b").addCrc32C(1).build());
        assertThat(wrongCount.getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(stub.getReplicaList(KeyRequest.newBuilder().setKey("a").build()).getCode())
            .as("nothing was ended").isNotEqualTo(OK_VALUE);

        final BatchCodeResponse ended = stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c")
            .addKeys("a").addKeys("b").addCrc32C(0).addCrc32C(0xFFFFFFFF).build());
        assertThat(ended.getCodesList()).containsExactly(OK_VALUE, OK_VALUE);
        final GetReplicaListResponse a = stub.getReplicaList(KeyRequest.newBuilder().setKey("a").build());
        assertThat(a.hasCrc32C()).as("a CRC of 0 is a checksum").isTrue();
        assertThat(a.getCrc32C()).isZero();
        assertThat(stub.getReplicaList(KeyRequest.newBuilder().setKey("b").build()).getCrc32C()).isEqualTo(-1);

        assertThat(stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c").addKeys("c").build())
            .getCodesList()).containsExactly(OK_VALUE);
        assertThat(stub.getReplicaList(KeyRequest.newBuilder().setKey("c").build()).hasCrc32C()).isFalse();
    }

    @Test
    void shouldCarryChecksumsOnTheLookupPortToo() throws IOException
    {
        start(ctx -> ctx.dataTokens(false));
        mount();
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            final DataInputStream in = new DataInputStream(s.getInputStream());
            send(out, LookupDescriptor.METHOD_PUT_START, 1,
                PutStartRequest.newBuilder().setClientId("c").setKey("single").setValueLength(8).build());
            send(out, LookupDescriptor.METHOD_PUT_START, 2,
                PutStartRequest.newBuilder().setClientId("c").setKey("batched").setValueLength(8).build());
            send(out, LookupDescriptor.METHOD_PUT_END, 3,
                PutEndRequest.newBuilder().setClientId("c").setKey("single").setCrc32C(77).build());
            send(out, LookupDescriptor.METHOD_BATCH_PUT_END, 4,
                BatchKeysRequest.newBuilder().setClientId("c").addKeys("batched").addCrc32C(88).build());
            send(out, LookupDescriptor.METHOD_BATCH_GET_REPLICA_LIST, 5,
                BatchKeysRequest.newBuilder().addKeys("single").addKeys("batched").build());
            for (int i = 0; i < 2; i++)
            {
                assertThat(PutStartResponse.parseFrom(receive(in)).getCode()).isZero();
            }
            assertThat(CodeResponse.parseFrom(receive(in)).getCode()).isZero();
            assertThat(BatchCodeResponse.parseFrom(receive(in)).getCodesList())
                .containsExactly(OK_VALUE);
            final BatchGetReplicaListResponse lists =
                BatchGetReplicaListResponse.parseFrom(receive(in));
            assertThat(lists.getResults(0).getCrc32C()).isEqualTo(77);
            assertThat(lists.getResults(1).getCrc32C()).isEqualTo(88);
        }
    }

    // ------------------------------------------------------------------------------------------ tokens

    @Test
    void shouldHandEachNodeItsKeyAndSignWriteAndReadTokensWithIt(@TempDir final Path dir) throws IOException
    {
        final byte[] nodeKey = startWithTokenKey(dir);

        final MountSegmentResponse mounted = mount();
        assertThat(mounted.getDataTokenKey().toByteArray()).isEqualTo(nodeKey);

        final long startSec = clock.epochMillis() / 1000;
        final PutStartResponse started = putStart("k", 1000);
        final Replica writable = started.getReplicas(0);
        assertThat(writable.getAccessToken().size()).isEqualTo(FrameDescriptor.ACCESS_TOKEN_LENGTH);
        assertThat(expiryOf(writable)).as("WRITE tokens last the discard timeout").isEqualTo(startSec + 30);
        assertThat(grants(nodeKey, writable, Opcode.WRITE, expiryOf(writable))).isTrue();
        assertThat(grants(nodeKey, writable, Opcode.READ, expiryOf(writable))).isFalse();

        clock.advanceMillis(5_000);
        assertThat(expiryOf(putStart("k", 1000).getReplicas(0))).as("a retried PutStart keeps the deadline")
            .isEqualTo(startSec + 30);
        stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("k").build());

        final Replica readable = stub.getReplicaList(KeyRequest.newBuilder().setKey("k").build()).getReplicas(0);
        assertThat(expiryOf(readable)).as("READ tokens end with the lease").isEqualTo(startSec + 5 + 10);
        assertThat(grants(nodeKey, readable, Opcode.READ, expiryOf(readable))).isTrue();
        assertThat(grants(nodeKey, readable, Opcode.WRITE, expiryOf(readable))).isFalse();

        clock.advanceMillis(1_500);
        final Replica later = stub.batchGetReplicaList(BatchKeysRequest.newBuilder().addKeys("k").build())
            .getResults(0).getReplicas(0);
        assertThat(expiryOf(later)).as("a fresh token for a later lookup").isEqualTo(startSec + 5 + 1 + 10);
        assertThat(grants(nodeKey, later, Opcode.READ, expiryOf(later))).isTrue();
    }

    @Test
    void shouldShareOneWriteTokenAmongContiguousExtentsOfABatchThatAcceptsSharedGrants(@TempDir final Path dir)
        throws IOException
    {
        final byte[] nodeKey = startWithTokenKey(dir);
        mount();

        // "early" is started alone first: retried in the batch, it keeps its earlier deadline; "taken" belongs to
        // another client, so the batch's put of it fails and it must get no replica.
        final long startSec = clock.epochMillis() / 1000;
        assertThat(stub.putStart(PutStartRequest.newBuilder().setClientId("other").setKey("taken")
            .setValueLength(4096).build()).getCode()).isEqualTo(OK_VALUE);
        assertThat(putStart("early", 4096).getCode()).isEqualTo(OK_VALUE);
        clock.advanceMillis(5_000);

        final List<String> keys = List.of("early", "a", "b", "taken", "c", "d", "e");
        final BatchPutStartRequest.Builder request = BatchPutStartRequest.newBuilder().setClientId("c");
        for (final String key : keys)
        {
            request.addKeys(key).addValueLengths(4096);
        }
        final BatchPutStartResponse shared = stub.batchPutStart(request.setSharedGrants(true).build());
        assertThat(shared.getResults(3).getCode()).isEqualTo(OBJECT_ALREADY_EXISTS_VALUE);
        assertThat(shared.getResults(3).getReplicasCount()).isZero();

        // The runs the answer must have: extents in key order, each continuing the previous one's end.
        final List<Replica> replicas = new ArrayList<>();
        final List<Long> ownExpiry = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++)
        {
            if (i != 3)
            {
                assertThat(shared.getResults(i).getCode()).isEqualTo(OK_VALUE);
                replicas.add(shared.getResults(i).getReplicas(0));
                ownExpiry.add(startSec + (i == 0 ? 30 : 35));
            }
        }
        final int runs = checkRuns(nodeKey, Opcode.WRITE, replicas, ownExpiry);
        assertThat(runs).as("the fresh extents of a, b, c, d and e lie end to end").isLessThan(replicas.size() - 1);
        assertThat(replicas.get(0).getGrantLength()).as("early's extent ends where a's begins: one run")
            .isGreaterThan(replicas.get(0).getLength());

        // A client that does not ask gets one token per extent, exactly as a single PutStart would.
        final BatchPutStartRequest.Builder plain = BatchPutStartRequest.newBuilder().setClientId("c");
        plain.addKeys("f").addValueLengths(4096).addKeys("g").addValueLengths(4096);
        for (final PutStartResponse result : stub.batchPutStart(plain.build()).getResultsList())
        {
            final Replica r = result.getReplicas(0);
            assertThat(r.getGrantLength()).isZero();
            assertThat(grants(nodeKey, r, Opcode.WRITE, startSec + 35)).isTrue();
        }
    }

    @Test
    void shouldShareOneReadTokenAmongContiguousExtentsOfABatchLookupOverGrpcAndTheLookupPort(@TempDir final Path dir)
        throws IOException
    {
        final byte[] nodeKey = startWithTokenKey(dir);
        mount();
        for (final List<String> batch : List.of(List.of("a", "b", "c"), List.of("gap"), List.of("d", "e")))
        {
            final BatchPutStartRequest.Builder put = BatchPutStartRequest.newBuilder().setClientId("c")
                .setSharedGrants(true);
            batch.forEach(key -> put.addKeys(key).addValueLengths(4096));
            assertThat(stub.batchPutStart(put.build()).getResultsList()).allMatch(r -> r.getCode() == OK_VALUE);
            assertThat(stub.batchPutEnd(BatchKeysRequest.newBuilder().setClientId("c").addAllKeys(batch).build())
                .getCodesList()).containsOnly(OK_VALUE);
        }
        clock.advanceMillis(2_000);
        final long expiry = clock.epochMillis() / 1000 + 10;

        final BatchKeysRequest lookup = BatchKeysRequest.newBuilder()
            .addKeys("a").addKeys("b").addKeys("c").addKeys("missing").addKeys("e").addKeys("d")
            .setSharedGrants(true).build();
        final BatchGetReplicaListResponse answer = stub.batchGetReplicaList(lookup);
        assertThat(answer.getResults(3).getCode()).isEqualTo(OBJECT_NOT_FOUND_VALUE);
        assertThat(answer.getResults(3).getReplicasCount()).isZero();
        final List<Replica> replicas = new ArrayList<>();
        for (int i = 0; i < 6; i++)
        {
            if (i != 3)
            {
                assertThat(answer.getResults(i).getCode()).isEqualTo(OK_VALUE);
                assertThat(answer.getResults(i).getValueLength()).isEqualTo(4096);
                replicas.add(answer.getResults(i).getReplicas(0));
            }
        }
        assertThat(replicas.get(0).getStatus()).isEqualTo(ReplicaStatus.REPLICA_STATUS_COMPLETE);
        final int runs = checkRuns(nodeKey, Opcode.READ, replicas, List.of(expiry, expiry, expiry, expiry, expiry));
        assertThat(runs).as("a, b and c lie end to end; e, then d, each alone (a run only grows at its end)")
            .isEqualTo(3);
        assertThat(replicas.get(0).getGrantLength()).isEqualTo(3 * 4096);

        // The lookup port decodes the flag itself: the same answer there, and none shared without it.
        try (Socket s = new Socket("127.0.0.1", master.lookupPort()))
        {
            final DataOutputStream out = new DataOutputStream(s.getOutputStream());
            final DataInputStream in = new DataInputStream(s.getInputStream());
            send(out, LookupDescriptor.METHOD_BATCH_GET_REPLICA_LIST, 1, lookup);
            assertThat(BatchGetReplicaListResponse.parseFrom(receive(in))).isEqualTo(answer);
            send(out, LookupDescriptor.METHOD_BATCH_GET_REPLICA_LIST, 2, lookup.toBuilder().setSharedGrants(false)
                .build());
            final BatchGetReplicaListResponse plain = BatchGetReplicaListResponse.parseFrom(receive(in));
            for (final GetReplicaListResponse result : plain.getResultsList())
            {
                for (final Replica r : result.getReplicasList())
                {
                    assertThat(r.getGrantLength()).isZero();
                    assertThat(grants(nodeKey, r, Opcode.READ, expiry)).isTrue();
                }
            }

            // A prefix probe with replicas (one block per candidate): the leased prefix a, b, c is one run.
            final BatchProbeKeyRequest probe = BatchProbeKeyRequest.newBuilder()
                .setMode(LeaseMode.LEASE_MODE_LONGEST_PREFIX).setCandidateSize(1)
                .addKeys("a").addKeys("b").addKeys("c").addKeys("missing").addKeys("d")
                .setWithReplicas(true).setSharedGrants(true).build();
            send(out, LookupDescriptor.METHOD_BATCH_PROBE_KEY, 3, probe);
            final BatchProbeKeyResponse probed = BatchProbeKeyResponse.parseFrom(receive(in));
            assertThat(probed.getMaskList()).containsExactly(true, true, true, false, false);
            assertThat(probed).as("the same answer over gRPC").isEqualTo(stub.batchProbeKey(probe));
            final List<Replica> prefix = new ArrayList<>();
            for (int i = 0; i < 3; i++)
            {
                prefix.add(probed.getReplicas(i).getReplicas(0));
            }
            assertThat(probed.getReplicas(3).getReplicasCount()).isZero();
            assertThat(checkRuns(nodeKey, Opcode.READ, prefix, List.of(expiry, expiry, expiry))).isEqualTo(1);
            assertThat(prefix.get(0).getGrantLength()).isEqualTo(3 * 4096);
        }
    }

    @Test
    void shouldIssueNoTokensAndNoKeyWhenDataTokensAreOff()
    {
        start(ctx -> ctx.dataTokens(false));
        assertThat(mount().getDataTokenKey()).isEqualTo(ByteString.EMPTY);
        assertThat(putStart("k", 1000).getReplicas(0).getAccessToken()).isEqualTo(ByteString.EMPTY);
        stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("k").build());
        assertThat(stub.getReplicaList(KeyRequest.newBuilder().setKey("k").build()).getReplicas(0).getAccessToken())
            .isEqualTo(ByteString.EMPTY);
        assertThat(master.tokenIssuer()).isNull();
    }

    @Test
    void shouldRefuseValuesLongerThanATokenCanGrant()
    {
        start(ctx -> { });
        master.registry().mount(NODE_ID, "n1", "127.0.0.1:7001", SEGMENT_ID, "n1/seg0", 1L << 40);
        assertThat(putStart("huge", FrameDescriptor.MAX_GRANT_LENGTH + 1).getCode()).isEqualTo(INVALID_PARAMS_VALUE);
        assertThat(putStart("big", FrameDescriptor.MAX_GRANT_LENGTH).getCode()).isEqualTo(OK_VALUE);
    }

    @Test
    void shouldKeepAForceRemovedLeasedObjectsExtentOutOfUseUntilTheLeaseEnds()
    {
        start(ctx -> { });
        mount();
        putStart("k", 1000);
        stub.putEnd(PutEndRequest.newBuilder().setClientId("c").setKey("k").build());
        stub.getReplicaList(KeyRequest.newBuilder().setKey("k").build());

        assertThat(stub.remove(RemoveRequest.newBuilder().setKey("k").build()).getCode())
            .isEqualTo(OBJECT_HAS_LEASE_VALUE);
        assertThat(stub.remove(RemoveRequest.newBuilder().setKey("k").setForce(true).build()).getCode())
            .isEqualTo(OK_VALUE);
        assertThat(master.store().pendingReleaseCount()).as("quarantined while read tokens live").isEqualTo(1);

        clock.advanceMillis(10_001);
        master.housekeep();
        assertThat(master.store().pendingReleaseCount()).isZero();
    }

    @Test
    void shouldValidateTheTokenKeyFile(@TempDir final Path dir) throws IOException
    {
        final Path notHex = dir.resolve("bad.key");
        Files.writeString(notHex, "z".repeat(64));
        final Path shortKey = dir.resolve("short.key");
        Files.writeString(shortKey, "ab".repeat(16));

        assertThatThrownBy(() -> new MasterServer.Context().tokenKeyFile(notHex.toString()).conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--token-key-file")
            .hasMessageContaining("64 hex digits");
        assertThatThrownBy(() -> new MasterServer.Context().tokenKeyFile(shortKey.toString()).conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("64 hex digits");
        assertThatThrownBy(() -> new MasterServer.Context().tokenKeyFile(dir.resolve("missing").toString()).conclude())
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cannot be read");
        assertThat(new MasterServer.Context().conclude().tokenKey()).as("no file: a random key at start").isNull();
    }
}
