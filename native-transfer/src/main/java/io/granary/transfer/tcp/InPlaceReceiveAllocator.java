package io.granary.transfer.tcp;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelConfig;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.util.UncheckedBooleanSupplier;

/**
 * Receive-buffer allocator of one channel that lets the socket read land where the bytes belong. While
 * the channel's decoder is in the middle of a large payload it offers a buffer over the payload's
 * destination (the caller's buffer on a client, segment memory on a node); the kernel then copies
 * straight from the socket into it and the decoder only counts the bytes. Headers and small payloads
 * go through ordinary pooled buffers. Used on one channel, on its event loop only; never with TLS,
 * where the bytes read are ciphertext.
 */
public final class InPlaceReceiveAllocator implements RecvByteBufAllocator
{
    /** Payload bytes still expected below which an in-place read is not worth its extra syscall. */
    public static final int MIN_IN_PLACE_BYTES = 16 << 10;

    /** The decoder side: where the next read may land, if anywhere. */
    public interface Receiver
    {
        /**
         * A buffer with no readable bytes over (part of) the destination of the payload being received,
         * never longer than the payload bytes still expected, or null when the next bytes must go through
         * an ordinary buffer. The decoder recognises the buffer when it comes back in channelRead and only
         * accounts for the bytes in it.
         */
        ByteBuf inPlaceBuffer();

        /**
         * Most bytes the next ordinary read may take, or 0 for no limit. A decoder that expects a frame
         * header followed by a large payload asks for the header alone, so that the payload is then read in
         * place instead of being swallowed by a big ordinary read and copied.
         */
        int nextReadLimit();
    }

    private final Receiver receiver;
    private final RecvByteBufAllocator fallback;

    public InPlaceReceiveAllocator(final Receiver receiver)
    {
        this.receiver = receiver;
        this.fallback = new AdaptiveRecvByteBufAllocator(64 << 10, 1 << 20, 4 << 20);
    }

    @Override
    public Handle newHandle()
    {
        return new InPlaceHandle(receiver, (ExtendedHandle)fallback.newHandle());
    }

    private static final class InPlaceHandle implements ExtendedHandle
    {
        private final Receiver receiver;
        private final ExtendedHandle delegate;

        InPlaceHandle(final Receiver receiver, final ExtendedHandle delegate)
        {
            this.receiver = receiver;
            this.delegate = delegate;
        }

        @Override
        public ByteBuf allocate(final ByteBufAllocator alloc)
        {
            final ByteBuf target = receiver.inPlaceBuffer();
            if (target != null)
            {
                return target;
            }
            final int limit = receiver.nextReadLimit();
            return limit > 0 ? alloc.ioBuffer(limit, limit) : delegate.allocate(alloc);
        }

        @Override
        public int guess()
        {
            return delegate.guess();
        }

        @Override
        public void reset(final ChannelConfig config)
        {
            delegate.reset(config);
        }

        @Override
        public void incMessagesRead(final int numMessages)
        {
            delegate.incMessagesRead(numMessages);
        }

        @Override
        public void lastBytesRead(final int bytes)
        {
            delegate.lastBytesRead(bytes);
        }

        @Override
        public int lastBytesRead()
        {
            return delegate.lastBytesRead();
        }

        @Override
        public void attemptedBytesRead(final int bytes)
        {
            delegate.attemptedBytesRead(bytes);
        }

        @Override
        public int attemptedBytesRead()
        {
            return delegate.attemptedBytesRead();
        }

        @Override
        public boolean continueReading()
        {
            return delegate.continueReading();
        }

        @Override
        public boolean continueReading(final UncheckedBooleanSupplier maybeMoreDataSupplier)
        {
            return delegate.continueReading(maybeMoreDataSupplier);
        }

        @Override
        public void readComplete()
        {
            delegate.readComplete();
        }
    }
}
