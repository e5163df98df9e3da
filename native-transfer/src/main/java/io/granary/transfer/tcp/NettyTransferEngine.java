package io.granary.transfer.tcp;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;

import java.util.concurrent.CompletableFuture;

/** Java TCP transfer engine over Netty (being written on the node branch). */
public final class NettyTransferEngine implements TransferEngine
{
    public NettyTransferEngine(final TransferConfig config)
    {
        throw new UnsupportedOperationException("NettyTransferEngine is not written yet");
    }

    @Override
    public TransportKind kind()
    {
        return TransportKind.JAVA;
    }

    @Override
    public CompletableFuture<Integer> submit(final TransferRequest request)
    {
        throw new UnsupportedOperationException();
    }

    @Override
    public void close()
    {
    }
}
