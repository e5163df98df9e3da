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

    /**
     * A value's CRC32C computed at most once: handed to the master client as the work to do while PutStart is under
     * way (the caller's core is idle then), or computed when first asked for. Confined to one thread at a time.
     */
    static final class Pending implements Runnable
    {
        private final ByteBuffer value;
        private boolean done;
        private int crc;

        /**
         * @param value the value between position and limit, in a buffer of the client's own that no other thread
         *              reads while this runs: its position moves while the checksum is computed and is put back.
         */
        Pending(final ByteBuffer value)
        {
            this.value = value;
        }

        @Override
        public void run()
        {
            if (!done)
            {
                final CRC32C checksum = new CRC32C();
                final int at = value.position();
                checksum.update(value);
                value.position(at);
                crc = (int)checksum.getValue();
                done = true;
            }
        }

        int get()
        {
            run();
            return crc;
        }
    }
}
