package io.granary.transfer.tcp;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransferEngine;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The client engines a protocol test runs against (Ratis style: one contract, every transport): the Netty engine as
 * it is, the caller-driven engine with its transfers driven by a thread of its own (so that a test can play the node
 * on its own thread while the engine's bytes move), and the native engine both ways: its shared engine thread, and a
 * driver's C engine run by a thread of its own.
 */
enum TestEngines
{
    NETTY
    {
        @Override
        TransferEngine create(final TransferConfig config)
        {
            return new NettyTransferEngine(config);
        }
    },
    CALLER_DRIVEN
    {
        @Override
        TransferEngine create(final TransferConfig config)
        {
            return new DrivingThread(new CallerDrivenEngine(config));
        }
    },
    NATIVE
    {
        @Override
        TransferEngine create(final TransferConfig config)
        {
            return new NativeTransferEngine(overTcp(config));
        }
    },
    NATIVE_DRIVEN
    {
        @Override
        TransferEngine create(final TransferConfig config)
        {
            return new DrivingThread(new NativeTransferEngine(overTcp(config)));
        }
    };

    abstract TransferEngine create(TransferConfig config);

    /**
     * The tests play the node on 127.0.0.1 and speak only the frames they test: the native engine's same-host path
     * (which would ask the fake node for LOCAL_CONNECT before any read) stays off.
     */
    private static TransferConfig overTcp(final TransferConfig config)
    {
        return config.copy().localTransfers(false);
    }

    /**
     * An engine with drivers whose submits are handed to one thread that holds a driver and drives it: the way a
     * synchronous client call runs, with the test free to do something else meanwhile.
     */
    static final class DrivingThread implements TransferEngine
    {
        private final TransferEngine engine;
        private final ConcurrentLinkedQueue<Runnable> submits = new ConcurrentLinkedQueue<>();
        private final Thread thread;
        private volatile Driver driver;
        private volatile boolean closed;

        DrivingThread(final TransferEngine engine)
        {
            this.engine = engine;
            this.thread = new Thread(this::run, "driving-thread");
            this.thread.setDaemon(true);
            this.thread.start();
        }

        private void run()
        {
            final Driver d = engine.openDriver();
            driver = d;
            try
            {
                while (!closed)
                {
                    for (Runnable task = submits.poll(); task != null; task = submits.poll())
                    {
                        task.run();
                    }
                    if (d.hasWork())
                    {
                        d.drive(TimeUnit.MILLISECONDS.toNanos(20));
                    }
                    else if (submits.isEmpty())
                    {
                        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
                    }
                }
            }
            finally
            {
                d.close();
            }
        }

        @Override
        public TransportKind kind()
        {
            return engine.kind();
        }

        @Override
        public CompletableFuture<Integer> submit(final TransferRequest request)
        {
            final CompletableFuture<Integer> result = new CompletableFuture<>();
            submits.add(() -> engine.submit(request).whenComplete((code, ex) -> result.complete(code)));
            final Driver d = driver;
            if (d != null)
            {
                d.wakeup();
            }
            LockSupport.unpark(thread);
            return result;
        }

        /**
         * Submits every request from one task of the driving thread, so that all of them are queued before it drives
         * again: they leave together, as the transfers of one batch call do.
         */
        List<CompletableFuture<Integer>> submitAll(final List<TransferRequest> requests)
        {
            final List<CompletableFuture<Integer>> results = new ArrayList<>();
            for (int i = 0; i < requests.size(); i++)
            {
                results.add(new CompletableFuture<>());
            }
            submits.add(() ->
            {
                for (int i = 0; i < requests.size(); i++)
                {
                    final CompletableFuture<Integer> result = results.get(i);
                    engine.submit(requests.get(i)).whenComplete((code, ex) -> result.complete(code));
                }
            });
            final Driver d = driver;
            if (d != null)
            {
                d.wakeup();
            }
            LockSupport.unpark(thread);
            return results;
        }

        @Override
        public void close()
        {
            closed = true;
            final Driver d = driver;
            if (d != null)
            {
                d.wakeup();
            }
            LockSupport.unpark(thread);
            try
            {
                thread.join(10_000);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            engine.close();
        }
    }
}
