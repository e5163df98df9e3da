package io.granary.transfer;

import io.granary.transfer.natives.NativeTransfer;
import io.granary.transfer.natives.NativeTransferEngine;
import io.granary.transfer.tcp.CallerDrivenEngine;
import io.granary.transfer.tcp.NettyTransferEngine;

import java.util.Locale;

/** Builds the {@link TransferEngine} for a {@link TransportKind}. */
public final class TransferEngines
{
    private TransferEngines()
    {
    }

    /**
     * Creates an engine. AUTO picks the native TCP engine if its library loaded (and TLS is off: it speaks plain TCP
     * only), else Java TCP; RDMA (the native engine with one-sided READs) only when asked for by name, see
     * {@link #AUTO_PICKS_RDMA}.
     *
     * @throws IllegalStateException with the reason when the requested transport is unavailable.
     */
    public static TransferEngine create(final TransportKind kind, final TransferConfig config)
    {
        final TransferConfig concluded = config.copy().conclude();
        switch (resolve(kind, concluded.tls().isEnabled()))
        {
            case NATIVE:
                return new NativeTransferEngine(concluded);
            case RDMA:
                return new NativeTransferEngine(concluded, true);
            case JAVA:
            default:
                // Caller-driven transfers for the threads that drive their own (plain TCP only); Netty for the rest.
                return concluded.callerDriven() && !concluded.tls().isEnabled() ?
                    new CallerDrivenEngine(concluded) : new NettyTransferEngine(concluded);
        }
    }

    /**
     * The transport {@code kind} stands for here: AUTO resolved against what this machine offers, the others as
     * asked once they are usable.
     *
     * @throws IllegalStateException naming why an explicitly requested transport cannot be used.
     */
    public static TransportKind resolve(final TransportKind kind, final boolean tls)
    {
        switch (kind)
        {
            case AUTO:
                if (!tls && NativeTransfer.isRdmaAvailable() && AUTO_PICKS_RDMA)
                {
                    return TransportKind.RDMA;
                }
                return !tls && NativeTransfer.isAvailable() ? TransportKind.NATIVE : TransportKind.JAVA;
            case NATIVE:
                if (!NativeTransfer.isAvailable())
                {
                    throw new IllegalStateException("transport native is not available: " +
                        NativeTransfer.unavailabilityCause() + "; use --transport java");
                }
                if (tls)
                {
                    throw new IllegalStateException("transport native speaks plain TCP only; use --transport java " +
                        "with TLS");
                }
                return TransportKind.NATIVE;
            case RDMA:
                if (!NativeTransfer.isRdmaAvailable())
                {
                    throw new IllegalStateException(rdmaRefusal());
                }
                if (tls)
                {
                    throw new IllegalStateException("transport rdma has no TLS (one-sided verbs bypass it); use " +
                        "--transport java with TLS");
                }
                return TransportKind.RDMA;
            case JAVA:
            default:
                return TransportKind.JAVA;
        }
    }

    /**
     * Whether AUTO picks RDMA where a device exists. The RDMA transport is built end to end (the RDMA_CONNECT exchange
     * over a transfer connection, node-side queue pairs in the native server, one-sided READs in the native engine
     * turned on by {@code --transport rdma}) and its whole flow runs in tests against fake verbs, in C and through
     * this binding, but it was never run on a device: until the hardware check of docs/operations.md ("RDMA") has
     * passed, a device does not make AUTO choose it.
     */
    static final boolean AUTO_PICKS_RDMA = false;

    private static String rdmaRefusal()
    {
        final String cause = NativeTransfer.rdmaUnavailabilityCause();
        return "transport " + TransportKind.RDMA.name().toLowerCase(Locale.ROOT) + " is not available: " +
            (cause != null ? cause : "no RDMA device") + "; use --transport native or java";
    }
}
