package io.granary.master.token;

import io.granary.master.meta.MetadataStore;
import io.granary.master.meta.ReplicaRecord;
import io.granary.protocol.AccessTokenCodec;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Issues the data-plane access tokens of the extents the master grants (docs/protocol.md, "Access tokens"), under
 * one 256-bit master key: each node gets its own key derived from it and the node id at MountSegment, and every token
 * is signed with the key of the node that holds the extent. Thread safe: each thread signs with its own MAC instances.
 */
public final class TokenIssuer implements MetadataStore.ReplicaTokens
{
    /** Bounds the per-thread codec cache (node ids change on every node restart). */
    private static final int MAX_CACHED_NODES = 4096;

    private final byte[] masterKey;
    private final ThreadLocal<Map<String, AccessTokenCodec>> codecs = ThreadLocal.withInitial(HashMap::new);

    /** @param masterKey {@value AccessTokenCodec#KEY_LENGTH} bytes; copied. */
    public TokenIssuer(final byte[] masterKey)
    {
        Objects.requireNonNull(masterKey, "masterKey");
        if (masterKey.length != AccessTokenCodec.KEY_LENGTH)
        {
            throw new IllegalArgumentException("the data-token key has " + AccessTokenCodec.KEY_LENGTH +
                " bytes, was " + masterKey.length);
        }
        this.masterKey = masterKey.clone();
    }

    /** The key node {@code nodeId} verifies its tokens with, sent to it in MountSegmentResponse. */
    public byte[] nodeKey(final String nodeId)
    {
        return AccessTokenCodec.deriveNodeKey(masterKey, nodeId);
    }

    @Override
    public byte[] sign(final ReplicaRecord replica, final int opcode, final long expirySec)
    {
        // A zero-length value still gets a one-byte grant: its COMMIT must carry a token a node can verify.
        return codecOf(replica.segment().nodeId())
            .sign(opcode, replica.segment().segmentId(), replica.offset(), Math.max(1, replica.length()), expirySec);
    }

    private AccessTokenCodec codecOf(final String nodeId)
    {
        final Map<String, AccessTokenCodec> cache = codecs.get();
        AccessTokenCodec codec = cache.get(nodeId);
        if (codec == null)
        {
            if (cache.size() >= MAX_CACHED_NODES)
            {
                cache.clear();
            }
            codec = new AccessTokenCodec(nodeKey(nodeId));
            cache.put(nodeId, codec);
        }
        return codec;
    }
}
