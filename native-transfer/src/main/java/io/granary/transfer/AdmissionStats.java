package io.granary.transfer;

/** The admission counters a {@link TransferEngine} keeps over all its peers (docs/protocol.md, "Admission"). */
public interface AdmissionStats
{
    /** Transfers admitted to a peer's queue so far, at once or after waiting. */
    long admittedTransfers();

    /** Transfers refused at once with UNAVAILABLE_IN_CURRENT_STATUS: queue and pending admissions full. */
    long rejectedQueueFull();

    /** Pending admissions that failed with UNAVAILABLE_IN_CURRENT_STATUS after the admission timeout. */
    long rejectedAdmissionTimeout();
}
