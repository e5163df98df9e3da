package io.granary.client;

import io.granary.common.tls.TlsSettings;
import io.granary.protocol.Limits;
import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransportKind;
import io.micrometer.core.instrument.MeterRegistry;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Properties;
import java.util.UUID;

/**
 * Settings of a {@link GranaryClient}: where the master is, which tenant, and how bytes move.
 * Immutable; build one with {@link #builder()} or load one from a properties file ({@link #fromFile}).
 * Transfer defaults come from {@link TransferConfig}.
 */
public final class ClientConfig
{
    public static final Duration DEFAULT_RPC_TIMEOUT = Duration.ofSeconds(5);
    public static final int DEFAULT_PUT_RETRIES = 2;
    public static final int MAX_PUT_RETRIES = 16;
    public static final Duration DEFAULT_RECONNECT_BACKOFF = Duration.ofMillis(100);
    public static final Duration DEFAULT_RECONNECT_BACKOFF_MAX = Duration.ofSeconds(5);

    private final String masterAddress;
    private final String tenant;
    private final TransportKind transport;
    private final Duration rpcTimeout;
    private final int lanesPerPeer;
    private final int sliceBytes;
    private final int maxVectorEntries;
    private final boolean writeCommits;
    private final boolean commitParents;
    private final boolean localTransfers;
    private final int localMinBytes;
    private final Duration transferTimeout;
    private final Duration connectTimeout;
    private final int ioThreads;
    private final int maxQueuedTransfersPerPeer;
    private final int maxPendingAdmissionsPerPeer;
    private final Duration admissionTimeout;
    private final String clientId;
    private final String localHost;
    private final boolean fastLookups;
    private final int putRetries;
    private final Duration reconnectBackoff;
    private final Duration reconnectBackoffMax;
    private final TlsSettings tls;
    private final MeterRegistry meterRegistry;
    private final boolean checksums;
    private final boolean callerDriven;

    private ClientConfig(final Builder b)
    {
        this.masterAddress = b.masterAddress;
        this.tenant = Limits.tenantOrDefault(b.tenant);
        this.transport = b.transport;
        this.rpcTimeout = b.rpcTimeout;
        this.lanesPerPeer = b.lanesPerPeer;
        this.sliceBytes = b.sliceBytes;
        this.maxVectorEntries = b.maxVectorEntries;
        this.writeCommits = b.writeCommits;
        this.commitParents = b.commitParents;
        this.localTransfers = b.localTransfers;
        this.localMinBytes = b.localMinBytes;
        this.transferTimeout = b.transferTimeout;
        this.connectTimeout = b.connectTimeout;
        this.ioThreads = b.ioThreads;
        this.maxQueuedTransfersPerPeer = b.maxQueuedTransfersPerPeer;
        this.maxPendingAdmissionsPerPeer = b.maxPendingAdmissionsPerPeer;
        this.admissionTimeout = b.admissionTimeout;
        this.clientId = b.clientId == null ? UUID.randomUUID().toString() : b.clientId;
        this.localHost = b.localHost;
        this.fastLookups = b.fastLookups;
        this.putRetries = b.putRetries;
        this.reconnectBackoff = b.reconnectBackoff;
        this.reconnectBackoffMax = b.reconnectBackoffMax;
        this.tls = b.tls;
        this.meterRegistry = b.meterRegistry;
        this.checksums = b.checksums;
        this.callerDriven = b.callerDriven;
    }

    public static Builder builder()
    {
        return new Builder();
    }

    /**
     * Settings from a properties file (UTF-8): one key per builder setting in kebab case, e.g.
     * {@code master-address=10.0.0.5:50051}, {@code rpc-timeout=2s}; see {@link #fileKeys()}. Settings not in the
     * file keep their defaults. Add what a file cannot hold (a MeterRegistry) with {@link #toBuilder()}.
     *
     * @throws IllegalArgumentException naming the file and the key for an unknown key or a bad value.
     */
    public static ClientConfig fromFile(final Path file) throws IOException
    {
        return ClientConfigFile.load(file);
    }

    /** {@link #fromFile} over properties already loaded; every key must be a client setting. */
    public static ClientConfig fromProperties(final Properties properties)
    {
        return ClientConfigFile.load(properties, "");
    }

    /**
     * {@link #fromFile} over the keys of {@code properties} that start with {@code prefix} (e.g. "granary."), so that
     * an engine can keep the client's settings in its own file; other keys are ignored.
     */
    public static ClientConfig fromProperties(final Properties properties, final String prefix)
    {
        return ClientConfigFile.load(properties, Objects.requireNonNull(prefix, "prefix"));
    }

    /** The keys a client properties file may hold, sorted. */
    public static List<String> fileKeys()
    {
        return ClientConfigFile.keys();
    }

    /** A builder holding these settings (the client id included). */
    public Builder toBuilder()
    {
        final Builder b = new Builder();
        b.masterAddress = masterAddress;
        b.tenant = tenant;
        b.transport = transport;
        b.rpcTimeout = rpcTimeout;
        b.lanesPerPeer = lanesPerPeer;
        b.sliceBytes = sliceBytes;
        b.maxVectorEntries = maxVectorEntries;
        b.writeCommits = writeCommits;
        b.commitParents = commitParents;
        b.localTransfers = localTransfers;
        b.localMinBytes = localMinBytes;
        b.transferTimeout = transferTimeout;
        b.connectTimeout = connectTimeout;
        b.ioThreads = ioThreads;
        b.maxQueuedTransfersPerPeer = maxQueuedTransfersPerPeer;
        b.maxPendingAdmissionsPerPeer = maxPendingAdmissionsPerPeer;
        b.admissionTimeout = admissionTimeout;
        b.clientId = clientId;
        b.localHost = localHost;
        b.fastLookups = fastLookups;
        b.putRetries = putRetries;
        b.reconnectBackoff = reconnectBackoff;
        b.reconnectBackoffMax = reconnectBackoffMax;
        b.tls = tls;
        b.meterRegistry = meterRegistry;
        b.checksums = checksums;
        b.callerDriven = callerDriven;
        return b;
    }

    /**
     * How many times a put whose replica writes failed (node unreachable, timed out, restarted) is revoked and
     * started again, placed away from the nodes that failed (default 2; 0 = fail at once).
     */
    public int putRetries()
    {
        return putRetries;
    }

    /**
     * First pause before this client tries to reconnect to a master it could not reach (gRPC channel and lookup
     * port); it doubles on each failure up to {@link #reconnectBackoffMax()}, with jitter. Calls made meanwhile
     * fail at once (gRPC) or go over gRPC (lookups); none waits longer than {@link #rpcTimeout()}.
     */
    public Duration reconnectBackoff()
    {
        return reconnectBackoff;
    }

    public Duration reconnectBackoffMax()
    {
        return reconnectBackoffMax;
    }

    /**
     * Where the client records its metrics (per-operation latency, value bytes, misses, failed keys, transfer
     * admission refusals), or null (the default) for none.
     */
    public MeterRegistry meterRegistry()
    {
        return meterRegistry;
    }

    /**
     * Whether exists/probe/replica-list lookups use the master's framed lookup port when it
     * advertises one (default true); otherwise, and as the fallback, they go over gRPC.
     */
    public boolean fastLookups()
    {
        return fastLookups;
    }

    /**
     * Whether puts record a CRC32C of every value with the master and gets check the bytes they receive against it
     * (default true): a replica that returns other bytes is skipped, and a get whose every replica did fails with
     * CHECKSUM_MISMATCH. Off, puts record no checksum and gets check none.
     */
    public boolean checksums()
    {
        return checksums;
    }

    /**
     * Synchronous calls move their own bytes (default on): the calling thread writes the frames to the storage nodes
     * and reads the answers straight into the destination itself, with no hand-off to the transfer engine's event
     * loops and back. The async API, and every call when this is off or TLS is on, goes through the event loops.
     */
    public boolean callerDriven()
    {
        return callerDriven;
    }

    /** host:port of the master's gRPC port. */
    public String masterAddress()
    {
        return masterAddress;
    }

    public String tenant()
    {
        return tenant;
    }

    public TransportKind transport()
    {
        return transport;
    }

    /** Deadline of every call to the master. */
    public Duration rpcTimeout()
    {
        return rpcTimeout;
    }

    public int lanesPerPeer()
    {
        return lanesPerPeer;
    }

    public int sliceBytes()
    {
        return sliceBytes;
    }

    /** Most small reads (up to 64 KiB each) sent together as one READV frame; 1 = every read in a frame of its own. */
    public int maxVectorEntries()
    {
        return maxVectorEntries;
    }

    /** Whether a small value's WRITE and COMMIT travel as one WRITE_COMMIT frame (default true). */
    public boolean writeCommits()
    {
        return writeCommits;
    }

    /** Whether a put's parent key goes into its COMMIT record, for a restarted master's prefix chains (default true). */
    public boolean commitParents()
    {
        return commitParents;
    }

    /**
     * Whether reads, and writes of at least {@link #localMinBytes()}, move by process_vm_readv/writev to nodes on this
     * host (native transport).
     */
    public boolean localTransfers()
    {
        return localTransfers;
    }

    /** Smallest value a put writes locally to a node on this host (see {@link #localTransfers()}); reads: any size. */
    public int localMinBytes()
    {
        return localMinBytes;
    }

    public Duration transferTimeout()
    {
        return transferTimeout;
    }

    public Duration connectTimeout()
    {
        return connectTimeout;
    }

    public int ioThreads()
    {
        return ioThreads;
    }

    public int maxQueuedTransfersPerPeer()
    {
        return maxQueuedTransfersPerPeer;
    }

    /** Transfers per storage node that may wait for room in its queue; see {@link TransferConfig}. */
    public int maxPendingAdmissionsPerPeer()
    {
        return maxPendingAdmissionsPerPeer;
    }

    /** How long a transfer waits for room in a storage node's queue before it fails. */
    public Duration admissionTimeout()
    {
        return admissionTimeout;
    }

    /** Identifies this client's puts to the master (PutEnd/PutRevoke must come from the same client). */
    public String clientId()
    {
        return clientId;
    }

    /**
     * The host name or address that storage-node endpoints must carry to count as "same host", or null
     * (the default) to treat this machine's interface addresses and "localhost" as the same host.
     */
    public String localHost()
    {
        return localHost;
    }

    /**
     * TLS towards the master (gRPC and lookup port) and every storage node (default off): servers'
     * certificates are verified against the trust anchors ({@code --tls-ca}, else the JDK's CAs) and the
     * address they are reached at; the client certificate, when configured, is presented to servers that ask.
     */
    public TlsSettings tls()
    {
        return tls;
    }

    /** The transfer-engine settings these values stand for (a fresh, concluded copy). */
    public TransferConfig transferConfig()
    {
        return new TransferConfig()
            .lanesPerPeer(lanesPerPeer)
            .sliceBytes(sliceBytes)
            .maxVectorEntries(maxVectorEntries)
            .writeCommits(writeCommits)
            .localTransfers(localTransfers)
            .localMinBytes(localMinBytes)
            .transferTimeoutMs(transferTimeout.toMillis())
            .connectTimeoutMs(connectTimeout.toMillis())
            .ioThreads(ioThreads)
            .maxQueuedTransfersPerPeer(maxQueuedTransfersPerPeer)
            .maxPendingAdmissionsPerPeer(maxPendingAdmissionsPerPeer)
            .admissionTimeoutMs(admissionTimeout.toMillis())
            .tls(tls)
            .callerDriven(callerDriven)
            .conclude();
    }

    @Override
    public String toString()
    {
        return "ClientConfig[master=" + masterAddress + ", tenant=" + tenant + ", transport=" + transport +
            ", rpcTimeout=" + rpcTimeout + ", lanesPerPeer=" + lanesPerPeer + ", sliceBytes=" + sliceBytes +
            ", maxVectorEntries=" + maxVectorEntries + ", writeCommits=" + writeCommits +
            ", commitParents=" + commitParents +
            ", localTransfers=" + localTransfers + ", localMinBytes=" + localMinBytes +
            ", transferTimeout=" + transferTimeout +
            ", connectTimeout=" + connectTimeout +
            ", ioThreads=" + ioThreads + ", maxQueuedTransfersPerPeer=" + maxQueuedTransfersPerPeer +
            ", maxPendingAdmissionsPerPeer=" + maxPendingAdmissionsPerPeer + ", admissionTimeout=" + admissionTimeout +
            ", clientId=" + clientId + ", localHost=" + (localHost == null ? "<this machine>" : localHost) +
            ", putRetries=" + putRetries + ", reconnectBackoff=" + reconnectBackoff + ".." + reconnectBackoffMax +
            ", tls=" + tls + ", metrics=" + (meterRegistry == null ? "off" : "on") +
            ", checksums=" + checksums + ", callerDriven=" + callerDriven + "]";
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof ClientConfig))
        {
            return false;
        }
        final ClientConfig c = (ClientConfig)o;
        return masterAddress.equals(c.masterAddress) && tenant.equals(c.tenant) && transport == c.transport &&
            rpcTimeout.equals(c.rpcTimeout) && lanesPerPeer == c.lanesPerPeer && sliceBytes == c.sliceBytes &&
            maxVectorEntries == c.maxVectorEntries && writeCommits == c.writeCommits &&
            commitParents == c.commitParents &&
            localTransfers == c.localTransfers && localMinBytes == c.localMinBytes &&
            transferTimeout.equals(c.transferTimeout) && connectTimeout.equals(c.connectTimeout) &&
            ioThreads == c.ioThreads && maxQueuedTransfersPerPeer == c.maxQueuedTransfersPerPeer &&
            maxPendingAdmissionsPerPeer == c.maxPendingAdmissionsPerPeer &&
            admissionTimeout.equals(c.admissionTimeout) &&
            clientId.equals(c.clientId) && Objects.equals(localHost, c.localHost) && putRetries == c.putRetries &&
            reconnectBackoff.equals(c.reconnectBackoff) && reconnectBackoffMax.equals(c.reconnectBackoffMax) &&
            tls.equals(c.tls) && meterRegistry == c.meterRegistry && checksums == c.checksums &&
            callerDriven == c.callerDriven;
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(masterAddress, tenant, transport, rpcTimeout, clientId);
    }

    /** Fluent builder; {@link #build()} validates. Not thread safe. */
    public static final class Builder
    {
        private String masterAddress;
        private String tenant = Limits.DEFAULT_TENANT;
        private TransportKind transport = TransportKind.AUTO;
        private Duration rpcTimeout = DEFAULT_RPC_TIMEOUT;
        private int lanesPerPeer = TransferConfig.DEFAULT_LANES_PER_PEER;
        private int sliceBytes = TransferConfig.DEFAULT_SLICE_BYTES;
        private int maxVectorEntries = TransferConfig.DEFAULT_MAX_VECTOR_ENTRIES;
        private boolean writeCommits = true;
        private boolean commitParents = true;
        private boolean localTransfers = true;
        private int localMinBytes = TransferConfig.DEFAULT_LOCAL_MIN_BYTES;
        private Duration transferTimeout = Duration.ofMillis(TransferConfig.DEFAULT_TRANSFER_TIMEOUT_MS);
        private Duration connectTimeout = Duration.ofMillis(TransferConfig.DEFAULT_CONNECT_TIMEOUT_MS);
        private int ioThreads = new TransferConfig().ioThreads();
        private int maxQueuedTransfersPerPeer = TransferConfig.DEFAULT_MAX_QUEUED_TRANSFERS_PER_PEER;
        private int maxPendingAdmissionsPerPeer = TransferConfig.DEFAULT_MAX_PENDING_ADMISSIONS_PER_PEER;
        private Duration admissionTimeout = Duration.ofMillis(TransferConfig.DEFAULT_ADMISSION_TIMEOUT_MS);
        private String clientId;
        private String localHost;
        private boolean fastLookups = true;
        private int putRetries = DEFAULT_PUT_RETRIES;
        private Duration reconnectBackoff = DEFAULT_RECONNECT_BACKOFF;
        private Duration reconnectBackoffMax = DEFAULT_RECONNECT_BACKOFF_MAX;
        private TlsSettings tls = TlsSettings.DISABLED;
        private MeterRegistry meterRegistry;
        private boolean checksums = true;
        private boolean callerDriven = true;

        private Builder()
        {
        }

        /** host:port (IPv6 as [addr]:port) of the master; required. */
        public Builder masterAddress(final String masterAddress)
        {
            this.masterAddress = masterAddress;
            return this;
        }

        /** Namespace of every key this client touches; null or empty means "default". */
        public Builder tenant(final String tenant)
        {
            this.tenant = tenant;
            return this;
        }

        public Builder transport(final TransportKind transport)
        {
            this.transport = transport;
            return this;
        }

        public Builder rpcTimeout(final Duration rpcTimeout)
        {
            this.rpcTimeout = rpcTimeout;
            return this;
        }

        public Builder lanesPerPeer(final int lanesPerPeer)
        {
            this.lanesPerPeer = lanesPerPeer;
            return this;
        }

        public Builder sliceBytes(final int sliceBytes)
        {
            this.sliceBytes = sliceBytes;
            return this;
        }

        /** Most small reads per READV frame (1..1024, default 256); 1 turns READV off. */
        public Builder maxVectorEntries(final int maxVectorEntries)
        {
            this.maxVectorEntries = maxVectorEntries;
            return this;
        }

        /**
         * Whether a small value's WRITE travels with its COMMIT record as one WRITE_COMMIT frame (default true);
         * false while storage nodes older than that opcode remain (they close such a connection).
         */
        public Builder writeCommits(final boolean writeCommits)
        {
            this.writeCommits = writeCommits;
            return this;
        }

        /**
         * Whether a put's parent key ({@link PutOptions.Builder#parent}) goes into the COMMIT record its storage nodes
         * keep (default true), so that a restarted master relinks prefix chains for prefix-aware eviction; false while
         * storage nodes older than that record flag remain (they refuse such a COMMIT with INVALID_PARAMS and the put
         * fails). Puts naming no parent are the same either way; the master links parents at PutStart regardless.
         */
        public Builder commitParents(final boolean commitParents)
        {
            this.commitParents = commitParents;
            return this;
        }

        /**
         * Whether the native transport moves values of at least {@link #localMinBytes(int)} to and from storage nodes
         * on this host with process_vm_readv / process_vm_writev, one copy between the two processes instead of
         * loopback TCP (default true). Used only where the node agrees (its {@code --local-transfers}) and this process
         * may read and write the node's memory (the same user, ptrace permitted); otherwise, and after any refusal or
         * failed copy, TCP. COMMITs still go over TCP. The Java transport always uses TCP.
         */
        public Builder localTransfers(final boolean localTransfers)
        {
            this.localTransfers = localTransfers;
            return this;
        }

        /** Smallest value that moves locally (default 64 KiB; smaller ones batch better over TCP). */
        public Builder localMinBytes(final int localMinBytes)
        {
            this.localMinBytes = localMinBytes;
            return this;
        }

        public Builder transferTimeout(final Duration transferTimeout)
        {
            this.transferTimeout = transferTimeout;
            return this;
        }

        public Builder connectTimeout(final Duration connectTimeout)
        {
            this.connectTimeout = connectTimeout;
            return this;
        }

        public Builder ioThreads(final int ioThreads)
        {
            this.ioThreads = ioThreads;
            return this;
        }

        public Builder maxQueuedTransfersPerPeer(final int maxQueuedTransfersPerPeer)
        {
            this.maxQueuedTransfersPerPeer = maxQueuedTransfersPerPeer;
            return this;
        }

        /** 0 refuses a transfer at once when the node's queue is full. */
        public Builder maxPendingAdmissionsPerPeer(final int maxPendingAdmissionsPerPeer)
        {
            this.maxPendingAdmissionsPerPeer = maxPendingAdmissionsPerPeer;
            return this;
        }

        /** Whole milliseconds, 1 ms to 10 minutes. */
        public Builder admissionTimeout(final Duration admissionTimeout)
        {
            this.admissionTimeout = admissionTimeout;
            return this;
        }

        /** Defaults to a random UUID. */
        public Builder clientId(final String clientId)
        {
            this.clientId = clientId;
            return this;
        }

        /** See {@link ClientConfig#localHost()}; null restores the default. */
        public Builder localHost(final String localHost)
        {
            this.localHost = localHost;
            return this;
        }

        /** See {@link ClientConfig#fastLookups()}. */
        public Builder fastLookups(final boolean fastLookups)
        {
            this.fastLookups = fastLookups;
            return this;
        }

        /** See {@link ClientConfig#putRetries()}; 0..16. */
        public Builder putRetries(final int putRetries)
        {
            this.putRetries = putRetries;
            return this;
        }

        /** See {@link ClientConfig#reconnectBackoff()}. */
        public Builder reconnectBackoff(final Duration reconnectBackoff)
        {
            this.reconnectBackoff = reconnectBackoff;
            return this;
        }

        /** See {@link ClientConfig#reconnectBackoffMax()}; at least {@code reconnectBackoff}. */
        public Builder reconnectBackoffMax(final Duration reconnectBackoffMax)
        {
            this.reconnectBackoffMax = reconnectBackoffMax;
            return this;
        }


        /** See {@link ClientConfig#tls()}; null means plain text. */
        public Builder tls(final TlsSettings tls)
        {
            this.tls = tls == null ? TlsSettings.DISABLED : tls;
            return this;
        }

        /** Record the client's metrics in {@code meterRegistry}; null (the default) records none. */
        public Builder meterRegistry(final MeterRegistry meterRegistry)
        {
            this.meterRegistry = meterRegistry;
            return this;
        }

        /** See {@link ClientConfig#checksums()}. */
        public Builder checksums(final boolean checksums)
        {
            this.checksums = checksums;
            return this;
        }

        /** See {@link ClientConfig#callerDriven()}. */
        public Builder callerDriven(final boolean callerDriven)
        {
            this.callerDriven = callerDriven;
            return this;
        }

        /** @throws IllegalArgumentException naming the bad setting (for TLS: the flag and the file). */
        public ClientConfig build()
        {
            final String addressProblem = checkHostPort(masterAddress);
            if (addressProblem != null)
            {
                throw new IllegalArgumentException("masterAddress " + addressProblem);
            }
            final String tenantProblem = Limits.checkTenant(tenant);
            if (tenantProblem != null)
            {
                throw new IllegalArgumentException("tenant '" + tenant + "': " + tenantProblem);
            }
            if (transport == null)
            {
                throw new IllegalArgumentException("transport must not be null");
            }
            requirePositive("rpcTimeout", rpcTimeout);
            requirePositive("transferTimeout", transferTimeout);
            requirePositive("connectTimeout", connectTimeout);
            requirePositive("admissionTimeout", admissionTimeout);
            requirePositive("reconnectBackoff", reconnectBackoff);
            requirePositive("reconnectBackoffMax", reconnectBackoffMax);
            if (reconnectBackoffMax.compareTo(reconnectBackoff) < 0)
            {
                throw new IllegalArgumentException("reconnectBackoffMax (" + reconnectBackoffMax +
                    ") must be at least reconnectBackoff (" + reconnectBackoff + ")");
            }
            if (putRetries < 0 || putRetries > MAX_PUT_RETRIES)
            {
                throw new IllegalArgumentException(
                    "putRetries must be in 0.." + MAX_PUT_RETRIES + ", was " + putRetries);
            }
            if (clientId != null && clientId.isBlank())
            {
                throw new IllegalArgumentException("clientId must not be blank");
            }
            final String clientIdProblem = clientId == null ? null : Limits.checkClientId(clientId);
            if (clientIdProblem != null)
            {
                throw new IllegalArgumentException("clientId " + clientIdProblem);
            }
            tls.validateForClient();
            if (localHost != null && (localHost.isBlank() || hasPort(localHost)))
            {
                throw new IllegalArgumentException("localHost must be a host name or address without a port, was '" +
                    localHost + "'");
            }
            final ClientConfig config = new ClientConfig(this);
            config.transferConfig(); // TransferConfig.conclude() names the bad transfer setting
            return config;
        }

        /** "host:7000" has a port; "fe80::1" (several colons) and "[fe80::1]" do not. */
        private static boolean hasPort(final String host)
        {
            final int colon = host.indexOf(':');
            return colon >= 0 && (host.startsWith("[") ? !host.endsWith("]") : colon == host.lastIndexOf(':'));
        }

        private static void requirePositive(final String name, final Duration value)
        {
            if (value == null || value.isNegative() || value.isZero())
            {
                throw new IllegalArgumentException(name + " must be positive, was " + value);
            }
            try
            {
                if (value.toMillis() < 1)
                {
                    throw new IllegalArgumentException(name + " must be at least 1ms, was " + value);
                }
            }
            catch (final ArithmeticException ex)
            {
                throw new IllegalArgumentException(name + " out of range: " + value);
            }
        }

        /**
         * Null when {@code address} is host:port with a port in 1..65535, else the problem: the check of
         * {@link #masterAddress}, for tools that take the address of another Granary service as well.
         */
        public static String checkHostPort(final String address)
        {
            if (address == null || address.isBlank())
            {
                return "is required (host:port)";
            }
            final int colon = address.lastIndexOf(':');
            if (colon <= 0 || colon == address.length() - 1)
            {
                return "must be host:port, was '" + address + "'";
            }
            final String host = address.substring(0, colon);
            if (host.indexOf(':') >= 0 && !(host.startsWith("[") && host.endsWith("]") && host.length() > 2))
            {
                return "must write an IPv6 host in brackets ([::1]:50051), was '" + address + "'";
            }
            for (int i = 0; i < host.length(); i++)
            {
                final char c = host.charAt(i);
                if (Character.isWhitespace(c) || c == '/' || c == '@' || c == '?' || c == '#')
                {
                    return "has a bad host '" + host + "'";
                }
            }
            final int port;
            try
            {
                port = Integer.parseInt(address.substring(colon + 1));
            }
            catch (final NumberFormatException ex)
            {
                return "has a bad port in '" + address + "'";
            }
            if (port < 1 || port > 65535)
            {
                return "port must be in 1..65535, was " + port;
            }
            return null;
        }
    }
}
