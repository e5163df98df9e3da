package io.granary.client;

import io.granary.transfer.TransportKind;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The client's properties-file format: every builder setting by its kebab-case name, unknown keys refused. */
class ClientConfigFileTest
{
    @TempDir
    Path dir;

    @Test
    void shouldOfferEveryBuilderSettingAsAKey()
    {
        assertThat(ClientConfig.fileKeys()).contains(
            "master-address", "tenant", "transport", "rpc-timeout", "lanes-per-peer", "slice-bytes",
            "transfer-timeout", "connect-timeout", "io-threads", "max-queued-transfers-per-peer",
            "max-pending-admissions-per-peer", "admission-timeout", "client-id", "local-host", "fast-lookups")
            .doesNotContain("meter-registry").isSorted();
    }

    @Test
    void shouldLoadEverySettingFromAFile() throws IOException
    {
        final Path file = dir.resolve("client.properties");
        Files.writeString(file, String.join("\n",
            "# an engine's Granary settings",
            "master-address = 10.0.0.5:50051",
            "tenant = llama-3-70b",
            "transport = java",
            "rpc-timeout = 2s",
            "lanes-per-peer = 4",
            "slice-bytes = 512k",
            "transfer-timeout = 30s",
            "connect-timeout = 1500ms",
            "io-threads = 3",
            "max-queued-transfers-per-peer = 8192",
            "max-pending-admissions-per-peer = 0",
            "admission-timeout = 250ms",
            "client-id = engine-7",
            "local-host = 10.0.0.9",
            "fast-lookups = false",
            ""));

        final ClientConfig config = ClientConfig.fromFile(file);

        assertThat(config.masterAddress()).isEqualTo("10.0.0.5:50051");
        assertThat(config.tenant()).isEqualTo("llama-3-70b");
        assertThat(config.transport()).isEqualTo(TransportKind.JAVA);
        assertThat(config.rpcTimeout()).isEqualTo(Duration.ofSeconds(2));
        assertThat(config.lanesPerPeer()).isEqualTo(4);
        assertThat(config.sliceBytes()).isEqualTo(512 * 1024);
        assertThat(config.transferTimeout()).isEqualTo(Duration.ofSeconds(30));
        assertThat(config.connectTimeout()).isEqualTo(Duration.ofMillis(1500));
        assertThat(config.ioThreads()).isEqualTo(3);
        assertThat(config.maxQueuedTransfersPerPeer()).isEqualTo(8192);
        assertThat(config.maxPendingAdmissionsPerPeer()).isZero();
        assertThat(config.admissionTimeout()).isEqualTo(Duration.ofMillis(250));
        assertThat(config.clientId()).isEqualTo("engine-7");
        assertThat(config.localHost()).isEqualTo("10.0.0.9");
        assertThat(config.fastLookups()).isFalse();
        assertThat(config.meterRegistry()).isNull();

        final SimpleMeterRegistry meters = new SimpleMeterRegistry();
        final ClientConfig metered = config.toBuilder().meterRegistry(meters).build();
        assertThat(metered.meterRegistry()).isSameAs(meters);
        assertThat(metered.clientId()).isEqualTo("engine-7");
        assertThat(metered.toString()).contains("metrics=on");
    }

    @Test
    void shouldKeepDefaultsForKeysNotGiven()
    {
        final Properties properties = new Properties();
        properties.setProperty("master-address", "127.0.0.1:50051");

        final ClientConfig config = ClientConfig.fromProperties(properties);

        final ClientConfig defaults = ClientConfig.builder().masterAddress("127.0.0.1:50051").build();
        assertThat(config.rpcTimeout()).isEqualTo(defaults.rpcTimeout());
        assertThat(config.lanesPerPeer()).isEqualTo(defaults.lanesPerPeer());
        assertThat(config.tenant()).isEqualTo("default");
    }

    @Test
    void shouldReadOnlyThePrefixedKeysOfAnEnginesOwnFile()
    {
        final Properties properties = new Properties();
        properties.setProperty("engine.max-batch", "64");
        properties.setProperty("granary.master-address", "127.0.0.1:50051");
        properties.setProperty("granary.tenant", "t1");

        final ClientConfig config = ClientConfig.fromProperties(properties, "granary.");

        assertThat(config.tenant()).isEqualTo("t1");
        assertThat(config.masterAddress()).isEqualTo("127.0.0.1:50051");
    }

    @Test
    void shouldRefuseUnknownKeysAndBadValuesNamingTheKey() throws IOException
    {
        final Properties unknown = new Properties();
        unknown.setProperty("master-address", "127.0.0.1:50051");
        unknown.setProperty("rpc-timout", "2s");
        assertThatThrownBy(() -> ClientConfig.fromProperties(unknown))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("unknown client setting 'rpc-timout'").hasMessageContaining("rpc-timeout");

        final Properties badDuration = new Properties();
        badDuration.setProperty("master-address", "127.0.0.1:50051");
        badDuration.setProperty("rpc-timeout", "soon");
        assertThatThrownBy(() -> ClientConfig.fromProperties(badDuration))
            .hasMessageContaining("bad value for 'rpc-timeout'");

        final Properties badBoolean = new Properties();
        badBoolean.setProperty("master-address", "127.0.0.1:50051");
        badBoolean.setProperty("fast-lookups", "yes");
        assertThatThrownBy(() -> ClientConfig.fromProperties(badBoolean))
            .hasMessageContaining("bad value for 'fast-lookups': expected true or false");

        final Properties badTransport = new Properties();
        badTransport.setProperty("master-address", "127.0.0.1:50051");
        badTransport.setProperty("transport", "carrier-pigeon");
        assertThatThrownBy(() -> ClientConfig.fromProperties(badTransport))
            .hasMessageContaining("bad value for 'transport'").hasMessageContaining("auto");

        final Properties badRange = new Properties();
        badRange.setProperty("master-address", "127.0.0.1:50051");
        badRange.setProperty("lanes-per-peer", "0");
        assertThatThrownBy(() -> ClientConfig.fromProperties(badRange)).isInstanceOf(IllegalArgumentException.class);

        final Path file = dir.resolve("bad.properties");
        Files.writeString(file, "tenant=t\n");
        assertThatThrownBy(() -> ClientConfig.fromFile(file)).hasMessageContaining("masterAddress is required");
    }

    @Test
    void shouldNameKeysInKebabCase()
    {
        assertThat(ClientConfigFile.kebab("maxQueuedTransfersPerPeer")).isEqualTo("max-queued-transfers-per-peer");
        assertThat(ClientConfigFile.kebab("tenant")).isEqualTo("tenant");
    }
}
