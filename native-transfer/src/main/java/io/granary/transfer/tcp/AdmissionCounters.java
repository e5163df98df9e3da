package io.granary.transfer.tcp;

import java.util.concurrent.atomic.LongAdder;

/**
 * Engine-wide totals of admission decisions, summed over every peer. Updated from any thread; read
 * through {@link NettyTransferEngine}'s getters.
 */
final class AdmissionCounters
{
    /** Transfers given room in their peer's queue, at once or after waiting. */
    final LongAdder admitted = new LongAdder();
    /** Transfers refused at once: queue full and no pending-admission place left. */
    final LongAdder rejectedQueueFull = new LongAdder();
    /** Pending admissions that waited the whole admission timeout without getting room. */
    final LongAdder rejectedAdmissionTimeout = new LongAdder();
}
