package io.granary.client.internal;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.SoftPinAction;
import io.granary.common.ManualClock;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.BatchPutStartRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.proto.SettledReplica;
import io.granary.protocol.CommitRecord;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.assertj.core.api.Assertions.tuple;

/** Puts that fail on a node are revoked and placed again elsewhere; every replica write carries its COMMIT. */
class PutRetryAndCommitTest
{
    private static final String NODE_A = "10.0.0.1:7001";
    private static final String NODE_B = "10.0.0.2:7002";
    private static final String NODE_C = "10.0.0.3:7003";
    private static final PutOptions TWO_REPLICAS = PutOptions.builder().replicas(2).build();

    private final ScriptedMaster master = new ScriptedMaster();
    private final InMemoryTransferEngine engine = new InMemoryTransferEngine();
    private GranaryClient client;

    @BeforeEach
    void setUp() throws IOException
    {
        master.start();
        master.placements(
            new ScriptedMaster.Placement("node-a", NODE_A, 1),
            new ScriptedMaster.Placement("node-b", NODE_B, 2),
            new ScriptedMaster.Placement("node-c", NODE_C, 3));
        client = connect(2);
    }

    @AfterEach
    void tearDown() throws InterruptedException
    {
        client.close();
        master.close();
    }

    private GranaryClient connect(final int putRetries)
    {
        return GranaryClientImpl.connect(ClientConfig.builder()
            .masterAddress(master.address())
            .tenant("t1")
            .clientId("client-1")
            .localHost("10.0.0.9")
            .putRetries(putRetries)
            .build(), (kind, transferConfig) -> engine, new ManualClock());
    }

    private static byte[] bytes(final int length, final int seed)
    {
        final byte[] b = new byte[length];
        for (int i = 0; i < length; i++)
        {
            b[i] = (byte)(seed + i);
        }
        return b;
    }

    @Test
    void shouldRevokeAndPlaceAPutAgainAwayFromTheNodeWhoseWriteFailed()
    {
        engine.fail(NODE_B, ErrorCode.TRANSFER_FAIL);

        client.put("k1", ByteBuffer.wrap(bytes(100, 1)), TWO_REPLICAS);

        final List<PutStartRequest> starts = master.requests(PutStartRequest.class);
        assertThat(starts).hasSize(2);
        assertThat(starts.get(0).getAvoidNodeIdsList()).isEmpty();
        assertThat(starts.get(1).getAvoidNodeIdsList()).containsExactly("node-b");
        final List<PutRevokeRequest> revokes = master.requests(PutRevokeRequest.class);
        assertThat(revokes).extracting(PutRevokeRequest::getKey).containsExactly("k1");
        // The write to node-a was answered OK: the master may free that extent at once; node-b's stays held.
        assertThat(revokes.get(0).getSettledList()).extracting(SettledReplica::getNodeId, SettledReplica::getSegmentId)
            .containsExactly(tuple("node-a", 1));
        assertThat(master.count(PutEndRequest.class)).isEqualTo(1);
        assertThat(master.isComplete("k1")).isTrue();
        assertThat(client.get("k1")).isEqualTo(bytes(100, 1));
    }

    @Test
    void shouldGiveUpAfterItsRetriesWithTheWriteFailure()
    {
        engine.fail(NODE_A, ErrorCode.RPC_TIMEOUT);
        engine.fail(NODE_B, ErrorCode.RPC_TIMEOUT);
        engine.fail(NODE_C, ErrorCode.RPC_TIMEOUT);

        final GranaryException ex = catchThrowableOfType(
            () -> client.put("k1", ByteBuffer.wrap(bytes(10, 1)), TWO_REPLICAS), GranaryException.class);

        assertThat(ex.code()).isEqualTo(ErrorCode.RPC_TIMEOUT);
        assertThat(master.count(PutStartRequest.class)).isEqualTo(3);
        assertThat(master.requests(PutRevokeRequest.class)).hasSize(3)
            .allSatisfy(r -> assertThat(r.getSettledList()).as("timed-out writes may still land").isEmpty());
        assertThat(master.count(PutEndRequest.class)).isZero();
    }

    @Test
    void shouldNotRetryAWriteTheNodeRefusedAsInvalid()
    {
        engine.fail(NODE_A, ErrorCode.INVALID_PARAMS);

        final GranaryException ex = catchThrowableOfType(
            () -> client.put("k1", ByteBuffer.wrap(bytes(10, 1)), TWO_REPLICAS), GranaryException.class);

        assertThat(ex.code()).isEqualTo(ErrorCode.INVALID_PARAMS);
        assertThat(master.count(PutStartRequest.class)).isEqualTo(1);
    }

    @Test
    void shouldRetryOnlyTheFailedKeysOfABatch()
    {
        engine.failWhen(r -> r.op() == TransferRequest.Op.WRITE && r.endpoint().equals(NODE_B) &&
            r.local().get(r.local().position()) % 4 == 1, ErrorCode.TRANSFER_FAIL);
        final List<String> keys = new ArrayList<>();
        final List<ByteBuffer> values = new ArrayList<>();
        for (int i = 0; i < 12; i++)
        {
            keys.add("b" + i);
            values.add(ByteBuffer.wrap(bytes(64, i)));
        }

        final List<OpResult<Void>> results = client.putBatch(keys, values, TWO_REPLICAS);

        assertThat(results).allMatch(r -> r.ok());
        final List<BatchPutStartRequest> rounds = master.requests(BatchPutStartRequest.class);
        assertThat(rounds).hasSize(2);
        assertThat(rounds.get(1).getKeysList()).containsExactly("b1", "b5", "b9");
        assertThat(rounds.get(1).getAvoidNodeIdsList()).containsExactly("node-b");
        final List<BatchKeysRequest> revokes = master.requests(BatchKeysRequest.class).stream()
            .filter(r -> r.getSettledCount() > 0).toList();
        assertThat(revokes).hasSize(1);
        assertThat(revokes.get(0).getKeysList()).containsExactly("b1", "b5", "b9");
        assertThat(revokes.get(0).getSettledList()).allSatisfy(settled -> assertThat(settled.getReplicasList())
            .extracting(SettledReplica::getNodeId).containsExactly("node-a"));
        for (int i = 0; i < 12; i++)
        {
            assertThat(client.get("b" + i)).isEqualTo(bytes(64, i));
        }
    }

    @Test
    void shouldSendEveryReplicaItsCommitRecord()
    {
        final PutOptions options = PutOptions.builder().replicas(2).hardPin(true)
            .softPin(SoftPinAction.ENABLE, Duration.ofMinutes(5)).groupId("blk-7").build();

        final byte[] value = bytes(300, 3);
        client.put("page/0", ByteBuffer.wrap(value), options);

        final List<TransferRequest> writes = engine.requests(TransferRequest.Op.WRITE);
        assertThat(writes).hasSize(2).allSatisfy(w ->
        {
            final byte[] payload = w.commit().join();
            final CommitRecord record = CommitRecord.decode(payload, 0, payload.length);
            assertThat(record).isNotNull();
            assertThat(record.tenant()).isEqualTo("t1");
            assertThat(record.key()).isEqualTo("page/0");
            assertThat(record.valueLength()).isEqualTo(300);
            assertThat(record.version()).isPositive();
            assertThat(record.groupId()).isEqualTo("blk-7");
            assertThat(record.flags())
                .isEqualTo(CommitRecord.FLAG_HARD_PIN | CommitRecord.FLAG_SOFT_PIN | CommitRecord.FLAG_CRC32C);
            assertThat(record.softPinTtlMs()).isEqualTo(300_000);
            assertThat(record.crc32c()).as("the value's CRC32C, for a master that rebuilds from the ledger")
                .isEqualTo(Checksums.crc32c(ByteBuffer.wrap(value)));
        });
    }

    @Test
    void shouldCommitAnEmptyValueWithoutMovingBytes()
    {
        client.put("empty", new byte[0]);

        assertThat(engine.requests(TransferRequest.Op.WRITE)).singleElement().satisfies(w ->
        {
            assertThat(w.length()).isZero();
            assertThat(w.commit()).isNotNull();
        });
        assertThat(client.get("empty")).isEmpty();
    }

    @Test
    void shouldMarkASoftPinWithoutTtlForTheMastersDefault()
    {
        final byte[] record = GranaryClientImpl.commitRecord("t", "k", 5, 9,
            ProtoMapping.toProto(PutOptions.builder().softPin(SoftPinAction.ENABLE, null).build()), true).encode();
        final CommitRecord decoded = CommitRecord.decode(record, 0, record.length);

        assertThat(decoded.flags()).isEqualTo(CommitRecord.FLAG_SOFT_PIN | CommitRecord.FLAG_SOFT_PIN_DEFAULT_TTL);
        assertThat(GranaryClientImpl.commitRecord("t", "k", 5, 0, ProtoMapping.toProto(PutOptions.defaults()), true))
            .as("no version from the master: no commit").isNull();
    }

    @Test
    void shouldPutTheParentKeyInTheCommitRecordUnlessTurnedOff()
    {
        final io.granary.proto.PutOptions options = ProtoMapping.toProto(PutOptions.builder().parent("p-0").build());

        final CommitRecord with = GranaryClientImpl.commitRecord("t", "p-1", 5, 9, options, true);
        assertThat(with.parentKey()).isEqualTo("p-0");
        assertThat(with.flags()).isEqualTo(CommitRecord.FLAG_PARENT);
        final byte[] encoded = with.encode();
        assertThat(CommitRecord.decode(encoded, 0, encoded.length).parentKey()).isEqualTo("p-0");

        final CommitRecord without = GranaryClientImpl.commitRecord("t", "p-1", 5, 9, options, false);
        assertThat(without.parentKey()).isEmpty();
        assertThat(without.flags()).as("laid out as for a node that predates the flag").isZero();
        assertThat(ClientConfig.builder().masterAddress("127.0.0.1:1").build().commitParents()).isTrue();
        assertThat(ClientConfig.builder().masterAddress("127.0.0.1:1").commitParents(false).build().toBuilder()
            .build().commitParents()).isFalse();
    }
}
