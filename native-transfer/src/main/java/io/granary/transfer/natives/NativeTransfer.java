package io.granary.transfer.natives;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * The native transfer library, as Netty's {@code Epoll} presents its transport: whether it loaded here
 * ({@link #isAvailable()}), and if not, why ({@link #unavailabilityCause()}); likewise for the RDMA transport inside
 * it. The library is extracted from the jar ({@value #RESOURCE}) to a temporary file and loaded once, on first use;
 * {@code -Dgranary.native.library=/path/to/libgranary_transfer.so} loads that file instead. Thread safe.
 */
public final class NativeTransfer
{
    static final String RESOURCE = "/META-INF/native/libgranary_transfer_linux_x86_64.so";
    /** Names a library file to load instead of the one in the jar. */
    public static final String LIBRARY_PROPERTY = "granary.native.library";

    private static final Logger LOG = LoggerFactory.getLogger(NativeTransfer.class);
    private static final Throwable UNAVAILABILITY_CAUSE;
    private static final String RDMA_UNAVAILABILITY_CAUSE;

    static
    {
        Throwable cause = null;
        String rdmaCause = "the native transfer library is not loaded";
        try
        {
            load();
            final String rdma = NativeTransferJni.rdmaUnavailabilityCause();
            rdmaCause = rdma;
            LOG.debug("native transfer library loaded: {}", NativeTransferJni.version());
        }
        catch (final Throwable t)
        {
            cause = t;
        }
        UNAVAILABILITY_CAUSE = cause;
        RDMA_UNAVAILABILITY_CAUSE = rdmaCause;
    }

    private NativeTransfer()
    {
    }

    /** True when the library loaded and its native TCP transport can be used. */
    public static boolean isAvailable()
    {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why the library is not available, or null when it is. */
    public static Throwable unavailabilityCause()
    {
        return UNAVAILABILITY_CAUSE;
    }

    /** @throws UnsatisfiedLinkError (with the cause) when the library is not available. */
    public static void ensureAvailability()
    {
        if (UNAVAILABILITY_CAUSE != null)
        {
            throw (Error)new UnsatisfiedLinkError("the native transfer library is not available: " +
                UNAVAILABILITY_CAUSE).initCause(UNAVAILABILITY_CAUSE);
        }
    }

    /** True when the library has the RDMA transport, libibverbs loads and an RDMA device exists. */
    public static boolean isRdmaAvailable()
    {
        return isAvailable() && RDMA_UNAVAILABILITY_CAUSE == null;
    }

    /** Why RDMA cannot be used here (no library, no verbs in this build, no libibverbs, no device), or null. */
    public static String rdmaUnavailabilityCause()
    {
        return isAvailable() ? RDMA_UNAVAILABILITY_CAUSE :
            "the native transfer library is not available: " + UNAVAILABILITY_CAUSE;
    }

    /** The library's version string ("granary-transfer 1 (tcp, rdma)"). */
    public static String version()
    {
        ensureAvailability();
        return NativeTransferJni.version();
    }

    private static void load() throws IOException
    {
        final String override = System.getProperty(LIBRARY_PROPERTY);
        if (override != null && !override.isBlank())
        {
            System.load(Paths.get(override).toAbsolutePath().toString());
            return;
        }
        final String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        final String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64")))
        {
            throw new UnsupportedOperationException("the native transfer library is built for linux-x86_64 only, " +
                "this is " + os + "-" + arch);
        }
        try (InputStream in = NativeTransfer.class.getResourceAsStream(RESOURCE))
        {
            if (in == null)
            {
                throw new IOException(RESOURCE + " is not on the class path (built without gcc?)");
            }
            final Path file = Files.createTempFile("libgranary_transfer", ".so");
            try
            {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                System.load(file.toAbsolutePath().toString());
            }
            finally
            {
                // Loaded libraries stay mapped: the file is not needed once dlopen has it.
                Files.deleteIfExists(file);
            }
        }
    }
}
