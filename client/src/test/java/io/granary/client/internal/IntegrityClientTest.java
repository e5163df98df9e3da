package io.granary.client.internal;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.common.ManualClock;
import io.granary.proto.BatchKeysRequest;
import io.granary.proto.KeyRequest;
import io.granary.proto.PutEndRequest;
import io.granary.proto.PutRevokeRequest;
import io.granary.proto.PutStartRequest;
import io.granary.transfer.TransferRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * The client's end-to-end checksums (computed at put, checked on every kind of get, failover past bad bytes) and its
 * handling of access-token refusals (one fresh replica list or one fresh put), against a scripted master and an
 * in-memory engine whose stored bytes a test can corrupt.
 */
class IntegrityClientTest
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
        return ClientConfig.builder().masterAddress(master.address()).clientId("client-1").localHost("10.0.0.9");
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

    private static int crcOf(final byte[] value)
    {
        final CRC32C crc = new CRC32C();
        crc.update(value);
        return (int)crc.getValue();
    }

    /** Flips one bit of what {@code endpoint} holds for the object at {@code offset}. */
    private void corrupt(final String endpoint, final int segmentId, final long offset)
    {
        final byte[] stored = engine.stored(endpoint, segmentId, offset).clone();
        stored[stored.length / 2] ^= 0x10;
        engine.store(endpoint, segmentId, offset, stored);
    }

    private static GranaryException thrown(final Runnable call)
    {
        return catchThrowableOfType(GranaryException.class, call::run);
    }

    // ------------------------------------------------------------------------------------------- checksums

    @Test
    void shouldRecordTheValuesChecksumWithPutEnd()
    {
        final byte[] value = bytes(5000, 1);
        final ByteBuffer direct = ByteBuffer.allocateDirect(5100);
        direct.position(100);
        direct.put(value).flip().position(100);

        client.put("heap", value);
        client.put("direct", direct, PutOptions.defaults());
        client.put("empty", new byte[0]);

        final List<PutEndRequest> ends = master.requests(PutEndRequest.class);
        assertThat(ends).allSatisfy(end -> assertThat(end.hasCrc32C()).isTrue());
        assertThat(ends.get(0).getCrc32C()).isEqualTo(crcOf(value));
        assertThat(ends.get(1).getCrc32C()).as("over the caller's range of a direct buffer").isEqualTo(crcOf(value));
        assertThat(ends.get(2).getCrc32C()).isZero();
        assertThat(direct.position()).as("the caller's buffer is not moved").isEqualTo(100);
    }

    @Test
    void shouldRecordOneChecksumPerKeyWithBatchPutEnd()
    {
        final List<ByteBuffer> values = List.of(ByteBuffer.wrap(bytes(10, 1)), ByteBuffer.wrap(bytes(20, 2)),
            ByteBuffer.wrap(bytes(30, 3)));

        assertThat(client.putBatch(List.of("a", "b", "c"), values, PutOptions.defaults())).allMatch(r -> r.ok());

        final BatchKeysRequest end = master.requests(BatchKeysRequest.class).get(0);
        assertThat(end.getKeysList()).containsExactly("a", "b", "c");
        assertThat(end.getCrc32CList()).containsExactly(crcOf(bytes(10, 1)), crcOf(bytes(20, 2)),
            crcOf(bytes(30, 3)));
    }

    @Test
    void shouldReadTheNextReplicaWhenTheFirstReturnsBytesThatDoNotMatch()
    {
        final byte[] value = bytes(4096, 7);
        client.put("k", ByteBuffer.wrap(value), TWO_REPLICAS);
        corrupt(NODE_A, 1, 0);

        assertThat(client.get("k")).isEqualTo(value);
        final ByteBuffer into = ByteBuffer.allocateDirect(4096);
        assertThat(client.getInto("k", into)).isEqualTo(4096);
        assertThat(client.getBatch(List.of("k")).get(0).value()).isEqualTo(value);
        final ByteBuffer batchInto = ByteBuffer.allocateDirect(4096);
        assertThat(client.getBatchInto(List.of("k"), List.of(batchInto)).get(0).value()).isEqualTo(4096);
        final byte[] landed = new byte[4096];
        batchInto.flip().get(landed);
        assertThat(landed).isEqualTo(value);

        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(TransferRequest::endpoint)
            .containsExactly(NODE_A, NODE_B, NODE_A, NODE_B, NODE_A, NODE_B, NODE_A, NODE_B);
    }

    @Test
    void shouldFailWithChecksumMismatchOnEveryKindOfGetWhenNoReplicaHasTheRightBytes() throws Exception
    {
        client.put("k", bytes(3000, 9));
        client.put("good", bytes(100, 3));
        corrupt(NODE_A, 1, 0);

        assertThat(thrown(() -> client.get("k")).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        final ByteBuffer into = ByteBuffer.allocate(3000);
        final GranaryException intoFailure = thrown(() -> client.getInto("k", into));
        assertThat(intoFailure.code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        assertThat(intoFailure.getMessage()).contains("'k'").contains("checksum").contains("node-a");
        assertThat(into.position()).as("a failed getInto does not advance the buffer").isZero();

        final List<OpResult<byte[]>> batch = client.getBatch(List.of("k", "good"));
        assertThat(batch.get(0).error()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        assertThat(batch.get(1).value()).isEqualTo(bytes(100, 3));
        final ByteBuffer batchInto = ByteBuffer.allocate(3000);
        final List<OpResult<Integer>> intoBatch = client.getBatchInto(List.of("k"), List.of(batchInto));
        assertThat(intoBatch.get(0).error()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        assertThat(batchInto.position()).isZero();

        final CompletionException async = catchThrowableOfType(CompletionException.class,
            () -> client.async().get("k").orTimeout(10, TimeUnit.SECONDS).join());
        assertThat(((GranaryException)async.getCause()).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
    }

    @Test
    void shouldReportChecksumMismatchOverOtherFailuresWhenOneReplicaWasCorrupt()
    {
        client.put("k", ByteBuffer.wrap(bytes(1000, 4)), TWO_REPLICAS);
        corrupt(NODE_A, 1, 0);
        engine.fail(NODE_B, ErrorCode.TRANSFER_FAIL);

        final GranaryException ex = thrown(() -> client.get("k"));

        assertThat(ex.code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        assertThat(ex.getMessage()).contains("TRANSFER_FAIL");
    }

    @Test
    void shouldNeitherRecordNorCheckChecksumsWhenTurnedOff()
    {
        final byte[] value = bytes(2000, 6);
        try (GranaryClient unchecked = connect(config().checksums(false).build()))
        {
            unchecked.put("off", value); // offset 0
            assertThat(master.requests(PutEndRequest.class).get(0).hasCrc32C()).isFalse();
            assertThat(master.crc("off")).isNull();
            client.put("on", value); // offset 2048
            assertThat(master.crc("on")).isEqualTo(crcOf(value));
            corrupt(NODE_A, 1, 0);
            corrupt(NODE_A, 1, 2048);

            assertThat(unchecked.get("on")).as("not checked: the damaged bytes come through").isNotEqualTo(value);
            assertThat(client.get("off")).as("an object put without a checksum is not checked").hasSize(2000)
                .isNotEqualTo(value);
            assertThat(thrown(() -> client.get("on")).code()).isEqualTo(ErrorCode.CHECKSUM_MISMATCH);
        } // closing it closes the engine both clients share
    }

    // ------------------------------------------------------------------------------------------- tokens

    @Test
    void shouldAskForFreshTokensOnceWhenANodeRefusesTheFirstOnes()
    {
        master.issueTokens();
        final byte[] value = bytes(700, 2);
        client.put("k", value);
        final int firstReadGeneration = 2; // PutStart issued generation 1
        engine.failWhen(r -> r.op() == TransferRequest.Op.READ &&
            ScriptedMaster.tokenGeneration(r) == firstReadGeneration, ErrorCode.TOKEN_EXPIRED);

        assertThat(client.get("k")).isEqualTo(value);

        assertThat(master.count(KeyRequest.class)).as("one fresh replica list").isEqualTo(2);
        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(ScriptedMaster::tokenGeneration)
            .containsExactly(2, 3);
    }

    @Test
    void shouldGiveUpWithTheNodesCodeWhenFreshTokensAreRefusedToo()
    {
        master.issueTokens();
        client.put("k", ByteBuffer.wrap(bytes(700, 2)), TWO_REPLICAS);
        engine.failWhen(r -> r.op() == TransferRequest.Op.READ, ErrorCode.ACCESS_DENIED);

        final GranaryException ex = thrown(() -> client.get("k"));

        assertThat(ex.code()).isEqualTo(ErrorCode.ACCESS_DENIED);
        assertThat(master.count(KeyRequest.class)).as("exactly one refresh").isEqualTo(2);
        // Node A refuses the first token; both replicas are then tried with the fresh ones.
        assertThat(engine.requests(TransferRequest.Op.READ)).extracting(ScriptedMaster::tokenGeneration)
            .containsExactly(2, 3, 3);
    }

    @Test
    void shouldStartAPutOverOnceWhenANodeRefusesItsWriteToken()
    {
        master.issueTokens();
        engine.failWhen(r -> r.op() == TransferRequest.Op.WRITE && ScriptedMaster.tokenGeneration(r) == 1,
            ErrorCode.TOKEN_EXPIRED);
        final byte[] value = bytes(900, 8);

        client.put("k", value);

        assertThat(master.count(PutStartRequest.class)).isEqualTo(2);
        assertThat(master.count(PutRevokeRequest.class)).isEqualTo(1);
        assertThat(master.isComplete("k")).isTrue();
        assertThat(client.get("k")).isEqualTo(value);
    }

    @Test
    void shouldStartRefusedKeysOfABatchOverAsABatchOfTheirOwn()
    {
        master.issueTokens();
        // The first BatchPutStart hands out generations 1..3, key a at offset 0: its write is refused.
        engine.failWhen(r -> r.op() == TransferRequest.Op.WRITE && ScriptedMaster.tokenGeneration(r) <= 3 &&
            r.remoteOffset() == 0, ErrorCode.ACCESS_DENIED);

        final List<OpResult<Void>> results = client.putBatch(List.of("a", "b", "c"),
            List.of(ByteBuffer.wrap(bytes(64, 1)), ByteBuffer.wrap(bytes(64, 2)), ByteBuffer.wrap(bytes(64, 3))),
            PutOptions.defaults());

        assertThat(results).allMatch(r -> r.ok());
        assertThat(master.isComplete("a")).isTrue();
        assertThat(client.getBatch(List.of("a", "b", "c"))).extracting(OpResult::value)
            .containsExactly(bytes(64, 1), bytes(64, 2), bytes(64, 3));
    }
}
