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
     * Creates an engine. AUTO picks RDMA (the native engine with one-sided READs) where this machine has an RDMA device,
     * else the native TCP engine if its library loaded, else Java TCP; never a native engine with TLS (they speak plain
     * TCP only). An engine AUTO made RDMA says once, at INFO, when READs go over TCP because they carry tokens.
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
                return new NativeTransferEngine(concluded, true, kind == TransportKind.RDMA);
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
                if (!tls && NativeTransfer.isRdmaAvailable())
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

    private static String rdmaRefusal()
    {
        final String cause = NativeTransfer.rdmaUnavailabilityCause();
        return "transport " + TransportKind.RDMA.name().toLowerCase(Locale.ROOT) + " is not available: " +
            (cause != null ? cause : "no RDMA device") + "; use --transport native or java";
    }
}
