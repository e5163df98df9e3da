package io.granary.client.internal;

import io.granary.client.ClientConfig;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.common.ManualClock;
import io.granary.proto.ExistKeyResponse;
import io.granary.proto.KeyRequest;
import io.granary.proto.ServerInfoRequest;
import io.granary.proto.ServerInfoResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/** A client whose master goes away and comes back, or stops answering: clear codes, no hang, reconnection. */
class MasterReconnectTest
{
    private ScriptedMaster master = new ScriptedMaster();
    private final InMemoryTransferEngine engine = new InMemoryTransferEngine();
    private GranaryClient client;

    @AfterEach
    void tearDown() throws InterruptedException
    {
        if (client != null)
        {
            client.close();
        }
        master.close();
    }

    private GranaryClient connect(final String address, final boolean fastLookups, final Duration rpcTimeout)
    {
        return GranaryClientImpl.connect(ClientConfig.builder()
            .masterAddress(address)
            .clientId("client-1")
            .rpcTimeout(rpcTimeout)
            .fastLookups(fastLookups)
            .reconnectBackoff(Duration.ofMillis(20))
            .reconnectBackoffMax(Duration.ofMillis(200))
            .build(), (kind, transferConfig) -> engine, new ManualClock());
    }

    @Test
    void shouldFailWithRpcFailWhileTheMasterIsDownAndUseItAgainOnceItIsBack() throws Exception
    {
        master.start();
        final String address = master.address();
        final int port = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
        client = connect(address, true, Duration.ofSeconds(2));
        client.put("k1", new byte[] {1, 2, 3});

        master.close();
        for (int i = 0; i < 5; i++)
        {
            final GranaryException ex = catchThrowableOfType(() -> client.get("k1"), GranaryException.class);
            assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL);
            assertThat(ex.getMessage()).contains("unreachable");
        }

        master = new ScriptedMaster().start(port);
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true)
        {
            try
            {
                client.put("k2", new byte[] {4});
                break;
            }
            catch (final GranaryException ex)
            {
                assertThat(ex.code()).isEqualTo(ErrorCode.RPC_FAIL);
                assertThat(System.nanoTime()).as("reconnected to the restarted master").isLessThan(deadlineNs);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
            }
        }
        assertThat(client.get("k2")).containsExactly(4);
    }

    @Test
    void shouldTimeOutOnAStalledLookupPortWithoutFallingBackToGrpc() throws IOException, InterruptedException
    {
        try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress()))
        {
            master.start();
            master.script("GetServerInfo", (ServerInfoRequest r) ->
                ServerInfoResponse.newBuilder().setLookupPort(silent.getLocalPort()).build());
            client = connect(master.address(), true, Duration.ofMillis(300));

            final GranaryException ex = catchThrowableOfType(() -> client.exists("k"), GranaryException.class);

            assertThat(ex.code()).isEqualTo(ErrorCode.RPC_TIMEOUT);
            assertThat(ex.getMessage()).contains("lookup port");
            assertThat(master.count(KeyRequest.class)).as("no second wait on gRPC").isZero();
        }
    }

    @Test
    void shouldFallBackToGrpcWhenTheLookupPortIsClosedAndRediscoverIt() throws IOException, InterruptedException
    {
        final int closedPort;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            closedPort = probe.getLocalPort();
        }
        master.start();
        master.script("GetServerInfo", (ServerInfoRequest r) ->
            ServerInfoResponse.newBuilder().setLookupPort(closedPort).build());
        master.script("ExistKey", (KeyRequest r) -> ExistKeyResponse.newBuilder().setExists(true).build());
        client = connect(master.address(), true, Duration.ofSeconds(2));

        assertThat(client.exists("k")).isTrue();
        assertThat(master.count(KeyRequest.class)).isEqualTo(1);
        final int infosBefore = master.count(ServerInfoRequest.class);
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (master.count(ServerInfoRequest.class) == infosBefore)
        {
            assertThat(client.exists("k")).isTrue();
            assertThat(System.nanoTime()).as("the lookup port discovered again").isLessThan(deadlineNs);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
    }
}
