package io.granary.client.internal;

import io.granary.client.ErrorCode;
import io.granary.client.GranaryException;
import io.granary.proto.Replica;

/**
 * One replica's extent as the client uses it, checked once when the master's answer arrives.
 *
 * @param nodeId      storage node id (for messages).
 * @param endpoint    host:port of the node's transfer server.
 * @param segmentId   node-local segment id.
 * @param offset      byte offset of the extent in the segment.
 * @param length      extent length in bytes.
 * @param accessToken data-plane token, or null.
 */
record ReplicaExtent(String nodeId, String endpoint, int segmentId, long offset, long length, byte[] accessToken)
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
        return new ReplicaExtent(
            replica.getNodeId(), replica.getEndpoint(), replica.getSegmentId(), replica.getOffset(),
            replica.getLength(), token);
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
