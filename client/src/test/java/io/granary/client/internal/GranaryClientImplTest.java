package io.granary.client.internal;

import io.granary.client.ClientConfig;
import io.granary.client.ClusterStatus;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.KeyInfo;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;
import io.granary.client.SoftPinAction;
import io.granary.common.ManualClock;
import io.granary.proto.BatchCodeResponse;
import io.granary.proto.BatchExistKeyResponse;
import io.granary.proto.BatchGetReplicaListResponse;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchProbeKeyRequest;
import io.granary.proto.BatchProbeKeyResponse;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.BatchPutStartResponse;
import io.granary.proto.ClusterStatusResponse;
import io.granary.proto.CodeResponse;
import io.granary.proto.CountResponse;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.GetReplicaListResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.LeaseMode;
import io.granary.proto.ListKeysRequest;
import io.granary.proto.ListKeysResponse;
import io.granary.proto.NodeStatus;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.RemoveAllRequest;
import io.granary.proto.RemoveByRegexRequest;
import io.granary.proto.RemoveRequest;
import io.granary.proto.Replica;
import io.granary.proto.SegmentStatus;
import io.granary.protocol.Limits;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

class GranaryClientImplTest
{
    private static final String NODE_A = "10.0.0.1:7001";
    private static final String NODE_B = "10.0.0.2:7002";
    private static final PutOptions TWO_REPLICAS = PutOptions.builder().replicas(2).build();

    private final ScriptedMaster master = new ScriptedMaster();
    private final InMemoryTransferEngine engine = new InMemoryTransferEngine();
    private final ManualClock clock = new ManualClock();
    private GranaryClient client;

    @BeforeEach
    void setUp() throws IOException
    {
        master.start();
        client = connect(config().build());
    }

    @AfterEach
    void tearDown() throws InterruptedException
    {
        client.close();
        master.close();
    }

    private ClientConfig.Builder config()
    {
        // localHost matches no scripted node, so replica choice falls to load and then the master's order.
        // One attempt per put: retries are PutRetryAndCommitTest's subject.
        return ClientConfig.builder()
            .masterAddress(master.address())
            .tenant("t1")
            .clientId("client-1")
            .localHost("10.0.0.9")
            .putRetries(0);
    }

    private GranaryClient connect(final ClientConfig config)
    {
        return GranaryClientImpl.connect(config, (kind, transferConfig) -> engine, clock);
    }

    private static byte[] bytes(final int length, final int seed)
    {
        final byte[] b = new byte[length];
        for (int i = 0; i < length; i++)
        {
            b[i] = (byte)(seed + i * 31);
        }
        return b;
    }

    private static GranaryException thrown(final Runnable call)
    {
        return catchThrowableOfType(GranaryException.class, call::run);
    }

    // ------------------------------------------------------------------------------------------- put

    @Test
    void shouldWriteEveryReplicaThenEndThePut()
    {
        final byte[] value = bytes(1000, 1);
        final PutOptions options = PutOptions.builder()
            .replicas(2).softPin(SoftPinAction.ENABLE, Duration.ofMinutes(5)).hardPin(true).groupId("g7")
            .preferredSegment("node-a/seg0").build();

        client.put("k1", ByteBuffer.wrap(value), options);

        final PutStartRequest start = master.requests(PutStartRequest.class).get(0);
        assertThat(start.getTenant()).isEqualTo("t1");
        assertThat(start.getClientId()).isEqualTo("client-1");
        assertThat(start.getKey()).isEqualTo("k1");
        assertThat(start.getValueLength()).isEqualTo(1000);
        assertThat(start.getOptions().getReplicas()).isEqualTo(2);
        assertThat(start.getOptions().getSoftPin()).isEqualTo(io.granary.proto.SoftPinAction.SOFT_PIN_ENABLE);
        assertThat(start.getOptions().getSoftPinTtlMs()).isEqualTo(300_000);
        assertThat(start.getOptions().getHardPin()).isTrue();
        assertThat(start.getOptions().getGroupId()).isEqualTo("g7");
        assertThat(start.getOptions().getPreferredSegment()).isEqualTo("node-a/seg0");

        final List<TransferRequest> writes = engine.requests(TransferRequest.Op.WRITE);
        assertThat(writes).extracting(TransferRequest::endpoint).containsExactlyInAnyOrder(NODE_A, NODE_B);
        assertThat(writes).allSatisfy(w -> assertThat(w.length()).isEqualTo(1000));
        assertThat(engine.stored(NODE_A, 1, 0)).isEqualTo(value);
        assertThat(engine.stored(NODE_B, 2, 0)).isEqualTo(value);
        assertThat(master.requests(PutEndRequest.class)).extracting(PutEndRequest::getKey).containsExactly("k1");
        assertThat(master.requests(PutEndRequest.class).get(0).getClientId()).isEqualTo("client-1");
        assertThat(master.count(PutRevokeRequest.class)).isZero();
        assertThat(master.isComplete("k1")).isTrue();
    }

    @Test
    void shouldNotSendASoftPinTtlWhenNoneWasGiven()
    {
        client.put("k1", bytes(8, 1));

        final PutStartRequest start = master.requests(PutStartRequest.class).get(0);
        assertThat(start.getOptions().hasSoftPinTtlMs()).isFalse();
        assertThat(start.getOptions().getSoftPin()).isEqualTo(io.granary.proto.SoftPinAction.SOFT_PIN_PRESERVE);
        assertThat(start.getOptions().getReplicas()).isEqualTo(1);
    }

    @Test
    void shouldSendTheValueFromTheCallersBufferWithoutMovingIt()
    {
        final byte[] backing = bytes(64, 9);
        final ByteBuffer value = ByteBuffer.wrap(backing);
        value.position(8).limit(40);

        client.put("k1", value, TWO_REPLICAS);

        assertThat(value.position()).isEqualTo(8);
        assertThat(value.limit()).isEqualTo(40);
        final List<TransferRequest> writes = engine.requests(TransferRequest.Op.WRITE);
        assertThat(writes).hasSize(2).allSatisfy(w ->
        {
            assertThat(w.local().array()).isSameAs(backing); // no copy of the value
            assertThat(w.local().position()).isEqualTo(8);
        });
        final byte[] expected = new byte[32];
        System.arraycopy(backing, 8, expected, 0, 32);
        assertThat(engine.stored(NODE_A, 1, 0)).isEqualTo(expected);
    }

    @Test
    void shouldRevokeAndNameTheNodeWhenAReplicaWriteFails()
    {
        engine.fail(NODE_B, ErrorCode.TRANSFER_FAIL);

        final GranaryException ex = thrown(() -> client.put("k1", ByteBuffer.wrap(bytes(100, 1)), TWO_REPLICAS));

        assertThat(ex.code()).isEqualTo(ErrorCode.TRANSFER_FAIL);
        assertThat(ex.getMessage()).contains("'k1'").contains("node-b").contains(NODE_B).doesNotContain("node-a");
        assertThat(master.requests(PutRevokeRequest.class)).extracting(PutRevokeRequest::getKey).containsExactly("k1");
        assertThat(master.requests(PutRevokeRequest.class).get(0).getClientId()).isEqualTo("client-1");
        assertThat(master.count(PutEndRequest.class)).isZero();
        assertThat(engine.requests(TransferRequest.Op.WRITE)).hasSize(2);
    }

    @Test
    void shouldCarryTheCodeTheEngineReportedForAFailedWrite()
    {
        engine.fail(NODE_A, ErrorCode.RPC_TIMEOUT);

        final GranaryException ex = thrown(() -> client.put("k1", ByteBuffer.wrap(bytes(10, 1)), TWO_REPLICAS));

        assertThat(ex.code()).isEqualTo(ErrorCode.RPC_TIMEOUT);
        assertThat(master.count(PutRevokeRequest.class)).isEqualTo(1);
    }

    @Test
    void shouldTreatObjectAlreadyExistsAsSuccessWithoutTransfers()
    {
        master.script("PutStart", (PutStartRequest r) ->
            PutStartResponse.newBuilder().setCode(ErrorCode.OBJECT_ALREADY_EXISTS.code()).build());

        client.put("k1", bytes(10, 1));

        assertThat(engine.requests()).isEmpty();
        assertThat(master.count(PutEndRequest.class)).isZero();
        assertThat(master.count(PutRevokeRequest.class)).isZero();
    }

    @Test
    void shouldThrowTheMastersCodeWhenPutStartIsRefused()
    {
        master.script("PutStart", (PutStartRequest r) ->
            PutStartResponse.newBuilder().setCode(ErrorCode.NO_AVAILABLE_HANDLE.code()).build());

        final GranaryException ex = thrown(() -> client.put("k1", bytes(10, 1)));

        assertThat(ex.code()).isEqualTo(ErrorCode.NO_AVAILABLE_HANDLE);
        assertThat(ex.getMessage()).contains("'k1'");
        assertThat(engine.requests()).isEmpty();
    }

    @Test
    void shouldRevokeWhenTheMasterHandsOutAnExtentOfTheWrongLength()
    {
        master.script("PutStart", (PutStartRequest r) -> PutStartResponse.newBuilder()
            .addReplicas(Replica.newBuilder().setNodeId("node-a").setEndpoint(NODE_A).setSegmentId(1).setLength(5))
            .build());

        final GranaryException ex = thrown(() -> client.put("k1", bytes(10, 1)));

        assertThat(ex.code()).isEqualTo(ErrorCode.INTERNAL_ERROR);
        assertThat(engine.requests()).isEmpty();
        assertThat(master.count(PutRevokeRequest.class)).isEqualTo(1);
    }

    @Test
    void shouldFailThePutWhenPutEndIsRefused()
    {
        master.script("PutEnd", (PutEndRequest r) ->
            CodeResponse.newBuilder().setCode(ErrorCode.ILLEGAL_CLIENT.code()).build());

        assertThat(thrown(() -> client.put("k1", bytes(10, 1))).code()).isEqualTo(ErrorCode.ILLEGAL_CLIENT);
    }

    @Test
    void shouldRefuseAnInvalidKeyWithoutAnRpc()
    {
        assertThat(thrown(() -> client.put("", bytes(1, 1))).code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(thrown(() -> client.get("a\0b")).code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(thrown(() -> client.exists("x".repeat(Limits.MAX_KEY_BYTES + 1))).code())
            .isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(thrown(() -> client.remove(null)).code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(master.requests()).isEmpty();
    }

    // ------------------------------------------------------------------------------------------- get

    @Test
    void shouldReadBackWhatWasPut()
    {
        final byte[] value = bytes(4096, 3);
        client.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS);

        assertThat(client.get("k1")).isEqualTo(value);
        assertThat(client.size("k1")).isEqualTo(4096);
        assertThat(master.requests(KeyRequest.class)).allSatisfy(r -> assertThat(r.getTenant()).isEqualTo("t1"));
        // one read for the get; size asks the master only
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(1);
    }

    @Test
    void shouldFailOverToTheNextReplicaWhenAReadFails()
    {
        final byte[] value = bytes(300, 5);
        client.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS);
        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);

        assertThat(client.get("k1")).isEqualTo(value);

        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(TransferRequest::endpoint)
            .containsExactly(NODE_A, NODE_B);
    }

    @Test
    void shouldFailWithTransferFailNamingEveryTriedNodeWhenAllReplicasFail()
    {
        client.put("k1", ByteBuffer.wrap(bytes(300, 5)), TWO_REPLICAS);
        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);
        engine.fail(NODE_B, ErrorCode.RPC_TIMEOUT);

        final GranaryException ex = thrown(() -> client.get("k1"));

        assertThat(ex.code()).isEqualTo(ErrorCode.TRANSFER_FAIL);
        assertThat(ex.getMessage()).contains("'k1'").contains("node-a").contains("node-b").contains("RPC_TIMEOUT");
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(2);
    }

    @Test
    void shouldPreferTheReplicaOnThisHost()
    {
        final byte[] value = bytes(50, 5);
        try (GranaryClient onNodeB = connect(config().localHost("10.0.0.2").build()))
        {
            onNodeB.put("k1", ByteBuffer.wrap(value), TWO_REPLICAS);

            assertThat(onNodeB.get("k1")).isEqualTo(value);
        }

        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(TransferRequest::endpoint)
            .containsExactly(NODE_B);
    }

    @Test
    void shouldThrowObjectNotFoundOnAMiss()
    {
        assertThat(thrown(() -> client.get("nope")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(thrown(() -> client.getInto("nope", ByteBuffer.allocate(8))).code())
            .isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(thrown(() -> client.size("nope")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(thrown(() -> client.get("nope")).getMessage()).contains("'nope'");
        assertThat(engine.requests()).isEmpty();
    }

    @Test
    void shouldStoreAndReadAnEmptyValueWithoutMovingBytes()
    {
        client.put("empty", new byte[0]);

        assertThat(client.get("empty")).isEmpty();
        assertThat(client.getInto("empty", ByteBuffer.allocate(0))).isZero();
        assertThat(engine.requests()).as("no byte moves, only the COMMIT that records the empty value")
            .singleElement().satisfies(r ->
            {
                assertThat(r.length()).isZero();
                assertThat(r.commit()).isNotNull();
            });
        assertThat(master.count(PutEndRequest.class)).isEqualTo(1);
    }

    @Test
    void shouldReadIntoTheBufferAtItsPositionAndAdvanceIt()
    {
        final byte[] value = bytes(100, 7);
        client.put("k1", value);
        final ByteBuffer dst = ByteBuffer.allocateDirect(256);
        dst.position(10).limit(200);

        final int read = client.getInto("k1", dst);

        assertThat(read).isEqualTo(100);
        assertThat(dst.position()).isEqualTo(110);
        assertThat(dst.limit()).isEqualTo(200);
        final byte[] got = new byte[100];
        dst.get(10, got);
        assertThat(got).isEqualTo(value);
        assertThat(dst.get(9)).isZero();
        assertThat(dst.get(110)).isZero();
    }

    @Test
    void shouldRefuseBufferOverflowBeforeAnyTransfer()
    {
        client.put("k1", bytes(100, 7));
        final ByteBuffer dst = ByteBuffer.allocate(128);
        dst.position(30); // 98 remaining

        final GranaryException ex = thrown(() -> client.getInto("k1", dst));

        assertThat(ex.code()).isEqualTo(ErrorCode.BUFFER_OVERFLOW);
        assertThat(ex.getMessage()).contains("100").contains("98");
        assertThat(dst.position()).isEqualTo(30);
        assertThat(engine.requests(TransferRequest.Op.READ)).isEmpty();
    }

    @Test
    void shouldKeepTheBufferPositionWhenTheReadFails()
    {
        client.put("k1", bytes(100, 7));
        engine.fail(NODE_A, ErrorCode.TRANSFER_FAIL);
        final ByteBuffer dst = ByteBuffer.allocate(128);

        assertThat(thrown(() -> client.getInto("k1", dst)).code()).isEqualTo(ErrorCode.TRANSFER_FAIL);
        assertThat(dst.position()).isZero();
    }

    @Test
    void shouldRefuseAReadOnlyDestination()
    {
        assertThatThrownBy(() -> client.getInto("k1", ByteBuffer.allocate(8).asReadOnlyBuffer()))
            .isInstanceOf(IllegalArgumentException.class);
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldReportLeaseExpiredWhenTheReadOutlivesItsLease()
    {
        client.put("k1", bytes(100, 7));
        engine.beforeCompletion(r ->
        {
            if (r.op() == TransferRequest.Op.READ)
            {
                clock.advanceMillis(ScriptedMaster.LEASE_TTL_MS + 1);
            }
        });

        final GranaryException ex = thrown(() -> client.get("k1"));

        assertThat(ex.code()).isEqualTo(ErrorCode.LEASE_EXPIRED);
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(1); // another replica would not help
    }

    @Test
    void shouldRefuseAReplicaListWhoseExtentsDisagreeWithTheValueLength()
    {
        master.script("GetReplicaList", (KeyRequest r) -> GetReplicaListResponse.newBuilder()
            .setValueLength(10)
            .addReplicas(Replica.newBuilder().setNodeId("node-a").setEndpoint(NODE_A).setLength(9))
            .build());

        assertThat(thrown(() -> client.get("k1")).code()).isEqualTo(ErrorCode.INTERNAL_ERROR);
        assertThat(engine.requests()).isEmpty();
    }

    // ------------------------------------------------------------------------------------------- batches

    private static List<String> keys(final int n)
    {
        final List<String> keys = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            keys.add("key-" + i);
        }
        return keys;
    }

    /** Values whose first byte is their index, so the engine can pick keys to fail. */
    private static List<ByteBuffer> values(final int n)
    {
        final List<ByteBuffer> values = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
        {
            final byte[] b = bytes(64 + i, i);
            b[0] = (byte)i;
            values.add(ByteBuffer.wrap(b));
        }
        return values;
    }

    @Test
    void shouldPutABatchWithOneStartAndOneEnd()
    {
        final List<String> keys = keys(100);
        final List<ByteBuffer> values = values(100);

        final List<OpResult<Void>> results = client.putBatch(keys, values, TWO_REPLICAS);

        assertThat(results).hasSize(100).allSatisfy(r -> assertThat(r.ok()).isTrue());
        assertThat(master.requests(BatchPutStartRequest.class)).hasSize(1);
        final BatchPutStartRequest start = master.requests(BatchPutStartRequest.class).get(0);
        assertThat(start.getKeysList()).isEqualTo(keys);
        assertThat(start.getValueLengths(99)).isEqualTo(64 + 99);
        assertThat(start.getOptions().getReplicas()).isEqualTo(2);
        assertThat(master.requests(BatchKeysRequest.class)).hasSize(1); // the one BatchPutEnd
        assertThat(master.requests(BatchKeysRequest.class).get(0).getKeysList()).isEqualTo(keys);
        assertThat(master.count(PutStartRequest.class) + master.count(PutEndRequest.class)).isZero();
        assertThat(engine.requests(TransferRequest.Op.WRITE)).hasSize(200);
        assertThat(values).allSatisfy(v -> assertThat(v.position()).isZero());
        assertThat(keys).allSatisfy(k -> assertThat(master.isComplete(k)).isTrue());
    }

    @Test
    void shouldEndTheWrittenKeysAndRevokeTheFailedOnesInOneCallEach()
    {
        final List<String> keys = keys(100);
        // every key whose index ends in 3 fails on node-b
        engine.failWhen(r -> r.op() == TransferRequest.Op.WRITE && r.endpoint().equals(NODE_B) &&
            r.local().get(r.local().position()) % 10 == 3, ErrorCode.TRANSFER_FAIL);

        final List<OpResult<Void>> results = client.putBatch(keys, values(100), TWO_REPLICAS);

        final List<String> failed = new ArrayList<>();
        final List<String> written = new ArrayList<>();
        for (int i = 0; i < 100; i++)
        {
            (i % 10 == 3 ? failed : written).add(keys.get(i));
            if (i % 10 == 3)
            {
                assertThat(results.get(i).error()).isEqualTo(ErrorCode.TRANSFER_FAIL);
                assertThat(results.get(i).message()).contains(keys.get(i)).contains("node-b");
            }
            else
            {
                assertThat(results.get(i).ok()).isTrue();
            }
        }
        assertThat(master.count(BatchPutStartRequest.class)).isEqualTo(1);
        final List<BatchKeysRequest> phase3 = master.requests(BatchKeysRequest.class);
        assertThat(phase3).hasSize(2);
        assertThat(phase3).extracting(r -> List.copyOf(r.getKeysList())).containsExactlyInAnyOrder(written, failed);
        assertThat(failed).allSatisfy(k -> assertThat(master.isComplete(k)).isFalse());
        assertThat(written).allSatisfy(k -> assertThat(master.isComplete(k)).isTrue());
    }

    @Test
    void shouldCarryPerKeyCodesOfABatchPut()
    {
        master.script("BatchPutStart", (BatchPutStartRequest r) ->
        {
            final BatchPutStartResponse.Builder b = BatchPutStartResponse.newBuilder();
            for (int i = 0; i < r.getKeysCount(); i++)
            {
                final PutStartResponse.Builder one = PutStartResponse.newBuilder();
                if (i == 0)
                {
                    one.setCode(ErrorCode.NO_AVAILABLE_HANDLE.code());
                }
                else if (i == 1)
                {
                    one.setCode(ErrorCode.OBJECT_ALREADY_EXISTS.code());
                }
                else
                {
                    one.addReplicas(Replica.newBuilder().setNodeId("node-a").setEndpoint(NODE_A).setOffset(i * 1000L)
                        .setLength(r.getValueLengths(i)));
                }
                b.addResults(one);
            }
            return b.build();
        });
        master.script("BatchPutEnd", (BatchKeysRequest r) -> BatchCodeResponse.newBuilder()
            .addCodes(ErrorCode.ILLEGAL_CLIENT.code()).addCodes(0).build());

        final List<String> keys = List.of("a", "b", "c", "", "d");
        final List<OpResult<Void>> results = client.putBatch(keys, values(5), PutOptions.defaults());

        assertThat(results).extracting(OpResult::error).containsExactly(
            ErrorCode.NO_AVAILABLE_HANDLE, ErrorCode.OK, ErrorCode.ILLEGAL_CLIENT, ErrorCode.INVALID_KEY, ErrorCode.OK);
        assertThat(master.requests(BatchPutStartRequest.class).get(0).getKeysList())
            .containsExactly("a", "b", "c", "d");
        assertThat(master.requests(BatchKeysRequest.class).get(0).getKeysList()).containsExactly("c", "d");
        assertThat(engine.requests(TransferRequest.Op.WRITE)).hasSize(2);
    }

    @Test
    void shouldFailTheBatchWhenTheMasterRefusesTheWholeRequest()
    {
        master.script("BatchPutStart", (BatchPutStartRequest r) ->
            BatchPutStartResponse.newBuilder().setCode(ErrorCode.INVALID_PARAMS.code()).build());

        assertThat(thrown(() -> client.putBatch(keys(3), values(3), PutOptions.defaults())).code())
            .isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(engine.requests()).isEmpty();
    }

    @Test
    void shouldGetABatchWithOneReplicaListCallAndFailOverPerKey()
    {
        final List<String> keys = keys(100);
        final List<ByteBuffer> values = values(100);
        client.putBatch(keys, values, TWO_REPLICAS);
        engine.failWhen(r -> r.op() == TransferRequest.Op.READ && r.endpoint().equals(NODE_A) &&
            r.remoteOffset() % 128 == 0, ErrorCode.TRANSFER_FAIL);
        final List<String> asked = new ArrayList<>(keys);
        asked.add(50, "missing");
        asked.add(0, "");

        final List<OpResult<byte[]>> results = client.getBatch(asked);

        assertThat(master.requests(BatchKeysRequest.class)).hasSize(2); // BatchPutEnd + BatchGetReplicaList
        assertThat(master.requests(BatchKeysRequest.class).get(1).getKeysList()).hasSize(101).doesNotContain("");
        assertThat(master.count(KeyRequest.class)).isZero();
        assertThat(results).hasSize(102);
        assertThat(results.get(0).error()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(results.get(51).error()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        for (int i = 0; i < 100; i++)
        {
            final int at = i < 50 ? i + 1 : i + 2;
            assertThat(results.get(at).value()).isEqualTo(values.get(i).array());
        }
        final long failovers = engine.requests(TransferRequest.Op.READ).stream()
            .filter(r -> r.endpoint().equals(NODE_B)).count();
        assertThat(failovers).isPositive();
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(100 + (int)failovers);
    }

    @Test
    void shouldGetABatchIntoTheCallersBuffersAdvancingEachPositionOnlyOnSuccess()
    {
        final List<String> keys = keys(6);
        final List<ByteBuffer> values = values(6);
        client.putBatch(keys, values, PutOptions.defaults());
        final List<String> asked = new ArrayList<>(keys);
        asked.add(2, "missing");
        final List<ByteBuffer> dsts = new ArrayList<>();
        for (int i = 0; i < asked.size(); i++)
        {
            final ByteBuffer dst = i % 2 == 0 ? ByteBuffer.allocateDirect(4096) : ByteBuffer.allocate(4096);
            dst.position(3 + i);
            dsts.add(dst);
        }
        final int tooLongFor = 5; // keys.get(4) lands in dsts.get(5): leave it no room
        dsts.get(tooLongFor).limit(dsts.get(tooLongFor).position() + values.get(4).remaining() - 1);

        final List<OpResult<Integer>> results = client.getBatchInto(asked, dsts);

        assertThat(master.requests(BatchKeysRequest.class)).hasSize(2); // BatchPutEnd + BatchGetReplicaList
        assertThat(results).hasSize(7);
        assertThat(results.get(2).error()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(dsts.get(2).position()).isEqualTo(5);
        assertThat(results.get(tooLongFor).error()).isEqualTo(ErrorCode.BUFFER_OVERFLOW);
        assertThat(dsts.get(tooLongFor).position()).isEqualTo(3 + tooLongFor);
        for (int i = 0; i < asked.size(); i++)
        {
            if (i == 2 || i == tooLongFor)
            {
                continue;
            }
            final byte[] expected = values.get(i < 2 ? i : i - 1).array();
            assertThat(results.get(i).value()).as("key %d", i).isEqualTo(expected.length);
            assertThat(dsts.get(i).position()).isEqualTo(3 + i + expected.length);
            final byte[] landed = new byte[expected.length];
            dsts.get(i).duplicate().position(3 + i).get(landed);
            assertThat(landed).as("key %d", i).isEqualTo(expected);
        }
        assertThat(engine.requests(TransferRequest.Op.READ)).hasSize(5);
    }

    @Test
    void shouldRefuseGetBatchIntoWithMismatchedOrReadOnlyBuffersBeforeAnyRpc()
    {
        assertThatThrownBy(() -> client.getBatchInto(keys(2), List.of(ByteBuffer.allocate(8))))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("one buffer per key");
        assertThatThrownBy(() -> client.getBatchInto(keys(1), List.of(ByteBuffer.allocate(8).asReadOnlyBuffer())))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("writable");
        assertThat(master.count(BatchKeysRequest.class)).isZero();
    }

    @Test
    void shouldSpreadABatchOverReplicasByTransfersInFlight()
    {
        final List<String> keys = keys(4);
        final List<ByteBuffer> values = values(4);
        client.putBatch(keys, values, TWO_REPLICAS);
        engine.holdInFlightUntil(4);

        final List<OpResult<byte[]>> results = client.getBatch(keys);

        assertThat(results).extracting(OpResult::value).containsExactly(
            values.get(0).array(), values.get(1).array(), values.get(2).array(), values.get(3).array());
        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(TransferRequest::endpoint)
            .containsExactly(NODE_A, NODE_B, NODE_A, NODE_B);
    }

    @Test
    void shouldAnswerEmptyBatchesWithoutAnRpc()
    {
        assertThat(client.putBatch(List.of(), List.of(), PutOptions.defaults())).isEmpty();
        assertThat(client.getBatch(List.of())).isEmpty();
        assertThat(client.existsBatch(List.of())).isEmpty();
        assertThat(client.probeBatch(List.of(), LeasePolicy.lastHitOnly(2))).isEmpty();
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldRefuseBatchesAboveTheLimitWithoutAnRpc()
    {
        final List<String> tooMany = Collections.nCopies(Limits.MAX_BATCH_KEYS + 1, "k");
        final List<ByteBuffer> buffers = Collections.nCopies(Limits.MAX_BATCH_KEYS + 1, ByteBuffer.allocate(1));

        assertThat(thrown(() -> client.getBatch(tooMany)).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.existsBatch(tooMany)).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.probeBatch(tooMany, LeasePolicy.none())).code())
            .isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.putBatch(tooMany, buffers, PutOptions.defaults())).code())
            .isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldRefuseKeysAndValuesOfDifferentSizes()
    {
        assertThatThrownBy(() -> client.putBatch(List.of("a", "b"), List.of(ByteBuffer.allocate(1)),
            PutOptions.defaults()))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("2 keys, 1 values");
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldMapExistenceAnswers()
    {
        client.put("here", bytes(4, 1));
        master.script("BatchExistKey", (BatchKeysRequest r) -> BatchExistKeyResponse.newBuilder()
            .addExists(true).addExists(false).addExists(false)
            .addCodes(0).addCodes(ErrorCode.OBJECT_NOT_FOUND.code()).addCodes(ErrorCode.SEGMENT_NOT_FOUND.code())
            .build());

        final List<OpResult<Boolean>> results = client.existsBatch(List.of("here", "gone", "", "odd"));

        assertThat(results.get(0).value()).isTrue();
        assertThat(results.get(1).value()).isFalse();
        assertThat(results.get(2).error()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(results.get(3).error()).isEqualTo(ErrorCode.SEGMENT_NOT_FOUND);
        assertThat(results.get(3).message()).contains("'odd'");
        assertThat(master.requests(BatchKeysRequest.class).get(0).getKeysList()).containsExactly("here", "gone", "odd");
        assertThat(client.exists("here")).isTrue();
        assertThat(client.exists("gone")).isFalse();
    }

    @Test
    void shouldTreatObjectNotFoundFromExistKeyAsFalse()
    {
        master.script("ExistKey", (KeyRequest r) ->
            ExistKeyResponse.newBuilder().setCode(ErrorCode.OBJECT_NOT_FOUND.code()).build());

        assertThat(client.exists("k")).isFalse();
    }

    @Test
    void shouldReadTheLeasesOfAMasterThatSendsNoReplicaListsByLookingThemUp()
    {
        // The scripted master, like one older than with_replicas, answers probes with a mask only.
        client.put("a", bytes(300, 7));
        final List<OpResult<ReadLease>> probed = client.probeBatchForRead(List.of("a", "b"), LeasePolicy.longestPrefix(1));
        assertThat(master.requests(BatchProbeKeyRequest.class).get(0).getWithReplicas()).isTrue();
        final ReadLease lease = probed.get(0).value();
        assertThat(lease.key()).isEqualTo("a");
        assertThat(lease.usable()).isFalse();
        assertThat(probed.get(1)).isEqualTo(OpResult.ok(null));

        final ByteBuffer dst = ByteBuffer.allocate(400);
        assertThat(client.readBatchInto(List.of(lease), List.of(dst))).containsExactly(OpResult.ok(300));
        assertThat(Arrays.copyOf(dst.array(), 300)).isEqualTo(bytes(300, 7));
        assertThat(master.requests(BatchKeysRequest.class)).extracting(r -> List.copyOf(r.getKeysList()))
            .contains(List.of("a"));
    }

    @Test
    void shouldRefuseAProbeAnswerWithReplicaListsForSomeKeysOnly()
    {
        master.script("BatchProbeKey", (BatchProbeKeyRequest r) -> BatchProbeKeyResponse.newBuilder()
            .addMask(true).addMask(true).addCodes(0).addCodes(0)
            .addReplicas(GetReplicaListResponse.getDefaultInstance())
            .build());
        assertThat(thrown(() -> client.probeBatchForRead(List.of("a", "b"), LeasePolicy.longestPrefix(1))).code())
            .isEqualTo(ErrorCode.INTERNAL_ERROR);
    }

    @Test
    void shouldMapProbeMaskAndCodes()
    {
        master.script("BatchProbeKey", (BatchProbeKeyRequest r) -> BatchProbeKeyResponse.newBuilder()
            .addMask(true).addMask(true).addMask(false).addMask(false)
            .addCodes(0).addCodes(0)
            .addCodes(ErrorCode.OBJECT_NOT_FOUND.code()).addCodes(ErrorCode.INTERNAL_ERROR.code())
            .build());

        final List<OpResult<Boolean>> results =
            client.probeBatch(List.of("r0-128", "r1-128", "r0-256", "r1-256"), LeasePolicy.longestPrefix(2));

        assertThat(results).extracting(OpResult::error)
            .containsExactly(ErrorCode.OK, ErrorCode.OK, ErrorCode.OK, ErrorCode.INTERNAL_ERROR);
        assertThat(results.subList(0, 3)).extracting(OpResult::value).containsExactly(true, true, false);
        final BatchProbeKeyRequest request = master.requests(BatchProbeKeyRequest.class).get(0);
        assertThat(request.getTenant()).isEqualTo("t1");
        assertThat(request.getMode()).isEqualTo(LeaseMode.LEASE_MODE_LONGEST_PREFIX);
        assertThat(request.getCandidateSize()).isEqualTo(2);
        assertThat(request.getKeysList()).containsExactly("r0-128", "r1-128", "r0-256", "r1-256");
    }

    @Test
    void shouldSendEveryLeaseModeAndLeaveCandidateChecksToTheMaster()
    {
        client.probeBatch(List.of("a", "b"), LeasePolicy.none());
        client.probeBatch(List.of("a", "b"), LeasePolicy.lastHitOnly(0));
        client.probeBatch(List.of("a", "b"), LeasePolicy.longestPrefixLastOnly(2));

        assertThat(master.requests(BatchProbeKeyRequest.class)).extracting(BatchProbeKeyRequest::getMode)
            .containsExactly(LeaseMode.LEASE_MODE_NONE, LeaseMode.LEASE_MODE_LAST_HIT_ONLY,
                LeaseMode.LEASE_MODE_LONGEST_PREFIX_LAST_ONLY);
        assertThat(master.requests(BatchProbeKeyRequest.class)).extracting(BatchProbeKeyRequest::getCandidateSize)
            .containsExactly(0, 0, 2);
    }

    @Test
    void shouldThrowInvalidParamsWhenTheMasterRefusesTheProbePolicy()
    {
        master.script("BatchProbeKey", (BatchProbeKeyRequest r) ->
            BatchProbeKeyResponse.newBuilder().setCode(ErrorCode.INVALID_PARAMS.code()).build());

        final GranaryException ex = thrown(() -> client.probeBatch(List.of("a", "b", "c"), LeasePolicy.lastHitOnly(2)));

        assertThat(ex.code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(ex.getMessage()).contains("LAST_HIT_ONLY");
    }

    @Test
    void shouldRefuseAProbeWithAMalformedKeyWithoutAnRpc()
    {
        final GranaryException ex = thrown(() -> client.probeBatch(List.of("a", ""), LeasePolicy.lastHitOnly(2)));

        assertThat(ex.code()).isEqualTo(ErrorCode.INVALID_KEY);
        assertThat(ex.getMessage()).contains("keys[1]");
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldRefuseAProbeAnswerOfTheWrongShape()
    {
        master.script("BatchProbeKey", (BatchProbeKeyRequest r) -> BatchProbeKeyResponse.newBuilder()
            .addMask(true).build());

        assertThat(thrown(() -> client.probeBatch(List.of("a", "b"), LeasePolicy.none())).code())
            .isEqualTo(ErrorCode.INTERNAL_ERROR);
    }

    // ------------------------------------------------------------------------------------------- removal, inspection

    @Test
    void shouldRemoveAndCount()
    {
        client.put("a1", bytes(1, 1));
        client.put("a2", bytes(1, 1));
        client.put("b1", bytes(1, 1));
        client.put("c1", bytes(1, 1));

        client.remove("c1", true);
        assertThat(thrown(() -> client.remove("c1")).code()).isEqualTo(ErrorCode.OBJECT_NOT_FOUND);
        assertThat(client.removeByRegex("a.*")).isEqualTo(2);
        assertThat(client.removeAll()).isEqualTo(1);

        assertThat(master.requests(RemoveRequest.class)).extracting(RemoveRequest::getForce)
            .containsExactly(true, false);
        assertThat(master.requests(RemoveByRegexRequest.class).get(0).getTenant()).isEqualTo("t1");
        assertThat(master.requests(RemoveAllRequest.class).get(0).getForce()).isFalse();
    }

    @Test
    void shouldRefuseAnEmptyOrBrokenRegexWithoutAnRpc()
    {
        assertThat(thrown(() -> client.removeByRegex("")).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.removeByRegex("(")).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.listKeys("[", 10)).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(thrown(() -> client.listKeys(null, -1)).code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldPassOnRemoveCodes()
    {
        master.script("Remove", (RemoveRequest r) ->
            CodeResponse.newBuilder().setCode(ErrorCode.OBJECT_HAS_LEASE.code()).build());
        master.script("RemoveAll", (RemoveAllRequest r) ->
            CountResponse.newBuilder().setCode(ErrorCode.TENANT_QUOTA_EXCEEDED.code()).build());

        assertThat(thrown(() -> client.remove("k")).code()).isEqualTo(ErrorCode.OBJECT_HAS_LEASE);
        assertThat(thrown(() -> client.removeAll()).code()).isEqualTo(ErrorCode.TENANT_QUOTA_EXCEEDED);
    }

    @Test
    void shouldListKeysAsValueObjects()
    {
        master.script("ListKeys", (ListKeysRequest r) -> ListKeysResponse.newBuilder()
            .addKeys(io.granary.proto.KeyInfo.newBuilder().setKey("k1").setValueLength(77).setReplicas(2)
                .setStatus(io.granary.proto.ReplicaStatus.REPLICA_STATUS_COMPLETE).setLeaseRemainingMs(900)
                .setHardPinned(true).setGroupId("g"))
            .addKeys(io.granary.proto.KeyInfo.newBuilder().setKey("k2")
                .setStatus(io.granary.proto.ReplicaStatus.REPLICA_STATUS_PROCESSING))
            .build());

        final List<KeyInfo> keys = client.listKeys("k.*", 10);

        assertThat(keys).containsExactly(
            new KeyInfo("k1", 77, KeyInfo.Status.COMPLETE, 2, 900, true, false, "g"),
            new KeyInfo("k2", 0, KeyInfo.Status.PROCESSING, 0, 0, false, false, null));
        final ListKeysRequest request = master.requests(ListKeysRequest.class).get(0);
        assertThat(request.getRegex()).isEqualTo("k.*");
        assertThat(request.getLimit()).isEqualTo(10);
        assertThat(request.getTenant()).isEqualTo("t1");
        client.listKeys(null, 0);
        assertThat(master.requests(ListKeysRequest.class).get(1).getRegex()).isEmpty();
    }

    @Test
    void shouldReportClusterStatusAsValueObjects()
    {
        master.script("GetClusterStatus", r -> ClusterStatusResponse.newBuilder()
            .addNodes(NodeStatus.newBuilder().setNodeId("n1").setNodeName("box1").setEndpoint(NODE_A)
                .setLastHeartbeatAgoMs(120).setSegments(1))
            .addSegments(SegmentStatus.newBuilder().setNodeId("n1").setNodeName("box1").setEndpoint(NODE_A)
                .setSegmentId(3).setName("n1/seg0").setSizeBytes(1 << 30).setAllocatedBytes(4096).setAllocations(2)
                .setLargestFreeBytes((1 << 30) - 4096))
            .setObjects(2).setCapacityBytes(1 << 30).setAllocatedBytes(4096).setLeaseTtlMs(10_000).setVersion("0.1")
            .build());

        final ClusterStatus status = client.clusterStatus();

        assertThat(status.nodes()).containsExactly(new ClusterStatus.Node("n1", "box1", NODE_A, 120, 1));
        assertThat(status.segments()).containsExactly(new ClusterStatus.Segment(
            "n1", "box1", NODE_A, 3, "n1/seg0", 1 << 30, 4096, 2, (1 << 30) - 4096));
        assertThat(status.objects()).isEqualTo(2);
        assertThat(status.capacityBytes()).isEqualTo(1 << 30);
        assertThat(status.leaseTtlMs()).isEqualTo(10_000);
        assertThat(status.version()).isEqualTo("0.1");
    }

    // ------------------------------------------------------------------------------------------- failures, lifecycle

    @Test
    void shouldFailAReadWithRpcTimeoutWhenEveryReplicaTimedOut()
    {
        client.put("k1", ByteBuffer.wrap(bytes(100, 1)), TWO_REPLICAS);
        engine.fail(NODE_A, ErrorCode.RPC_TIMEOUT);
        engine.fail(NODE_B, ErrorCode.RPC_TIMEOUT);

        final GranaryException ex = thrown(() -> client.get("k1"));

        assertThat(ex.code()).as("stalled nodes: a timeout code").isEqualTo(ErrorCode.RPC_TIMEOUT);
        assertThat(ex.getMessage()).contains("node-a").contains("node-b");
    }

    @Test
    void shouldFailWithRpcFailWhenTheMasterIsDown() throws IOException
    {
        final int port;
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1")))
        {
            port = socket.getLocalPort();
        }
        try (GranaryClient down = connect(config().masterAddress("127.0.0.1:" + port).build()))
        {
            final GranaryException ex = thrown(() -> down.get("k1"));

            assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL);
            assertThat(ex.getCause()).isInstanceOf(StatusRuntimeException.class);
            assertThat(ex.getMessage()).contains("GetReplicaList").contains("127.0.0.1:" + port);
        }
    }

    @Test
    void shouldFailWithRpcTimeoutWhenTheMasterNeverAnswers()
    {
        master.hang("GetReplicaList");
        try (GranaryClient impatient = connect(config().rpcTimeout(Duration.ofMillis(200)).build()))
        {
            final GranaryException ex = thrown(() -> impatient.get("k1"));

            assertThat(ex.code()).isEqualTo(ErrorCode.RPC_TIMEOUT);
            assertThat(ex.getCause()).isInstanceOf(StatusRuntimeException.class);
            assertThat(ex.getMessage()).contains("GetReplicaList");
        }
    }

    @Test
    void shouldServeManyThreadsThroughOneClient() throws Exception
    {
        final ExecutorService pool = Executors.newFixedThreadPool(4);
        try
        {
            final List<Future<?>> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++)
            {
                final int thread = t;
                threads.add(pool.submit(() ->
                {
                    for (int i = 0; i < 10; i++)
                    {
                        final String key = "t" + thread + "-" + i;
                        final byte[] value = bytes(100 + i, thread * 100 + i);
                        client.put(key, ByteBuffer.wrap(value), TWO_REPLICAS);
                        assertThat(client.get(key)).isEqualTo(value);
                    }
                    return null;
                }));
            }
            for (final Future<?> thread : threads)
            {
                thread.get(60, TimeUnit.SECONDS);
            }
        }
        finally
        {
            pool.shutdownNow();
        }
        assertThat(master.count(PutEndRequest.class)).isEqualTo(40);
        assertThat(master.count(PutRevokeRequest.class)).isZero();
    }

    @Test
    void shouldRefuseCallsAfterCloseAndCloseOnce()
    {
        client.close();
        client.close();

        assertThat(engine.isClosed()).isTrue();
        assertThat(thrown(() -> client.get("k1")).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(thrown(() -> client.put("k1", bytes(1, 1))).code())
            .isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(thrown(() -> client.getBatch(List.of("k1"))).code())
            .isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(thrown(() -> client.clusterStatus()).code()).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
        assertThat(master.requests()).isEmpty();
    }

    @Test
    void shouldRefuseATransportThatIsNotAvailable()
    {
        final ClientConfig rdma = config().transport(TransportKind.RDMA).build();

        final GranaryException ex = thrown(() -> GranaryClient.connect(rdma));

        assertThat(ex.code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(ex.getMessage()).contains("rdma");
    }

    @Test
    void shouldRefuseABatchReplicaListOfTheWrongSize()
    {
        master.script("BatchGetReplicaList", (BatchKeysRequest r) -> BatchGetReplicaListResponse.newBuilder()
            .addResults(GetReplicaListResponse.newBuilder().setCode(ErrorCode.OBJECT_NOT_FOUND.code())).build());

        assertThat(thrown(() -> client.getBatch(List.of("a", "b"))).code()).isEqualTo(ErrorCode.INTERNAL_ERROR);
    }
}
