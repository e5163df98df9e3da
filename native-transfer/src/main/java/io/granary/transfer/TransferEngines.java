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
     * Creates an engine. AUTO picks the best available transport: RDMA if a device exists, else the native TCP
     * engine if its library loaded (and TLS is off: it speaks plain TCP only), else Java TCP.
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
                throw new IllegalStateException(rdmaRefusal());
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
                if (!tls && NativeTransfer.isRdmaAvailable() && RDMA_ENGINE_READY)
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
                throw new IllegalStateException(rdmaRefusal());
            case JAVA:
            default:
                return TransportKind.JAVA;
        }
    }

    /**
     * The RDMA transport is built: the RDMA_CONNECT exchange over a transfer connection, node-side queue pairs in the
     * native server, one-sided READ/WRITE, and one-sided READs in the native engine (its C-level rdma_reads). Its
     * whole control flow runs in the C tests against fake verbs, but it was never run against a device, and the JNI
     * binding does not turn rdma_reads on: until both change, a device does not make AUTO choose it, and asking for
     * it says so (docs/operations.md, "RDMA").
     */
    static final boolean RDMA_ENGINE_READY = false;

    private static String rdmaRefusal()
    {
        final String cause = NativeTransfer.rdmaUnavailabilityCause();
        return "transport " + TransportKind.RDMA.name().toLowerCase(Locale.ROOT) + " is not available: " +
            (cause != null ? cause : "the RDMA engine is built and tested against fake verbs only, never run on a " +
            "device, and not enabled in this release") + "; use --transport native or java";
    }
}
