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
        if (replica.getEndpoint().isEmpty())
        {
            throw nonsense(key, "a replica on node '" + replica.getNodeId() + "' has no endpoint");
        }
        if (replica.getOffset() < 0 || replica.getLength() < 0 || replica.getOffset() + replica.getLength() < 0)
        {
            throw nonsense(key, "a replica on " + replica.getEndpoint() + " has an extent out of range (offset " +
                Long.toUnsignedString(replica.getOffset()) + ", length " + Long.toUnsignedString(replica.getLength()) +
                ")");
        }
        final byte[] token = replica.getAccessToken().isEmpty() ? null : replica.getAccessToken().toByteArray();
        // The token grants the extent (at least one byte, so that a zero-length value's COMMIT carries it too), or
        // a wider range shared with other extents of the same batch (docs/protocol.md, "Shared grants").
        long grantOffset = replica.getOffset();
        long grantLength = Math.max(1, replica.getLength());
        if (replica.getGrantLength() != 0)
        {
            final long start = replica.getGrantOffset();
            final long end = start + replica.getGrantLength();
            if (token == null || start < 0 || replica.getGrantLength() < 0 ||
                replica.getGrantLength() > FrameDescriptor.MAX_GRANT_LENGTH || end < start ||
                replica.getOffset() < start || replica.getOffset() + grantLength > end)
            {
                throw nonsense(key, "a replica on " + replica.getEndpoint() + " has a grant (offset " +
                    Long.toUnsignedString(start) + ", length " + Long.toUnsignedString(replica.getGrantLength()) +
                    ") that does not hold its extent or has no token");
            }
            grantOffset = start;
            grantLength = replica.getGrantLength();
        }
        return new ReplicaExtent(
            replica.getNodeId(), replica.getEndpoint(), replica.getSegmentId(), replica.getOffset(),
            replica.getLength(), token, grantOffset, grantLength);
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
