package io.granary.master.rpc;

/**
 * Every control-plane call of the master, as named in master.proto: the index of its per-call metrics and the
 * name its logs and metric tags carry.
 */
public enum MasterRpc
{
    MOUNT_SEGMENT("MountSegment"),
    UNMOUNT_SEGMENT("UnmountSegment"),
    DEREGISTER_NODE("DeregisterNode"),
    HEARTBEAT("Heartbeat"),
    REPORT_LEDGER("ReportLedger"),
    PUT_START("PutStart"),
    PUT_END("PutEnd"),
    PUT_REVOKE("PutRevoke"),
    BATCH_PUT_START("BatchPutStart"),
    BATCH_PUT_END("BatchPutEnd"),
    BATCH_PUT_REVOKE("BatchPutRevoke"),
    GET_REPLICA_LIST("GetReplicaList"),
    BATCH_GET_REPLICA_LIST("BatchGetReplicaList"),
    EXIST_KEY("ExistKey"),
    BATCH_EXIST_KEY("BatchExistKey"),
    BATCH_PROBE_KEY("BatchProbeKey"),
    REMOVE("Remove"),
    REMOVE_BY_REGEX("RemoveByRegex"),
    REMOVE_ALL("RemoveAll"),
    LIST_KEYS("ListKeys"),
    GET_SERVER_INFO("GetServerInfo"),
    GET_CLUSTER_STATUS("GetClusterStatus");

    private final String rpcName;

    MasterRpc(final String rpcName)
    {
        this.rpcName = rpcName;
    }

    /** The name in master.proto ("PutStart"). */
    public String rpcName()
    {
        return rpcName;
    }

    @Override
    public String toString()
    {
        return rpcName;
    }
}
