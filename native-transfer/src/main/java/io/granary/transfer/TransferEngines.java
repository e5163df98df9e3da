package io.granary.transfer;

import io.granary.transfer.tcp.CallerDrivenEngine;
import io.granary.transfer.tcp.NettyTransferEngine;

/** Builds the {@link TransferEngine} for a {@link TransportKind}. */
public final class TransferEngines
{
    private TransferEngines()
    {
    }

    /**
     * Creates an engine. AUTO picks the best available transport (today: Java TCP).
     *
     * @throws IllegalStateException with the reason when the requested transport is unavailable.
     */
    public static TransferEngine create(final TransportKind kind, final TransferConfig config)
    {
        final TransferConfig concluded = config.copy().conclude();
        switch (kind)
        {
            case AUTO:
            case JAVA:
                // Caller-driven transfers for the threads that drive their own (plain TCP only); Netty for the rest.
                return concluded.callerDriven() && !concluded.tls().isEnabled() ?
                    new CallerDrivenEngine(concluded) : new NettyTransferEngine(concluded);
            case NATIVE:
            case RDMA:
            default:
                throw new IllegalStateException(
                    "transport " + kind.name().toLowerCase(java.util.Locale.ROOT) +
                    " is not available: the JNI transfer engine is not part of this build; use --transport java");
        }
    }
}
