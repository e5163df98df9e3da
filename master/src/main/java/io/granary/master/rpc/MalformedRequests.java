package io.granary.master.rpc;

import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;

import java.io.InputStream;

/**
 * Answers a gRPC request whose bytes are not the method's request message with INVALID_ARGUMENT, quietly. Without
 * it gRPC (on a direct executor) logs a stack trace per such request and answers UNKNOWN. The request marshaller
 * returns null instead of throwing, and the call's listener turns a null message into the refusal. Stateless.
 */
public final class MalformedRequests
{
    private MalformedRequests()
    {
    }

    /** The same service, every method guarded. */
    public static ServerServiceDefinition guard(final ServerServiceDefinition service)
    {
        final ServerServiceDefinition.Builder builder =
            ServerServiceDefinition.builder(service.getServiceDescriptor().getName());
        for (final ServerMethodDefinition<?, ?> method : service.getMethods())
        {
            builder.addMethod(guard(method));
        }
        return builder.build();
    }

    private static <Q, R> ServerMethodDefinition<Q, R> guard(final ServerMethodDefinition<Q, R> method)
    {
        final MethodDescriptor<Q, R> original = method.getMethodDescriptor();
        final MethodDescriptor<Q, R> lenient = original.toBuilder()
            .setRequestMarshaller(new LenientMarshaller<>(original.getRequestMarshaller()))
            .build();
        final ServerCallHandler<Q, R> handler = method.getServerCallHandler();
        final String name = original.getBareMethodName();
        return ServerMethodDefinition.create(lenient, (call, headers) ->
            new RefusingListener<>(handler.startCall(call, headers), call, name));
    }

    /** Parses with the original marshaller; null for bytes it cannot parse. */
    private static final class LenientMarshaller<T> implements MethodDescriptor.PrototypeMarshaller<T>
    {
        private final MethodDescriptor.Marshaller<T> delegate;

        LenientMarshaller(final MethodDescriptor.Marshaller<T> delegate)
        {
            this.delegate = delegate;
        }

        @Override
        public InputStream stream(final T value)
        {
            return delegate.stream(value);
        }

        @Override
        public T parse(final InputStream stream)
        {
            try
            {
                return delegate.parse(stream);
            }
            catch (final StatusRuntimeException ex)
            {
                return null;
            }
        }

        @Override
        @SuppressWarnings("unchecked")
        public T getMessagePrototype()
        {
            return delegate instanceof MethodDescriptor.PrototypeMarshaller ?
                ((MethodDescriptor.PrototypeMarshaller<T>)delegate).getMessagePrototype() : null;
        }

        @Override
        @SuppressWarnings("unchecked")
        public Class<T> getMessageClass()
        {
            return delegate instanceof MethodDescriptor.ReflectableMarshaller ?
                ((MethodDescriptor.ReflectableMarshaller<T>)delegate).getMessageClass() : null;
        }
    }

    /** Closes the call at the first unparseable message and keeps the rest of the call away from the handler. */
    private static final class RefusingListener<Q, R> extends ForwardingServerCallListener.SimpleForwardingServerCallListener<Q>
    {
        private final ServerCall<Q, R> call;
        private final String name;
        private boolean refused;

        RefusingListener(final ServerCall.Listener<Q> delegate, final ServerCall<Q, R> call, final String name)
        {
            super(delegate);
            this.call = call;
            this.name = name;
        }

        @Override
        public void onMessage(final Q message)
        {
            if (refused)
            {
                return;
            }
            if (message == null)
            {
                refused = true;
                call.close(Status.INVALID_ARGUMENT.withDescription(
                    "malformed " + name + " request: the bytes are not its protobuf request message"), new Metadata());
                return;
            }
            super.onMessage(message);
        }

        @Override
        public void onHalfClose()
        {
            if (!refused)
            {
                super.onHalfClose();
            }
        }

        @Override
        public void onReady()
        {
            if (!refused)
            {
                super.onReady();
            }
        }
    }
}
