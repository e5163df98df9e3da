package io.granary.client.internal;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/** CRC32C (Castagnoli, the JDK's intrinsified {@link CRC32C}) of a value's bytes. Stateless. */
final class Checksums
{
    private Checksums()
    {
    }

    /** The CRC32C of {@code buffer} between its position and limit; the buffer itself is not moved. */
    static int crc32c(final ByteBuffer buffer)
    {
        final CRC32C crc = new CRC32C();
        crc.update(buffer.duplicate());
        return (int)crc.getValue();
    }

    /** The CRC32C of {@code length} bytes of {@code buffer} from its position; the buffer itself is not moved. */
    static int crc32c(final ByteBuffer buffer, final int length)
    {
        final ByteBuffer view = buffer.duplicate();
        view.limit(view.position() + length);
        return crc32c(view);
    }
}
