package io.granary.client.prefix;

/**
 * Counters of one {@link PrefixCache} since it was created, as a snapshot. A <em>hole</em> is a block missing from
 * the store while a later block of the same prompt is present: the present blocks behind the first missing one
 * (<em>stranded</em> blocks) cannot be used, since a prefix is reusable only up to its first gap, and their tokens
 * are recomputed anyway. Holes are counted only by lookups with hole checks on (see
 * {@link PrefixCache.Options#holeChecks}) or by {@link PrefixCache#checkHoles}.
 *
 * @param lookups          prefix lookups done.
 * @param lookedUpBlocks   full blocks of the prompts looked up.
 * @param hitBlocks        blocks found whole and leased (a prefix run from the first block).
 * @param hitTokens        tokens of those blocks.
 * @param holeChecks       lookups whose blocks after the run were checked for holes.
 * @param holes            missing blocks followed, later in the same prompt, by a present block.
 * @param strandedBlocks   present blocks behind a prompt's first missing block.
 * @param recomputedTokens tokens of the stranded blocks: stored, yet computed again.
 * @param loadedBlocks     blocks loaded into caller buffers.
 * @param failedLoads      blocks a load could not read although the lookup had found them.
 * @param savedBlocks      blocks whose every page this rank saved (or found already stored).
 * @param failedSaves      blocks with at least one page a save could not store.
 */
public record PrefixStats(
    long lookups,
    long lookedUpBlocks,
    long hitBlocks,
    long hitTokens,
    long holeChecks,
    long holes,
    long strandedBlocks,
    long recomputedTokens,
    long loadedBlocks,
    long failedLoads,
    long savedBlocks,
    long failedSaves)
{
    /** Hit blocks over looked-up blocks (0 when nothing was looked up). */
    public double hitRate()
    {
        return lookedUpBlocks == 0 ? 0 : (double)hitBlocks / lookedUpBlocks;
    }
}
