package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TransferDispatcherTest
{
    private static TransferEngine engine(final Function<TransferRequest, CompletableFuture<Integer>> submit)
    {
        return new TransferEngine()
        {
            @Override
            public TransportKind kind()
            {
                return TransportKind.JAVA;
            }

            @Override
            public CompletableFuture<Integer> submit(final TransferRequest request)
            {
                return submit.apply(request);
            }

            @Override
            public void close()
            {
            }
        };
    }

    private static TransferRequest read(final String endpoint)
    {
        return TransferRequest.read(endpoint, 1, 0, ByteBuffer.allocate(8), 8);
    }

    @Test
    void shouldCheckBuffersToRegisterWhateverTheEngineAndRefuseThemOnceClosed()
    {
        final TransferDispatcher dispatcher = new TransferDispatcher(engine(r -> new CompletableFuture<>()));
        // A Java engine has nothing to gain from registrations: false, but bad buffers are refused all the same.
        assertThat(dispatcher.registerMemory(ByteBuffer.allocateDirect(64))).isFalse();
        assertThat(dispatcher.unregisterMemory(ByteBuffer.allocateDirect(64))).isFalse();
        assertThatThrownBy(() -> dispatcher.registerMemory(ByteBuffer.allocate(64)))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("direct");
        assertThatThrownBy(() -> dispatcher.registerMemory(ByteBuffer.allocateDirect(0)))
            .isInstanceOf(IllegalArgumentException.class);
        dispatcher.close();
        assertThatThrownBy(() -> dispatcher.registerMemory(ByteBuffer.allocateDirect(64)))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void shouldCountTransfersInFlightPerEndpoint()
    {
        final List<CompletableFuture<Integer>> pending = new ArrayList<>();
        final TransferDispatcher dispatcher = new TransferDispatcher(engine(r ->
        {
            final CompletableFuture<Integer> f = new CompletableFuture<>();
            pending.add(f);
            return f;
        }));

        final CompletableFuture<Integer> first = dispatcher.submit(read("a:1"));
        dispatcher.submit(read("a:1"));
        dispatcher.submit(read("b:1"));

        assertThat(dispatcher.inFlight("a:1")).isEqualTo(2);
        assertThat(dispatcher.inFlight("b:1")).isEqualTo(1);
        assertThat(dispatcher.inFlight("c:1")).isZero();
        pending.get(0).complete(0);
        assertThat(first.join()).isZero();
        assertThat(dispatcher.inFlight("a:1")).isEqualTo(1);
        pending.get(2).complete(ErrorCode.SEGMENT_NOT_FOUND.code());
        assertThat(dispatcher.inFlight("b:1")).isZero();
    }

    @Test
    void shouldTurnAThrowingEngineIntoTransferFail()
    {
        final TransferDispatcher dispatcher = new TransferDispatcher(engine(r ->
        {
            throw new UnsupportedOperationException("not written yet");
        }));

        assertThat(dispatcher.submit(read("a:1")).join()).isEqualTo(ErrorCode.TRANSFER_FAIL.code());
        assertThat(dispatcher.inFlight("a:1")).isZero();
    }

    @Test
    void shouldTurnABrokenCompletionIntoTransferFail()
    {
        final TransferDispatcher exceptional = new TransferDispatcher(
            engine(r -> CompletableFuture.failedFuture(new IllegalStateException("boom"))));
        final TransferDispatcher nullFuture = new TransferDispatcher(engine(r -> null));
        final TransferDispatcher nullCode =
            new TransferDispatcher(engine(r -> CompletableFuture.completedFuture(null)));

        assertThat(exceptional.submit(read("a:1")).join()).isEqualTo(ErrorCode.TRANSFER_FAIL.code());
        assertThat(nullFuture.submit(read("a:1")).join()).isEqualTo(ErrorCode.TRANSFER_FAIL.code());
        assertThat(nullCode.submit(read("a:1")).join()).isEqualTo(ErrorCode.TRANSFER_FAIL.code());
        assertThat(exceptional.inFlight("a:1") + nullFuture.inFlight("a:1") + nullCode.inFlight("a:1")).isZero();
    }

    @Test
    void shouldReportEachOutcomeToItsCallbackWithTheSameRulesAsTheFuture()
    {
        final List<CompletableFuture<Integer>> pending = new ArrayList<>();
        final TransferDispatcher dispatcher = new TransferDispatcher(engine(r ->
        {
            if (r.endpoint().equals("throws:1"))
            {
                throw new IllegalStateException("refused");
            }
            if (r.endpoint().equals("null:1"))
            {
                return null;
            }
            final CompletableFuture<Integer> f = new CompletableFuture<>();
            pending.add(f);
            return f;
        }));
        final int[] codes = {-1, -1, -1, -1, -1};
        final TransferDispatcher.Outcome outcome = (index, code) -> codes[index] = code;

        dispatcher.submit(read("a:1"), outcome, 0);
        dispatcher.submit(read("a:1"), outcome, 1);
        dispatcher.submit(read("throws:1"), outcome, 2);
        dispatcher.submit(read("null:1"), outcome, 3);
        assertThat(codes).containsExactly(-1, -1, ErrorCode.TRANSFER_FAIL.code(), ErrorCode.TRANSFER_FAIL.code(), -1);
        assertThat(dispatcher.inFlight("a:1")).isEqualTo(2);
        assertThat(dispatcher.inFlight("throws:1") + dispatcher.inFlight("null:1")).isZero();

        pending.get(1).complete(ErrorCode.SEGMENT_NOT_FOUND.code());
        pending.get(0).completeExceptionally(new IllegalStateException("engine bug"));
        assertThat(codes[0]).isEqualTo(ErrorCode.TRANSFER_FAIL.code());
        assertThat(codes[1]).isEqualTo(ErrorCode.SEGMENT_NOT_FOUND.code());
        assertThat(dispatcher.inFlight("a:1")).isZero();

        dispatcher.close();
        dispatcher.submit(read("a:1"), outcome, 4);
        assertThat(codes[4]).isEqualTo(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS.code());
    }

    @Test
    void shouldCompleteACountdownOnlyAfterItsArmIsReleasedAndEveryOperationRan()
    {
        final Countdown countdown = new Countdown();
        countdown.add();
        countdown.add();
        countdown.run(); // an operation that finished while the batch was still starting others
        countdown.run(); // and the second one
        assertThat(countdown.done()).isNotDone();
        countdown.run(); // the batch: every operation started
        assertThat(countdown.done()).isCompleted();

        final Countdown empty = new Countdown();
        empty.run();
        assertThat(empty.done()).isCompleted();
    }
}
