package io.granary.it;

import io.granary.proto.MasterServiceGrpc;
import io.granary.proto.PutOptions;
import io.granary.proto.PutStartRequest;
import io.granary.proto.PutStartResponse;
import io.granary.proto.Replica;
import io.granary.protocol.CommitRecord;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferRequest;
import io.granary.transfer.tcp.NettyTransferEngine;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A client process that starts a put and never finishes it: PutStart, the replica writes and their COMMITs,
 * then it prints {@code abandoned key=K replicas=N version=V} and waits to be killed, never sending PutEnd.
 * Arguments: master address, key, value size in bytes.
 */
public final class AbandoningClient
{
    private AbandoningClient()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final String master = args[0];
        final String key = args[1];
        final int size = Integer.parseInt(args[2]);
        final ManagedChannel channel = ManagedChannelBuilder.forTarget(master).usePlaintext().build();
        final PutStartResponse started = MasterServiceGrpc.newBlockingStub(channel)
            .withDeadlineAfter(10, TimeUnit.SECONDS)
            .putStart(PutStartRequest.newBuilder().setTenant("default").setClientId("abandoning-client").setKey(key)
                .setValueLength(size).setOptions(PutOptions.newBuilder().setReplicas(1)).build());
        if (started.getCode() != 0)
        {
            System.out.println("refused code=" + started.getCode());
            System.exit(1);
        }
        final byte[] commit = new CommitRecord(0, "default", key, "", size, started.getVersion(), 0, 0).encode();
        try (NettyTransferEngine engine = new NettyTransferEngine(new TransferConfig()))
        {
            for (final Replica r : started.getReplicasList())
            {
                final byte[] token = r.getAccessToken().isEmpty() ? null : r.getAccessToken().toByteArray();
                final int code = engine.submit(new TransferRequest(TransferRequest.Op.WRITE, r.getEndpoint(),
                    r.getSegmentId(), r.getOffset(), ByteBuffer.allocate(size), size, token, r.getOffset(),
                    Math.max(1, r.getLength()), commit))
                    .get(30, TimeUnit.SECONDS);
                if (code != 0)
                {
                    System.out.println("write failed code=" + code);
                    System.exit(1);
                }
            }
            System.out.println("abandoned key=" + key + " replicas=" + started.getReplicasCount() + " version=" +
                started.getVersion());
            System.out.flush();
            while (true)
            {
                LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(60)); // until kill -9
            }
        }
    }
}
