package io.granary.client.prefix;

import io.granary.client.ReadLease;

import java.util.Arrays;

/**
 * What {@link PrefixCache#lookup} found for one prompt: its full blocks and how many of them, from the first, are
 * in the store whole (every rank's every page), leased by the lookup. Immutable.
 */
public final class PrefixLookup
{
    private final String[] blockHashes;
    private final int hitBlocks;
    private final int tokensPerBlock;
    /** This rank's pages of the hit blocks with the replica lists the lookup brought back, or null. */
    private final ReadLease[] leases;
    /** The client whose probe made the leases: only it can read with them. */
    private final Object leaseOwner;

    PrefixLookup(final String[] blockHashes, final int hitBlocks, final int tokensPerBlock, final ReadLease[] leases,
        final Object leaseOwner)
    {
        this.blockHashes = blockHashes;
        this.hitBlocks = hitBlocks;
        this.tokensPerBlock = tokensPerBlock;
        this.leases = leases;
        this.leaseOwner = leaseOwner;
    }

    /** Full blocks of the prompt that were looked up (a partial last block never has a key). */
    public int blocks()
    {
        return blockHashes.length;
    }

    /** Blocks 0..hitBlocks-1 are stored whole and leased. */
    public int hitBlocks()
    {
        return hitBlocks;
    }

    /** Tokens the engine can load instead of computing: {@code hitBlocks() * tokensPerBlock}. */
    public int hitTokens()
    {
        return hitBlocks * tokensPerBlock;
    }

    /** Blocks the engine computes and may then {@link PrefixCache#save}: {@code blocks() - hitBlocks()}. */
    public int missingBlocks()
    {
        return blockHashes.length - hitBlocks;
    }

    public int tokensPerBlock()
    {
        return tokensPerBlock;
    }

    /** The chained hash of block {@code i} (64 hex digits), which names its objects (see {@link PrefixKeys}). */
    public String blockHash(final int i)
    {
        return blockHashes[i];
    }

    String[] hashes()
    {
        return blockHashes;
    }

    /** The leases, if {@code client} made them; null otherwise (then a load looks the pages up). */
    ReadLease[] leasesOf(final Object client)
    {
        return client == leaseOwner ? leases : null;
    }

    @Override
    public String toString()
    {
        return "PrefixLookup[" + hitBlocks + "/" + blockHashes.length + " blocks, " + hitTokens() + " tokens" +
            (blockHashes.length == 0 ? "" : ", first " + blockHashes[0].substring(0, 12) + "..") + "]";
    }

    @Override
    public boolean equals(final Object o)
    {
        return o instanceof PrefixLookup && ((PrefixLookup)o).hitBlocks == hitBlocks &&
            ((PrefixLookup)o).tokensPerBlock == tokensPerBlock && Arrays.equals(((PrefixLookup)o).blockHashes, blockHashes);
    }

    @Override
    public int hashCode()
    {
        return 31 * Arrays.hashCode(blockHashes) + hitBlocks;
    }
}
