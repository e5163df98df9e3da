package io.granary.client.prefix;

import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;
import io.granary.client.ReadLease;
import io.granary.client.SoftPinAction;
import io.granary.protocol.Limits;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;

/**
 * The prefix cache an inference engine wants from the store: "how much of this prompt's prefix can I load, and
 * keep it safe while I load it". One instance per engine process (per tensor-parallel rank); thread safe, and it
 * holds no state but its counters. Keys follow {@link PrefixKeys}: a block is one candidate made of every rank's
 * every layer-group page, all in one eviction group, each page naming the same page of the previous block as its
 * parent so that {@code --eviction-policy prefix-leaf-first} evicts chains from their end.
 *
 * <pre>{@code
 * PrefixCache cache = new PrefixCache(client, layout);
 * PrefixLookup hit = cache.lookup(promptTokens);          // one master round trip; hit blocks leased
 * int loaded = cache.load(hit, hit.hitBlocks(), buffers);  // this rank's pages, no master round trip
 * // ... compute the KV of tokens from loaded * tokensPerBlock on ...
 * cache.save(hit, computedPages);                          // only the blocks the lookup did not find
 * }</pre>
 *
 * Calls block like the {@link GranaryClient} they use and throw its {@link GranaryException} for failures of a
 * whole request; per-page failures of loads and saves are counted and shorten the result instead.
 */
public final class PrefixCache
{
    private static final Logger LOG = LoggerFactory.getLogger(PrefixCache.class);

    private final GranaryClient client;
    private final PrefixLayout layout;
    private final PrefixKeys keys;
    private final Options options;
    /** Most blocks one lookup or save covers: a probe carries at most {@link Limits#MAX_BATCH_KEYS} keys. */
    private final int maxBlocks;

    private final LongAdder lookups = new LongAdder();
    private final LongAdder lookedUpBlocks = new LongAdder();
    private final LongAdder hitBlocks = new LongAdder();
    private final LongAdder holeChecks = new LongAdder();
    private final LongAdder holes = new LongAdder();
    private final LongAdder strandedBlocks = new LongAdder();
    private final LongAdder loadedBlocks = new LongAdder();
    private final LongAdder failedLoads = new LongAdder();
    private final LongAdder savedBlocks = new LongAdder();
    private final LongAdder failedSaves = new LongAdder();

    /** How saves protect blocks and whether lookups look for holes. Immutable. */
    public static final class Options
    {
        private static final Options DEFAULTS = new Options(null, 1, false);

        private final Duration softPinTtl;
        private final int replicas;
        private final boolean holeChecks;

        private Options(final Duration softPinTtl, final int replicas, final boolean holeChecks)
        {
            this.softPinTtl = softPinTtl;
            this.replicas = replicas;
            this.holeChecks = holeChecks;
        }

        /** No soft pin, one replica, no hole checks. */
        public static Options defaults()
        {
            return DEFAULTS;
        }

        /**
         * Soft pin every saved page for {@code ttl} from when it becomes readable (null: no pin). The master refuses
         * a TTL above its {@code --soft-pin-max-ttl} (INVALID_PARAMS per page).
         */
        public Options softPinTtl(final Duration ttl)
        {
            if (ttl != null && (ttl.isNegative() || ttl.isZero()))
            {
                throw new IllegalArgumentException("softPinTtl must be positive or null, was " + ttl);
            }
            return new Options(ttl, replicas, holeChecks);
        }

        /** Copies of every saved page, 1..{@link Limits#MAX_REPLICAS}. */
        public Options replicas(final int replicas)
        {
            if (replicas < 1 || replicas > Limits.MAX_REPLICAS)
            {
                throw new IllegalArgumentException("replicas must be in 1.." + Limits.MAX_REPLICAS + ", was " + replicas);
            }
            return new Options(softPinTtl, replicas, holeChecks);
        }

        /**
         * After a lookup that did not find the whole prompt, check the blocks behind its first missing one (an
         * asynchronous probe that grants no lease, off the lookup's path) and count holes and stranded blocks.
         * Costs one more master request per such lookup.
         */
        public Options holeChecks(final boolean holeChecks)
        {
            return new Options(softPinTtl, replicas, holeChecks);
        }

        public Duration softPinTtl()
        {
            return softPinTtl;
        }

        public int replicas()
        {
            return replicas;
        }

        public boolean holeChecks()
        {
            return holeChecks;
        }
    }

    /** What {@link #checkHoles} found behind a prompt's first missing block. */
    public record HoleReport(int holes, int strandedBlocks)
    {
    }

    public PrefixCache(final GranaryClient client, final PrefixLayout layout)
    {
        this(client, layout, Options.defaults());
    }

    public PrefixCache(final GranaryClient client, final PrefixLayout layout, final Options options)
    {
        this.client = Objects.requireNonNull(client, "client");
        this.layout = Objects.requireNonNull(layout, "layout");
        this.options = Objects.requireNonNull(options, "options");
        this.keys = new PrefixKeys(layout);
        this.maxBlocks = Limits.MAX_BATCH_KEYS / layout.objectsPerBlock();
    }

    public PrefixLayout layout()
    {
        return layout;
    }

    public PrefixKeys keys()
    {
        return keys;
    }

    /** {@link #lookup(int[], int)} of the whole array. */
    public PrefixLookup lookup(final int[] tokens)
    {
        return lookup(tokens, tokens.length);
    }

    /**
     * How many full blocks of {@code tokens[0, length)}, from the first, the store holds whole, in one master round
     * trip (BatchProbeKey LONGEST_PREFIX with one candidate per block); every page of those blocks is leased, so it
     * stays loadable for the master's lease TTL. A partial last block is never looked up.
     */
    public PrefixLookup lookup(final int[] tokens, final int length)
    {
        final String[] hashes = keys.blockHashes(tokens, length, maxBlocks);
        return lookedUp(hashes, hashes.length == 0 ? null : client.probeBatchForRead(
            candidateKeys(hashes, 0, hashes.length), LeasePolicy.longestPrefix(layout.objectsPerBlock()),
            ownMembersFrom(), layout.layerGroups()));
    }

    /** {@link #lookupAsync(int[], int)} of the whole array. */
    public CompletableFuture<PrefixLookup> lookupAsync(final int[] tokens)
    {
        return lookupAsync(tokens, tokens.length);
    }

    /**
     * {@link #lookup(int[], int)} through the client's async view: the blocks are hashed on the calling thread, the
     * probe is in flight when this returns. The future fails as {@link #lookup} would throw.
     */
    public CompletableFuture<PrefixLookup> lookupAsync(final int[] tokens, final int length)
    {
        final String[] hashes = keys.blockHashes(tokens, length, maxBlocks);
        if (hashes.length == 0)
        {
            return CompletableFuture.completedFuture(lookedUp(hashes, null));
        }
        return client.async().probeBatchForRead(candidateKeys(hashes, 0, hashes.length),
            LeasePolicy.longestPrefix(layout.objectsPerBlock()), ownMembersFrom(), layout.layerGroups())
            .thenApply(mask -> lookedUp(hashes, mask));
    }

    /** Where this rank's pages sit in a block's candidate (every rank's pages, rank by rank): the lists we read. */
    private int ownMembersFrom()
    {
        return layout.rank() * layout.layerGroups();
    }

    /** The lookup of {@code hashes} given the probe's answer (null when there was nothing to probe); counts it. */
    private PrefixLookup lookedUp(final String[] hashes, final List<OpResult<ReadLease>> mask)
    {
        final int n = layout.objectsPerBlock();
        int hit = 0;
        ReadLease[] leases = null;
        if (mask != null)
        {
            while (hit < hashes.length && leased(mask.get(hit * n)))
            {
                hit++;
            }
            leases = ownLeases(mask, hit);
        }
        lookups.increment();
        lookedUpBlocks.add(hashes.length);
        hitBlocks.add(hit);
        final PrefixLookup lookup = new PrefixLookup(hashes, hit, layout.tokensPerBlock(), leases, client);
        if (options.holeChecks)
        {
            checkHolesAsync(lookup);
        }
        return lookup;
    }

    /**
     * Checks, without leasing, which blocks behind the lookup's first missing block are present, and counts the
     * holes and stranded blocks. One master round trip when there is anything to check.
     */
    public HoleReport checkHoles(final PrefixLookup lookup)
    {
        final int first = lookup.hitBlocks() + 1;
        if (first >= lookup.blocks())
        {
            return count(new HoleReport(0, 0));
        }
        final String[] hashes = lookup.hashes();
        final List<OpResult<Boolean>> mask = client.probeBatch(candidateKeys(hashes, first, hashes.length),
            LeasePolicy.none());
        return count(holesIn(mask, hashes.length - first));
    }

    private void checkHolesAsync(final PrefixLookup lookup)
    {
        final int first = lookup.hitBlocks() + 1;
        if (first >= lookup.blocks())
        {
            count(new HoleReport(0, 0));
            return;
        }
        final String[] hashes = lookup.hashes();
        final int behind = hashes.length - first;
        client.async().probeBatch(candidateKeys(hashes, first, hashes.length), LeasePolicy.none())
            .whenComplete((mask, ex) ->
            {
                if (ex != null)
                {
                    LOG.debug("hole check failed: {}", ex.toString());
                }
                else
                {
                    count(holesIn(mask, behind));
                }
            });
    }

    /** Holes and stranded blocks given which of the {@code behind} blocks after the first missing one are whole. */
    private HoleReport holesIn(final List<OpResult<Boolean>> mask, final int behind)
    {
        final int n = layout.objectsPerBlock();
        int stranded = 0;
        int lastPresent = -1;
        for (int j = 0; j < behind; j++)
        {
            boolean whole = true;
            for (int k = 0; k < n && whole; k++)
            {
                whole = marked(mask.get(j * n + k));
            }
            if (whole)
            {
                stranded++;
                lastPresent = j;
            }
        }
        // The first missing block itself plus every missing one up to the last present block.
        final int holesFound = lastPresent < 0 ? 0 : 1 + (lastPresent + 1 - stranded);
        return new HoleReport(holesFound, stranded);
    }

    private HoleReport count(final HoleReport report)
    {
        holes.add(report.holes());
        strandedBlocks.add(report.strandedBlocks());
        holeChecks.increment(); // last: whoever sees the check counted sees its holes too
        return report;
    }

    /**
     * Reads this rank's pages of the first {@code blocks} blocks of a lookup's run into the caller's buffers, all in
     * flight at once, with the replica lists the lookup brought back: no master round trip while the lookup's lease
     * is {@link ReadLease#usable() usable}, one after that. {@code dsts} holds {@code blocks * layerGroups} buffers,
     * block by block, layer group within block, each receiving its page at its position (see
     * {@link GranaryClient#getBatchInto}).
     *
     * @return the blocks, from the first, whose every page was read; the engine computes the rest.
     * @throws IllegalArgumentException when {@code blocks} exceeds the lookup's run or the buffer count is wrong.
     */
    public int load(final PrefixLookup lookup, final int blocks, final List<ByteBuffer> dsts)
    {
        checkLoad(lookup, blocks, dsts);
        if (blocks == 0)
        {
            return 0;
        }
        final ReadLease[] leases = lookup.leasesOf(client);
        return loaded(blocks, leases == null ?
            client.getBatchInto(ownKeys(lookup.hashes(), 0, blocks), dsts) :
            client.readBatchInto(Arrays.asList(leases).subList(0, blocks * layout.layerGroups()), dsts));
    }

    /**
     * {@link #load} through the client's async view: every read is in flight when this returns, and the buffers
     * belong to the load until the future completes. Bad arguments throw here; the future fails as {@link #load}
     * would throw.
     */
    public CompletableFuture<Integer> loadAsync(
        final PrefixLookup lookup, final int blocks, final List<ByteBuffer> dsts)
    {
        checkLoad(lookup, blocks, dsts);
        if (blocks == 0)
        {
            return CompletableFuture.completedFuture(0);
        }
        final ReadLease[] leases = lookup.leasesOf(client);
        return (leases == null ?
            client.async().getBatchInto(ownKeys(lookup.hashes(), 0, blocks), dsts) :
            client.async().readBatchInto(Arrays.asList(leases).subList(0, blocks * layout.layerGroups()), dsts))
            .thenApply(results -> loaded(blocks, results));
    }

    private void checkLoad(final PrefixLookup lookup, final int blocks, final List<ByteBuffer> dsts)
    {
        if (blocks < 0 || blocks > lookup.hitBlocks())
        {
            throw new IllegalArgumentException("blocks must be in 0.." + lookup.hitBlocks() + ", was " + blocks);
        }
        final int g = layout.layerGroups();
        if (dsts.size() != blocks * g)
        {
            throw new IllegalArgumentException("load of " + blocks + " blocks needs " + blocks * g + " buffers, got " +
                dsts.size());
        }
    }

    /** The blocks, from the first, whose every page was read; counts them. */
    private int loaded(final int blocks, final List<OpResult<Integer>> results)
    {
        final int g = layout.layerGroups();
        int loaded = 0;
        while (loaded < blocks && allOk(results, loaded * g, g))
        {
            loaded++;
        }
        loadedBlocks.add(loaded);
        failedLoads.add(blocks - loaded);
        return loaded;
    }

    /**
     * Stores this rank's pages of the blocks the lookup did not find ({@code lookup.hitBlocks()} on), one master
     * round trip per phase: {@code values} holds {@code missingBlocks() * layerGroups} pages, block by block. Every
     * page joins its block's eviction group and names the same page of the previous block as its parent; with a
     * soft-pin TTL in the options each is soft pinned. A page another process stored meanwhile counts as stored.
     *
     * @return the blocks whose every page is stored.
     */
    public int save(final PrefixLookup lookup, final List<ByteBuffer> values)
    {
        return save(lookup.hashes(), lookup.hitBlocks(), values);
    }

    /**
     * Stores this rank's pages of the full blocks of {@code tokens[0, length)} from {@code firstBlock} on, as
     * {@link #save(PrefixLookup, List)} does (for an engine that saves without having looked up).
     */
    public int save(final int[] tokens, final int length, final int firstBlock, final List<ByteBuffer> values)
    {
        return save(keys.blockHashes(tokens, length, maxBlocks), firstBlock, values);
    }

    /**
     * {@link #save(PrefixLookup, List)} through the client's async view: every write is in flight when this returns,
     * and the buffers belong to the save until the future completes. Bad arguments throw here; the future fails as
     * {@link #save} would throw.
     */
    public CompletableFuture<Integer> saveAsync(final PrefixLookup lookup, final List<ByteBuffer> values)
    {
        return saveAsync(lookup.hashes(), lookup.hitBlocks(), values);
    }

    /** {@link #save(int[], int, int, List)} through the async view, as {@link #saveAsync(PrefixLookup, List)}. */
    public CompletableFuture<Integer> saveAsync(
        final int[] tokens, final int length, final int firstBlock, final List<ByteBuffer> values)
    {
        return saveAsync(keys.blockHashes(tokens, length, maxBlocks), firstBlock, values);
    }

    private int save(final String[] hashes, final int firstBlock, final List<ByteBuffer> values)
    {
        final PageWrites writes = pageWrites(hashes, firstBlock, values);
        return writes == null ? 0 : saved(writes.blocks, client.putBatch(writes.keys, values, writes.options));
    }

    private CompletableFuture<Integer> saveAsync(
        final String[] hashes, final int firstBlock, final List<ByteBuffer> values)
    {
        final PageWrites writes = pageWrites(hashes, firstBlock, values);
        return writes == null ? CompletableFuture.completedFuture(0) :
            client.async().putBatch(writes.keys, values, writes.options)
                .thenApply(results -> saved(writes.blocks, results));
    }

    /** The keys and options of a save's pages. */
    private record PageWrites(int blocks, List<String> keys, List<PutOptions> options)
    {
    }

    /** What a save of blocks {@code firstBlock..} writes; null when there is nothing to write. */
    private PageWrites pageWrites(final String[] hashes, final int firstBlock, final List<ByteBuffer> values)
    {
        if (firstBlock < 0 || firstBlock > hashes.length)
        {
            throw new IllegalArgumentException("firstBlock must be in 0.." + hashes.length + ", was " + firstBlock);
        }
        final int g = layout.layerGroups();
        final int blocks = hashes.length - firstBlock;
        if (values.size() != blocks * g)
        {
            throw new IllegalArgumentException("save of " + blocks + " blocks needs " + blocks * g + " pages, got " +
                values.size());
        }
        if (blocks == 0)
        {
            return null;
        }
        final List<String> pageKeys = ownKeys(hashes, firstBlock, hashes.length);
        final List<PutOptions> pageOptions = new ArrayList<>(pageKeys.size());
        for (int i = firstBlock; i < hashes.length; i++)
        {
            final PutOptions.Builder block = PutOptions.builder()
                .replicas(options.replicas)
                .groupId(keys.groupId(hashes[i]));
            if (options.softPinTtl != null)
            {
                block.softPin(SoftPinAction.ENABLE, options.softPinTtl);
            }
            for (int l = 0; l < g; l++)
            {
                pageOptions.add(block.parent(i == 0 ? null : keys.objectKey(hashes[i - 1], layout.rank(), l)).build());
            }
        }
        return new PageWrites(blocks, pageKeys, pageOptions);
    }

    /** The blocks whose every page was stored; counts them. */
    private int saved(final int blocks, final List<OpResult<Void>> results)
    {
        final int g = layout.layerGroups();
        int saved = 0;
        for (int b = 0; b < blocks; b++)
        {
            if (allOk(results, b * g, g))
            {
                saved++;
            }
        }
        savedBlocks.add(saved);
        failedSaves.add(blocks - saved);
        return saved;
    }

    /** Counters so far. */
    public PrefixStats stats()
    {
        final long strandedNow = strandedBlocks.sum();
        return new PrefixStats(lookups.sum(), lookedUpBlocks.sum(), hitBlocks.sum(),
            hitBlocks.sum() * layout.tokensPerBlock(), holeChecks.sum(), holes.sum(), strandedNow,
            strandedNow * layout.tokensPerBlock(), loadedBlocks.sum(), failedLoads.sum(), savedBlocks.sum(),
            failedSaves.sum());
    }

    /** Every rank's every page of blocks [from, to), block by block: one probe candidate per block. */
    private List<String> candidateKeys(final String[] hashes, final int from, final int to)
    {
        final List<String> out = new ArrayList<>((to - from) * layout.objectsPerBlock());
        for (int i = from; i < to; i++)
        {
            for (int r = 0; r < layout.worldSize(); r++)
            {
                for (int l = 0; l < layout.layerGroups(); l++)
                {
                    out.add(keys.objectKey(hashes[i], r, l));
                }
            }
        }
        return out;
    }

    /** This rank's pages of blocks [from, to), block by block. */
    private List<String> ownKeys(final String[] hashes, final int from, final int to)
    {
        final List<String> out = new ArrayList<>((to - from) * layout.layerGroups());
        for (int i = from; i < to; i++)
        {
            for (int l = 0; l < layout.layerGroups(); l++)
            {
                out.add(keys.objectKey(hashes[i], layout.rank(), l));
            }
        }
        return out;
    }

    /**
     * The leases of this rank's pages of the first {@code hit} blocks, block by block (their replica lists came with
     * the probe, so {@link #load} needs no lookup of its own); null when a page was not leased.
     */
    private ReadLease[] ownLeases(final List<OpResult<ReadLease>> mask, final int hit)
    {
        final int n = layout.objectsPerBlock();
        final int g = layout.layerGroups();
        final ReadLease[] own = new ReadLease[hit * g];
        for (int i = 0; i < hit; i++)
        {
            for (int l = 0; l < g; l++)
            {
                final OpResult<ReadLease> r = mask.get(i * n + ownMembersFrom() + l);
                if (!leased(r))
                {
                    return null;
                }
                own[i * g + l] = r.value();
            }
        }
        return own;
    }

    private static boolean leased(final OpResult<ReadLease> r)
    {
        return r.ok() && r.value() != null;
    }

    private static boolean marked(final OpResult<Boolean> r)
    {
        return r.ok() && Boolean.TRUE.equals(r.value());
    }

    private static boolean allOk(final List<? extends OpResult<?>> results, final int from, final int count)
    {
        for (int i = from; i < from + count; i++)
        {
            if (!results.get(i).ok())
            {
                return false;
            }
        }
        return true;
    }
}
