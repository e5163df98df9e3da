package io.granary.transfer.natives;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferEngines;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code --transport rdma} through the real Java binding, on a JVM that loaded the JNI test library: the native
 * library with the C tests' fake verbs installed (one device; RDMA READs execute as copies between this process's
 * registered memory, with keys, bounds and queue-pair states checked as a device would). Runs only in the surefire
 * execution {@code fake-verbs} of native-transfer/pom.xml, which points {@code granary.native.library} at it. Built
 * without the verbs headers the library has no RDMA transport and the test is skipped; CI installs libibverbs-dev,
 * so there it always runs.
 */
class FakeVerbsRdmaTest
{
    private static final int SEGMENT_ID = 3;
    private static final int SEGMENT_BYTES = 16 << 20;
    private final List<AutoCloseable> resources = new ArrayList<>();
    private ByteBuffer segment;

    @BeforeAll
    static void requireTheFakeDevice()
    {
        // Also selected by -Dtest in the default execution, which loads the packaged library: skipped there.
        assumeTrue(String.valueOf(System.getProperty(NativeTransfer.LIBRARY_PROPERTY))
            .endsWith("libgranary_transfer_fake_verbs.so"), "not the JVM of the fake-verbs execution");
        assertThat(NativeTransfer.unavailabilityCause()).isNull();
        assumeTrue(NativeTransfer.version().contains("rdma"), "built without <infiniband/verbs.h>: no RDMA transport");
        assertThat(NativeTransfer.rdmaUnavailabilityCause()).as("the fake device").isNull();
        assertThat(NativeTransfer.isRdmaAvailable()).isTrue();
    }

    @AfterEach
    void closeAll() throws Exception
    {
        for (int i = resources.size() - 1; i >= 0; i--)
        {
            resources.get(i).close();
        }
        resources.clear();
        // Queue pairs (both sides), completion queues, registrations, protection domains, contexts: all gone.
        assertThat(FakeVerbs.live()).as("verbs objects left after every engine and server closed").isZero();
    }

    private <T extends AutoCloseable> T track(final T resource)
    {
        resources.add(resource);
        return resource;
    }

    /** A native server over one segment of random bytes; WRITEs land (their ledger is the test's business). */
    private NativeTransferServer server(final long seed)
    {
        segment = ByteBuffer.allocateDirect(SEGMENT_BYTES);
        final byte[] content = new byte[SEGMENT_BYTES];
        new Random(seed).nextBytes(content);
        segment.put(content).clear();
        final NativeTransferServer server = track(new NativeTransferServer("127.0.0.1", 0, 4 << 20, false,
            new NativeTransferServer.Handler()
            {
                @Override
                public int onWrite(final int segmentId, final long offset, final int length)
                {
                    return 0;
                }

                @Override
                public int onCommit(final byte[] header, final byte[] payload, final int failedWriteStatus,
                    final int tokenStatus)
                {
                    return failedWriteStatus;
                }

                @Override
                public void onClose(final String peer, final String reason)
                {
                }
            }));
        server.segments(new int[] {SEGMENT_ID}, new long[] {PlatformDependent.directBufferAddress(segment)},
            new long[] {SEGMENT_BYTES});
        return server;
    }

    /** An engine of {@code --transport rdma} (the native engine with one-sided READs), closed after the test. */
    private NativeTransferEngine rdmaEngine()
    {
        return (NativeTransferEngine)track(TransferEngines.create(TransportKind.RDMA, new TransferConfig()));
    }

    private static int await(final CompletableFuture<Integer> future) throws Exception
    {
        return future.get(20, TimeUnit.SECONDS);
    }

    private void assertSegmentBytes(final ByteBuffer read, final long offset, final int length)
    {
        for (int i = 0; i < length; i++)
        {
            if (read.get(i) != segment.get((int)offset + i))
            {
                throw new AssertionError("byte " + i + " of the READ at " + offset + " (" + length + " bytes) differs");
            }
        }
    }

    @Test
    void shouldReadEveryByteOneSidedAndKeepWritesOnTcp() throws Exception
    {
        final NativeTransferServer server = server(11);
        final String endpoint = "127.0.0.1:" + server.port();
        final TransferEngine created = track(TransferEngines.create(TransportKind.RDMA, new TransferConfig()));
        assertThat(created.kind()).isEqualTo(TransportKind.RDMA);
        final NativeTransferEngine engine = (NativeTransferEngine)created;

        // Sizes from one byte to 4 MiB (cut into several work requests by the slice size), at random offsets,
        // several in flight at once.
        final Random random = new Random(5);
        final int[] sizes = {1, 7, 4096, 65_536, 65_537, 1 << 20, (4 << 20) - 3};
        long readBytes = 0;
        int reads = 0;
        for (int round = 0; round < 3; round++)
        {
            final List<CompletableFuture<Integer>> futures = new ArrayList<>();
            final List<ByteBuffer> buffers = new ArrayList<>();
            final long[] offsets = new long[sizes.length];
            for (int i = 0; i < sizes.length; i++)
            {
                offsets[i] = random.nextInt(SEGMENT_BYTES - sizes[i] + 1);
                final ByteBuffer into = ByteBuffer.allocateDirect(sizes[i]);
                buffers.add(into);
                futures.add(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, offsets[i], into, sizes[i])));
            }
            for (int i = 0; i < sizes.length; i++)
            {
                assertThat(await(futures.get(i))).as("READ of %d bytes", sizes[i]).isZero();
                assertSegmentBytes(buffers.get(i), offsets[i], sizes[i]);
                readBytes += sizes[i];
                reads++;
            }
        }
        assertThat(engine.rdmaReads()).as("READs completed one-sided").isEqualTo(reads);
        assertThat(engine.rdmaFailedReads()).isZero();
        // The bytes did not come over the node's TCP connections: it sent only the RDMA_CONNECT answer.
        assertThat(server.stats().bytesOut()).as("bytes the node sent over TCP").isLessThan(1024);
        assertThat(readBytes).isGreaterThan(10L << 20);

        // A WRITE goes over TCP (one-sided WRITEs are not used); the READ after it sees its bytes one-sided.
        final byte[] value = new byte[300_000];
        random.nextBytes(value);
        final ByteBuffer from = ByteBuffer.allocateDirect(value.length).put(value).flip();
        final long outBefore = server.stats().bytesOut();
        final long inBefore = server.stats().bytesIn();
        assertThat(await(engine.submit(TransferRequest.write(endpoint, SEGMENT_ID, 4096, from, value.length))))
            .isZero();
        assertThat(server.stats().bytesIn() - inBefore).isGreaterThanOrEqualTo(value.length);
        final ByteBuffer back = ByteBuffer.allocateDirect(value.length);
        final TransferRequest read =
            TransferRequest.read(endpoint, SEGMENT_ID, 4096, back, value.length).requestReceivedCrc32c();
        assertThat(await(engine.submit(read))).isZero();
        final byte[] got = new byte[value.length];
        back.get(got);
        assertThat(got).isEqualTo(value);
        assertThat(engine.rdmaReads()).isEqualTo(reads + 1);
        // No byte passed through the engine's receive loop, so it has no CRC32C to offer: the caller checksums.
        assertThat(read.hasReceivedCrc32c()).isFalse();
        assertThat(server.stats().bytesOut() - outBefore).as("the WRITE's answer only").isLessThan(1024);
    }

    @Test
    void shouldFallBackToTcpWhereTheNodeRefusesOrTheRangeIsOutside() throws Exception
    {
        final NativeTransferServer server = server(12);
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = rdmaEngine();

        // A segment the node does not have: RDMA_CONNECT is refused, the READ goes over TCP and gets the node's
        // answer.
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID + 1, 0, ByteBuffer.allocateDirect(64),
            64)))).as("READ of an unknown segment").isNegative();
        // A range past the segment's end: never posted (the node's record bounds it), TCP says what is wrong.
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, SEGMENT_BYTES - 10,
            ByteBuffer.allocateDirect(64), 64)))).as("READ past the segment's end").isNegative();
        assertThat(engine.rdmaReads()).isZero();
        assertThat(engine.rdmaFailedReads()).isZero();

        // The path to the real segment still comes up and serves one-sided READs.
        final ByteBuffer into = ByteBuffer.allocateDirect(1 << 20);
        assertThat(await(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, 12_345, into, 1 << 20)))).isZero();
        assertSegmentBytes(into, 12_345, 1 << 20);
        assertThat(engine.rdmaReads()).isEqualTo(1);

        // With data tokens on the node refuses queue pairs (one-sided READs would bypass the tokens), and READs that
        // carry a token never try: a token-less READ then fails over TCP with the node's refusal.
        server.tokenKey(new byte[32]);
        final NativeTransferEngine second = rdmaEngine();
        assertThat(await(second.submit(TransferRequest.read(endpoint, SEGMENT_ID, 0, ByteBuffer.allocateDirect(64),
            64)))).as("token-less READ against a node with tokens").isNegative();
        assertThat(second.rdmaReads()).isZero();
    }

    @Test
    void shouldRegisterARegisteredBufferOnceForAllItsReads() throws Exception
    {
        final NativeTransferServer server = server(13);
        final String endpoint = "127.0.0.1:" + server.port();
        final NativeTransferEngine engine = rdmaEngine();
        final int page = 64 << 10;
        final int pages = 32;
        final ByteBuffer pool = ByteBuffer.allocateDirect(page * pages);
        final Random random = new Random(8);

        // Unregistered: every one-sided READ registers its memory and drops the registration when it completes.
        final int before = FakeVerbs.registrations();
        readPagesInto(engine, endpoint, pool, page, pages, random);
        final int unregistered = FakeVerbs.registrations() - before;
        assertThat(unregistered).as("registrations of %d READs into unregistered memory", pages)
            .isGreaterThanOrEqualTo(pages);

        // Registered: one registration serves every READ inside the pool, whichever engine loop carries it.
        assertThat(engine.registerMemory(pool)).isTrue();
        assertThat(engine.registeredBuffers()).isEqualTo(1);
        final int registeredBefore = FakeVerbs.registrations();
        for (int round = 0; round < 3; round++)
        {
            readPagesInto(engine, endpoint, pool, page, pages, random);
        }
        assertThat(FakeVerbs.registrations() - registeredBefore).as("registrations of %d READs into the pool",
            3 * pages).isEqualTo(1);
        assertThat(engine.rdmaReads()).isEqualTo(4L * pages);

        // Forgotten: READs into it register per transfer again; a second unregister says it was not there.
        assertThat(engine.unregisterMemory(pool)).isTrue();
        assertThat(engine.unregisterMemory(pool)).isFalse();
        final int afterUnregister = FakeVerbs.registrations();
        readPagesInto(engine, endpoint, pool, page, 4, random);
        assertThat(FakeVerbs.registrations() - afterUnregister).isGreaterThanOrEqualTo(4);
    }

    /** READs of random segment pages into consecutive pages of {@code pool}, all in flight at once, bytes checked. */
    private void readPagesInto(final NativeTransferEngine engine, final String endpoint, final ByteBuffer pool,
        final int page, final int pages, final Random random) throws Exception
    {
        final List<CompletableFuture<Integer>> futures = new ArrayList<>();
        final long[] offsets = new long[pages];
        for (int i = 0; i < pages; i++)
        {
            offsets[i] = (long)random.nextInt(SEGMENT_BYTES / page) * page;
            final ByteBuffer slot = pool.duplicate().position(i * page).limit((i + 1) * page).slice();
            futures.add(engine.submit(TransferRequest.read(endpoint, SEGMENT_ID, offsets[i], slot, page)));
        }
        for (int i = 0; i < pages; i++)
        {
            assertThat(await(futures.get(i))).isZero();
            assertSegmentBytes(pool.duplicate().position(i * page).slice(), offsets[i], page);
        }
    }

    @Test
    void shouldChooseRdmaForAutoWhereADeviceExistsAndNativeTcpWithTls() throws Exception
    {
        // A device exists here (the fake): AUTO picks RDMA, and its READs go one-sided.
        assertThat(TransferEngines.resolve(TransportKind.AUTO, false)).isEqualTo(TransportKind.RDMA);
        assertThat(TransferEngines.resolve(TransportKind.AUTO, true)).isEqualTo(TransportKind.JAVA);
        final NativeTransferServer server = server(21);
        final String endpoint = "127.0.0.1:" + server.port();
        final TransferEngine auto = track(TransferEngines.create(TransportKind.AUTO, new TransferConfig()));
        assertThat(auto.kind()).isEqualTo(TransportKind.RDMA);
        final ByteBuffer into = ByteBuffer.allocateDirect(70_000);
        assertThat(await(auto.submit(TransferRequest.read(endpoint, SEGMENT_ID, 12_345, into, 70_000)))).isZero();
        assertSegmentBytes(into, 12_345, 70_000);
        assertThat(((NativeTransferEngine)auto).rdmaReads()).isEqualTo(1);
        assertThat(TransferEngines.resolve(TransportKind.RDMA, false)).isEqualTo(TransportKind.RDMA);
        assertThatThrownBy(() -> TransferEngines.resolve(TransportKind.RDMA, true))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("TLS");
    }
}
