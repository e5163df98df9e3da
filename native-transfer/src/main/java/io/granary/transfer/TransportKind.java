package io.granary.transfer;

import java.util.Locale;

/** The transports a {@link TransferEngine} can be built on, chosen by {@code --transport}. */
public enum TransportKind
{
    /** Pick the best available: RDMA if a device exists, else native TCP if the library loads, else Java. */
    AUTO,
    /** Netty TCP in Java; always available. */
    JAVA,
    /** The JNI engine's epoll TCP transport. */
    NATIVE,
    /** The JNI engine's libibverbs RDMA transport. */
    RDMA;

    public static TransportKind parse(final String text)
    {
        try
        {
            return valueOf(text.trim().toUpperCase(Locale.ROOT));
        }
        catch (final IllegalArgumentException | NullPointerException ex)
        {
            throw new IllegalArgumentException("unknown transport '" + text + "'; use auto, java, native or rdma");
        }
    }
}
