package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.proto.Replica;
import io.granary.protocol.FrameDescriptor;

/**
 * One replica's extent as the client uses it, checked once when the master's answer arrives.
 *
 * @param nodeId      storage node id (for messages).
 * @param endpoint    host:port of the node's transfer server.
 * @param segmentId   node-local segment id.
 * @param offset      byte offset of the extent in the segment.
 * @param length      extent length in bytes.
 * @param accessToken data-plane token, or null.
 * @param grantOffset start of the range the token grants: the extent's offset, or the start of a shared grant.
 * @param grantLength length of the range the token grants: at least one byte, and the whole extent.
 */
record ReplicaExtent(
    String nodeId, String endpoint, int segmentId, long offset, long length, byte[] accessToken, long grantOffset,
    long grantLength)
{
    /** @throws GranaryException INTERNAL_ERROR when the master sent an extent the client cannot use. */
    static ReplicaExtent from(final Replica replica, final String key)
    {
        return checked(replica.getNodeId(), replica.getEndpoint(), replica.getSegmentId(), replica.getOffset(),
            replica.getLength(), replica.getAccessToken().isEmpty() ? null : replica.getAccessToken().toByteArray(),
            replica.getGrantOffset(), replica.getGrantLength(), key);
    }

    /**
     * An extent from a Replica's fields as the master sent them ({@code token} null when it sent none;
     * {@code grantLength} 0 when the grant is the extent itself).
     *
     * @throws GranaryException INTERNAL_ERROR naming {@code key} when the client cannot use it.
     */
    static ReplicaExtent checked(
        final String nodeId, final String endpoint, final int segmentId, final long offset, final long length,
        final byte[] token, final long grantOffset, final long grantLength, final String key)
    {
        if (endpoint.isEmpty())
        {
            throw nonsense(key, "a replica on node '" + nodeId + "' has no endpoint");
        }
        if (offset < 0 || length < 0 || offset + length < 0)
        {
            throw nonsense(key, "a replica on " + endpoint + " has an extent out of range (offset " +
                Long.toUnsignedString(offset) + ", length " + Long.toUnsignedString(length) + ")");
        }
        // The token grants the extent (at least one byte, so that a zero-length value's COMMIT carries it too), or
        // a wider range shared with other extents of the same batch (docs/protocol.md, "Shared grants").
        final long extentGrant = Math.max(1, length);
        if (grantLength == 0)
        {
            return new ReplicaExtent(nodeId, endpoint, segmentId, offset, length, token, offset, extentGrant);
        }
        final long grantEnd = grantOffset + grantLength;
        if (token == null || grantOffset < 0 || grantLength < 0 || grantLength > FrameDescriptor.MAX_GRANT_LENGTH ||
            grantEnd < grantOffset || offset < grantOffset || offset + extentGrant > grantEnd)
        {
            throw nonsense(key, "a replica on " + endpoint + " has a grant (offset " +
                Long.toUnsignedString(grantOffset) + ", length " + Long.toUnsignedString(grantLength) +
                ") that does not hold its extent or has no token");
        }
        return new ReplicaExtent(nodeId, endpoint, segmentId, offset, length, token, grantOffset, grantLength);
    }

    static GranaryException nonsense(final String key, final String what)
    {
        return new GranaryException(
            ErrorCode.INTERNAL_ERROR, "key " + Keys.quote(key) + ": the master's answer is unusable: " + what);
    }

    /** "node n1 (10.0.0.1:7000 seg 3)" for messages. */
    String describe()
    {
        return "node " + (nodeId.isEmpty() ? "?" : nodeId) + " (" + endpoint + " seg " +
            Integer.toUnsignedString(segmentId) + ")";
    }
}
