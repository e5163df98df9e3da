/*
 * An in-process stand-in for libibverbs, for the C tests only (no RDMA device exists on the build machines): one
 * device with an active port 1, protection domains, memory registrations with local and remote keys, completion
 * queues, and reliable-connected queue pairs whose state transitions (RESET -> INIT -> RTR -> RTS, with the
 * attribute masks each step needs) are checked. Posting executes RDMA READ and WRITE at once as copies between this
 * process's memory regions: the local buffer must lie in a registration of the QP's protection domain (its lkey),
 * the remote range in a registration of the peer QP's domain found by its rkey, both with the access the operation
 * needs, and the two QPs must be connected to each other; otherwise the work request completes with the error a
 * device reports (local protection, remote access, retries exceeded) and the QP goes to ERROR, where later work
 * requests are flushed. Send-queue slots are held until a signalled completion covering them is polled. Thread
 * safe (one lock).
 */
#ifndef GT_FAKE_VERBS_H
#define GT_FAKE_VERBS_H

#include <stdint.h>

/* Routes the transport to the fake with devices (0 or 1) devices; 0 when this build has no verbs transport. */
int fake_verbs_install(int devices);

/* Back to libibverbs. */
void fake_verbs_uninstall(void);

/* Objects alive in the fake: contexts, protection domains, registrations, completion queues, queue pairs. */
int fake_verbs_live(void);

/* Memory registrations made so far (successful reg_mr calls), ever. */
int fake_verbs_registrations(void);

/* 1: posted work requests go nowhere and never complete (a peer that stopped answering); 0: back to normal. */
void fake_verbs_stall(int stalled);

/* The state (enum ibv_qp_state) of queue pair qp_num, or -1 when there is none. */
int fake_verbs_qp_state(uint32_t qp_num);

#endif
