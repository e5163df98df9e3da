package io.granary.master.meta;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * One tenant's byte quota ({@code --tenant-quotas}, {@code --default-tenant-quota}): the value bytes of the tenant's
 * objects, complete or being put, counted once whatever their replica count. A put of a new key is charged before it
 * is placed and refunded if it fails; an object's bytes come back when it goes (removed, evicted, lost with its
 * nodes, or replaced by a rebuild). Thread safe, lock free.
 */
public final class TenantQuota
{
    private final String tenant;
    private final long limitBytes;
    private final AtomicLong usedBytes = new AtomicLong();
    private final LongAdder refusals = new LongAdder();
    private final LongAdder evictedBytes = new LongAdder();

    public TenantQuota(final String tenant, final long limitBytes)
    {
        if (limitBytes <= 0)
        {
            throw new IllegalArgumentException("a tenant quota must be > 0 bytes, was " + limitBytes + " for " + tenant);
        }
        this.tenant = tenant;
        this.limitBytes = limitBytes;
    }

    public String tenant()
    {
        return tenant;
    }

    public long limitBytes()
    {
        return limitBytes;
    }

    /** Value bytes of the tenant's objects (may exceed the limit after a rebuild adopted more than it). */
    public long usedBytes()
    {
        return usedBytes.get();
    }

    /** Puts of new keys refused with TENANT_QUOTA_EXCEEDED. */
    public long refusals()
    {
        return refusals.sum();
    }

    /** Bytes evicted by rounds run to bring this tenant under its quota. */
    public long evictedBytes()
    {
        return evictedBytes.sum();
    }

    /** Charges {@code bytes} if the tenant stays within its limit. @return false (nothing charged) if it would not. */
    boolean tryCharge(final long bytes)
    {
        long used;
        do
        {
            used = usedBytes.get();
            if (bytes > limitBytes - used)
            {
                return false;
            }
        }
        while (!usedBytes.compareAndSet(used, used + bytes));
        return true;
    }

    /** Charges {@code bytes} whatever the limit (an object a rebuild adopted exists already). */
    void charge(final long bytes)
    {
        usedBytes.addAndGet(bytes);
    }

    void refund(final long bytes)
    {
        usedBytes.addAndGet(-bytes);
    }

    void refused()
    {
        refusals.increment();
    }

    /** Records {@code bytes} evicted for this quota (by the evictor's tenant rounds). */
    public void evicted(final long bytes)
    {
        evictedBytes.add(bytes);
    }

    /** Bytes beyond the limit a charge of {@code bytes} would leave (at most 0 when it fits). */
    public long excessWith(final long bytes)
    {
        return usedBytes.get() + bytes - limitBytes;
    }
}
