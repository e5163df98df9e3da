package io.granary.master;

import java.time.Duration;

/**
 * Master settings: each property's name and default side by side. Flags use the same names with
 * a leading "--" (e.g. {@code --lease-ttl}); docs/configuration.md lists them all.
 */
public final class Configuration
{
    public static final String HOST_PROP = "host";
    public static final String HOST_DEFAULT = "127.0.0.1";

    public static final String PORT_PROP = "port";
    public static final int PORT_DEFAULT = 50051;

    public static final String LOOKUP_PORT_PROP = "lookup-port";
    public static final int LOOKUP_PORT_DEFAULT = 50052;

    public static final String ADMIN_PORT_PROP = "admin-port";
    public static final int ADMIN_PORT_DEFAULT = 9003;

    public static final String LEASE_TTL_PROP = "lease-ttl";
    public static final Duration LEASE_TTL_DEFAULT = Duration.ofSeconds(10);

    public static final String SOFT_PIN_DEFAULT_TTL_PROP = "soft-pin-default-ttl";
    public static final Duration SOFT_PIN_DEFAULT_TTL_DEFAULT = Duration.ofMinutes(30);

    public static final String SOFT_PIN_MAX_TTL_PROP = "soft-pin-max-ttl";
    public static final Duration SOFT_PIN_MAX_TTL_DEFAULT = Duration.ofHours(24);

    public static final String ALLOW_EVICT_SOFT_PINNED_PROP = "allow-evict-soft-pinned";
    public static final boolean ALLOW_EVICT_SOFT_PINNED_DEFAULT = true;

    public static final String EVICTION_HIGH_WATERMARK_PROP = "eviction-high-watermark";
    public static final double EVICTION_HIGH_WATERMARK_DEFAULT = 0.90;

    public static final String EVICTION_RATIO_PROP = "eviction-ratio";
    public static final double EVICTION_RATIO_DEFAULT = 0.05;

    /** oldest-lease (Mooncake's order) or prefix-leaf-first (never a KV block while a later block of its chain remains). */
    public static final String EVICTION_POLICY_PROP = "eviction-policy";
    public static final String EVICTION_POLICY_DEFAULT = "oldest-lease";

    public static final String NODE_TTL_PROP = "node-ttl";
    public static final Duration NODE_TTL_DEFAULT = Duration.ofSeconds(10);

    public static final String HEARTBEAT_INTERVAL_PROP = "heartbeat-interval";
    public static final Duration HEARTBEAT_INTERVAL_DEFAULT = Duration.ofSeconds(1);

    public static final String PUT_DISCARD_TIMEOUT_PROP = "put-discard-timeout";
    public static final Duration PUT_DISCARD_TIMEOUT_DEFAULT = Duration.ofSeconds(30);

    public static final String PUT_RELEASE_TIMEOUT_PROP = "put-release-timeout";
    public static final Duration PUT_RELEASE_TIMEOUT_DEFAULT = Duration.ofMinutes(10);

    public static final String METADATA_SHARDS_PROP = "metadata-shards";
    public static final int METADATA_SHARDS_DEFAULT = 1024;

    /**
     * Most objects the master holds; a put beyond it evicts first and is refused if nothing can go. 0 = from the
     * heap: {@value #METADATA_HEAP_SHARE_PERCENT} % of the max heap at {@value #BYTES_PER_OBJECT_ESTIMATE} bytes an
     * object.
     */
    public static final String MAX_OBJECTS_PROP = "max-objects";
    public static final long MAX_OBJECTS_DEFAULT = 0;
    /** The share of the max heap the object budget derived from the heap may take. */
    public static final int METADATA_HEAP_SHARE_PERCENT = 70;
    /**
     * Heap an object is taken to need when the budget is derived from the heap: measured 316 bytes with one replica
     * and 452 with two (44-byte keys, MasterMemoryProbe), so this leaves room for longer keys and the collector.
     */
    public static final int BYTES_PER_OBJECT_ESTIMATE = 512;

    /**
     * Byte quotas of named tenants, {@code TENANT=SIZE[,TENANT=SIZE...]} (e.g. {@code llama-70b=64g,batch=8g}): the
     * value bytes of a tenant's objects, replicas counted once. A put of a new key beyond evicts the tenant's own oldest
     * objects first and is refused with TENANT_QUOTA_EXCEEDED if none can go. Empty: no tenant is named.
     */
    public static final String TENANT_QUOTAS_PROP = "tenant-quotas";
    public static final String TENANT_QUOTAS_DEFAULT = "";

    /** The byte quota of every tenant {@link #TENANT_QUOTAS_PROP} does not name; 0 = none. */
    public static final String DEFAULT_TENANT_QUOTA_PROP = "default-tenant-quota";
    public static final long DEFAULT_TENANT_QUOTA_DEFAULT = 0;

    public static final String ALLOCATION_GRANULARITY_PROP = "allocation-granularity";
    public static final int ALLOCATION_GRANULARITY_DEFAULT = 64;

    public static final String LIST_KEYS_LIMIT_PROP = "list-keys-limit";
    public static final int LIST_KEYS_LIMIT_DEFAULT = 10_000;

    /** /ready answers 503 until this many nodes have registered and reported their ledgers (0: at once). */
    public static final String READY_AFTER_NODES_PROP = "ready-after-nodes";
    public static final int READY_AFTER_NODES_DEFAULT = 0;
    /** Issue data-plane access tokens with every extent, and make nodes refuse frames without one. */
    public static final String DATA_TOKENS_PROP = "data-tokens";
    public static final boolean DATA_TOKENS_DEFAULT = true;

    /** File holding the 256-bit token key as 64 hex digits; empty = a random key per master start. */
    public static final String TOKEN_KEY_FILE_PROP = "token-key-file";
    public static final String TOKEN_KEY_FILE_DEFAULT = "";

    /** Publish KV events (stored / removed / cleared) to SubscribeEvents streams (docs/events.md). */
    public static final String EVENTS_PROP = "events";
    public static final boolean EVENTS_DEFAULT = true;

    /** Replay buffer: the most recent events kept for subscribers that resume (a power of two). */
    public static final String EVENTS_BUFFER_PROP = "events-buffer";
    public static final int EVENTS_BUFFER_DEFAULT = 65_536;

    /** A subscriber this many events behind the newest is cut off (RESOURCE_EXHAUSTED) and resubscribes. */
    public static final String EVENTS_SUBSCRIBER_QUEUE_PROP = "events-subscriber-queue";
    public static final int EVENTS_SUBSCRIBER_QUEUE_DEFAULT = 32_768;

    /** Most SubscribeEvents streams served at once. */
    public static final String EVENTS_MAX_SUBSCRIBERS_PROP = "events-max-subscribers";
    public static final int EVENTS_MAX_SUBSCRIBERS_DEFAULT = 64;

    /** ZeroMQ PUB address of the vLLM-framed event publisher (e.g. tcp://0.0.0.0:5557); empty = none. */
    public static final String EVENTS_ZMQ_ENDPOINT_PROP = "events-zmq-endpoint";
    public static final String EVENTS_ZMQ_ENDPOINT_DEFAULT = "";

    /** ZeroMQ ROUTER address answering replay requests of that publisher; empty = none. */
    public static final String EVENTS_ZMQ_REPLAY_ENDPOINT_PROP = "events-zmq-replay-endpoint";
    public static final String EVENTS_ZMQ_REPLAY_ENDPOINT_DEFAULT = "";

    /** Topic frame of every message the ZeroMQ publisher sends. */
    public static final String EVENTS_ZMQ_TOPIC_PROP = "events-zmq-topic";
    public static final String EVENTS_ZMQ_TOPIC_DEFAULT = "";

    /** Batches the ZeroMQ publisher keeps for replay requests. */
    public static final String EVENTS_ZMQ_REPLAY_BATCHES_PROP = "events-zmq-replay-batches";
    public static final int EVENTS_ZMQ_REPLAY_BATCHES_DEFAULT = 10_000;

    private Configuration()
    {
    }
}
