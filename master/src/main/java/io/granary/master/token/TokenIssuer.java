package io.granary.master.token;

import io.granary.master.meta.MetadataStore;
import io.granary.master.segment.MountedSegment;
import io.granary.protocol.AccessTokenCodec;

import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Issues the data-plane access tokens of the extents the master grants (docs/protocol.md, "Access tokens"), under
 * one 256-bit master key: each node gets its own key derived from it and the node id at MountSegment, and every token
 * is signed with the key of the node that holds the extent. Thread safe: codecs are shared, one per node.
 */
public final class TokenIssuer implements MetadataStore.ReplicaTokens
{
    /** Bounds the per-thread codec cache (node ids change on every node restart). */
    private static final int MAX_CACHED_NODES = 4096;

    private final byte[] masterKey;
    /** One codec per node (a codec is thread safe); cleared when it holds MAX_CACHED_NODES. */
    private final ConcurrentHashMap<String, AccessTokenCodec> codecs = new ConcurrentHashMap<>();

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
    public byte[] sign(
        final MountedSegment segment, final long grantOffset, final long grantLength, final int opcode,
        final long expirySec)
    {
        return codecOf(segment.nodeId()).sign(opcode, segment.segmentId(), grantOffset, grantLength, expirySec);
    }

    private AccessTokenCodec codecOf(final String nodeId)
    {
        AccessTokenCodec codec = codecs.get(nodeId);
        if (codec == null)
        {
            if (codecs.size() >= MAX_CACHED_NODES)
            {
                codecs.clear();
            }
            codec = new AccessTokenCodec(nodeKey(nodeId));
            codecs.put(nodeId, codec); // two threads may both derive it: the same key, either codec will do
        }
        return codec;
    }
}
