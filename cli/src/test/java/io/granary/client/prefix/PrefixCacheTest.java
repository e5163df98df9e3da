package io.granary.client.prefix;

import io.granary.cli.LocalCluster;
import io.granary.client.ErrorCode;
import io.granary.client.GranaryClient;
import io.granary.client.GranaryException;
import io.granary.client.internal.GranaryClientImpl;
import io.granary.common.ManualClock;
import io.granary.master.evict.EvictionPolicy;
import io.granary.master.meta.ObjectSnapshot;
import io.granary.transfer.TransferEngines;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The prefix-cache helper against a real in-process cluster (a master with gRPC and the lookup port, one storage
 * node over TCP): lookups lease what they find, loads return the saved bytes, saves write only missing blocks with
 * one group and a parent per page, holes are counted.
 */
class PrefixCacheTest
{
    private static final int TOKENS_PER_BLOCK = 16;
    private static final int PAGE_BYTES = 4096;

    private static LocalCluster cluster;
    private static GranaryClient client;

    private final PrefixLayout rank0 = PrefixLayout.builder().model("test/model").worldSize(2).rank(0)
        .layerGroups(2).tokensPerBlock(TOKENS_PER_BLOCK).build();
    private final PrefixLayout rank1 = rank0.forRank(1);

    @BeforeAll
    static void startCluster()
    {
        cluster = LocalCluster.builder().nodes(1).segmentSizeBytes(64L << 20)
            .masterContext(LocalCluster.defaultMasterContext().evictionPolicy(EvictionPolicy.PREFIX_LEAF_FIRST))
            .start();
        client = cluster.newClient();
    }

    @AfterAll
    static void stopCluster()
    {
        cluster.close();
    }

    private static int[] prompt(final int seed, final int blocks, final int extraTokens)
    {
        final int[] tokens = new int[blocks * TOKENS_PER_BLOCK + extraTokens];
        for (int i = 0; i < tokens.length; i++)
        {
            tokens[i] = seed * 1_000_003 + i;
        }
        return tokens;
    }

    /** A prompt sharing the first {@code shared} blocks with {@code base}, then its own tokens. */
    private static int[] branch(final int[] base, final int shared, final int blocks, final int seed)
    {
        final int[] tokens = prompt(seed, blocks, 0);
        System.arraycopy(base, 0, tokens, 0, shared * TOKENS_PER_BLOCK);
        return tokens;
    }

    /** Pages whose bytes say which rank, block and layer group they are. */
    private static List<ByteBuffer> pages(final int rank, final int fromBlock, final int toBlock, final int groups)
    {
        final List<ByteBuffer> out = new ArrayList<>();
        for (int b = fromBlock; b < toBlock; b++)
        {
            for (int g = 0; g < groups; g++)
            {
                final ByteBuffer page = ByteBuffer.allocateDirect(PAGE_BYTES);
                while (page.hasRemaining())
                {
                    page.putInt(rank << 24 | b << 8 | g);
                }
                out.add(page.flip());
            }
        }
        return out;
    }

    private static List<ByteBuffer> buffers(final int count)
    {
        final List<ByteBuffer> out = new ArrayList<>();
        for (int i = 0; i < count; i++)
        {
            out.add(ByteBuffer.allocateDirect(PAGE_BYTES));
        }
        return out;
    }

    private static ObjectSnapshot query(final String key)
    {
        return cluster.master().store().query("default", key);
    }

    @Test
    void shouldFindNothingThenEverythingBothRanksSaved()
    {
        final PrefixCache c0 = new PrefixCache(client, rank0);
        final PrefixCache c1 = new PrefixCache(client, rank1);
        final int[] tokens = prompt(1, 3, 5);

        final PrefixLookup miss = c0.lookup(tokens);
        assertThat(miss.blocks()).as("the partial last block is not looked up").isEqualTo(3);
        assertThat(miss.hitBlocks()).isZero();

        assertThat(c0.save(miss, pages(0, 0, 3, 2))).isEqualTo(3);
        assertThat(c0.lookup(tokens).hitBlocks()).as("rank 1's pages are still missing").isZero();
        assertThat(c1.save(c1.lookup(tokens), pages(1, 0, 3, 2))).isEqualTo(3);

        final PrefixLookup hit = c1.lookup(tokens);
        assertThat(hit.hitBlocks()).isEqualTo(3);
        assertThat(hit.hitTokens()).isEqualTo(3 * TOKENS_PER_BLOCK);
        assertThat(hit.missingBlocks()).isZero();
        // Every page of the run is leased by the lookup: none can be removed without force.
        final String someKey = c0.keys().objectKey(hit.blockHash(2), 0, 1);
        assertThatThrownBy(() -> client.remove(someKey)).isInstanceOf(GranaryException.class)
            .extracting(ex -> ((GranaryException)ex).code()).isEqualTo(ErrorCode.OBJECT_HAS_LEASE);

        final List<ByteBuffer> dsts = buffers(6);
        final long lookupsBefore = replicaListCalls();
        assertThat(c1.load(hit, 3, dsts)).isEqualTo(3);
        assertThat(replicaListCalls()).as("rank 1's lists came with its lookup").isEqualTo(lookupsBefore);
        for (int b = 0; b < 3; b++)
        {
            for (int g = 0; g < 2; g++)
            {
                final ByteBuffer got = dsts.get(b * 2 + g).flip();
                assertThat(got.remaining()).isEqualTo(PAGE_BYTES);
                assertThat(got.getInt(0)).as("rank 1's own page of block %d group %d", b, g).isEqualTo(1 << 24 | b << 8 | g);
            }
        }
        final PrefixStats stats = c1.stats();
        assertThat(stats.lookups()).isEqualTo(2);
        assertThat(stats.hitBlocks()).isEqualTo(3);
        assertThat(stats.loadedBlocks()).isEqualTo(3);
        assertThat(stats.savedBlocks()).isEqualTo(3);
        assertThat(stats.hitRate()).isEqualTo(0.5);
    }

    @Test
    void shouldStoreOneGroupPerBlockAndNameTheSamePageOfThePreviousBlockAsParent()
    {
        final PrefixLayout one = PrefixLayout.builder().model("groups").layerGroups(2).tokensPerBlock(TOKENS_PER_BLOCK)
            .build();
        final PrefixCache cache = new PrefixCache(client, one, PrefixCache.Options.defaults()
            .softPinTtl(Duration.ofMinutes(5)));
        final long linksBefore = cluster.master().store().parentLinks();
        final int[] tokens = prompt(2, 3, 0);

        assertThat(cache.save(cache.lookup(tokens), pages(0, 0, 3, 2))).isEqualTo(3);

        final String[] hashes = cache.keys().blockHashes(tokens);
        for (int b = 0; b < 3; b++)
        {
            for (int g = 0; g < 2; g++)
            {
                final ObjectSnapshot s = query(cache.keys().objectKey(hashes[b], 0, g));
                assertThat(s).isNotNull();
                assertThat(s.groupId()).isEqualTo(cache.keys().groupId(hashes[b]));
                assertThat(s.softPinned()).isTrue();
            }
        }
        // Blocks 1 and 2 link both their pages to the previous block's pages (counted on its group).
        assertThat(cluster.master().store().parentLinks() - linksBefore).isEqualTo(4);
    }

    @Test
    void shouldWriteOnlyTheBlocksTheLookupDidNotFind()
    {
        final PrefixLayout one = PrefixLayout.builder().model("only-missing").tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache cache = new PrefixCache(client, one);
        final int[] first = prompt(3, 2, 0);
        cache.save(cache.lookup(first), pages(0, 0, 2, 1));
        final int[] longer = branch(first, 2, 5, 33);

        final PrefixLookup lookup = cache.lookup(longer);
        assertThat(lookup.hitBlocks()).isEqualTo(2);
        final long startsBefore = cluster.master().store().putStarts();
        assertThat(cache.save(lookup, pages(0, 2, 5, 1))).isEqualTo(3);

        assertThat(cluster.master().store().putStarts() - startsBefore).isEqualTo(3);
        assertThat(cache.lookup(longer).hitBlocks()).isEqualTo(5);
        assertThatThrownBy(() -> cache.save(lookup, pages(0, 0, 5, 1))).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("needs 3 pages");
    }

    @Test
    void shouldCountHolesAndTheTokensStrandedBehindThem()
    {
        final PrefixLayout one = PrefixLayout.builder().model("holes").tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache cache = new PrefixCache(client, one);
        final int[] tokens = prompt(4, 6, 0);
        cache.save(cache.lookup(tokens), pages(0, 0, 6, 1));
        final String[] hashes = cache.keys().blockHashes(tokens);
        // Blocks 2 and 3 go (forced past their leases); 0, 1, 4, 5 stay.
        client.remove(cache.keys().objectKey(hashes[2], 0, 0), true);
        client.remove(cache.keys().objectKey(hashes[3], 0, 0), true);

        final PrefixLookup lookup = cache.lookup(tokens);
        assertThat(lookup.hitBlocks()).isEqualTo(2);
        final PrefixCache.HoleReport report = cache.checkHoles(lookup);

        assertThat(report.holes()).isEqualTo(2);
        assertThat(report.strandedBlocks()).isEqualTo(2);
        final PrefixStats stats = cache.stats();
        assertThat(stats.holes()).isEqualTo(2);
        assertThat(stats.strandedBlocks()).isEqualTo(2);
        assertThat(stats.recomputedTokens()).isEqualTo(2 * TOKENS_PER_BLOCK);
        assertThat(cache.checkHoles(cache.lookup(prompt(5, 3, 0)))).as("nothing stored behind a miss")
            .isEqualTo(new PrefixCache.HoleReport(0, 0));
    }

    @Test
    void shouldCountHolesAsynchronouslyWhenAsked() throws InterruptedException
    {
        final PrefixLayout one = PrefixLayout.builder().model("async-holes").tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache cache = new PrefixCache(client, one, PrefixCache.Options.defaults().holeChecks(true));
        final int[] tokens = prompt(6, 4, 0);
        final PrefixLookup empty = cache.lookup(tokens); // a lookup of nothing: checked, no holes
        // Its check runs in the background: let it finish before the blocks exist, or it would see them as holes.
        awaitHoleChecks(cache, 1);
        assertThat(cache.stats().holes()).isZero();
        cache.save(empty, pages(0, 0, 4, 1));
        client.remove(cache.keys().objectKey(cache.keys().blockHashes(tokens)[1], 0, 0), true);

        assertThat(cache.lookup(tokens).hitBlocks()).isEqualTo(1);

        awaitHoleChecks(cache, 2);
        assertThat(cache.stats().holeChecks()).isEqualTo(2);
        assertThat(cache.stats().holes()).isEqualTo(1);
        assertThat(cache.stats().strandedBlocks()).isEqualTo(2);
    }

    private static void awaitHoleChecks(final PrefixCache cache, final long checks) throws InterruptedException
    {
        final long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (cache.stats().holeChecks() < checks && System.nanoTime() < deadline)
        {
            Thread.sleep(5);
        }
    }

    @Test
    void shouldLoadOnlyTheRunOfBlocksWhosePagesCouldBeRead()
    {
        final ManualClock clock = new ManualClock();
        try (GranaryClient own =
                 GranaryClientImpl.connect(cluster.clientConfig().build(), TransferEngines::create, clock))
        {
            final PrefixLayout one = PrefixLayout.builder().model("failed-load").layerGroups(2)
                .tokensPerBlock(TOKENS_PER_BLOCK).build();
            final PrefixCache cache = new PrefixCache(own, one);
            final int[] tokens = prompt(7, 3, 0);
            cache.save(cache.lookup(tokens), pages(0, 0, 3, 2));
            final PrefixLookup lookup = cache.lookup(tokens);
            assertThat(lookup.hitBlocks()).isEqualTo(3);
            // A page of block 1 disappears between lookup and load (an operator's forced removal), and the load
            // comes late: less than a second of the lookup's 10 s lease is left, so it looks the pages up again.
            own.remove(cache.keys().objectKey(lookup.blockHash(1), 0, 1), true);
            clock.advance(Duration.ofMillis(9_500));

            assertThat(cache.load(lookup, 3, buffers(6))).isEqualTo(1);
            assertThat(cache.stats().failedLoads()).isEqualTo(2);
            assertThatThrownBy(() -> cache.load(lookup, 4, buffers(8))).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> cache.load(lookup, 2, buffers(3))).isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void shouldLoadWithTheLookupsReplicaListsWhileItsLeaseLasts()
    {
        final PrefixLayout one = PrefixLayout.builder().model("lease-load").layerGroups(2)
            .tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache cache = new PrefixCache(client, one);
        final int[] tokens = prompt(8, 3, 0);
        cache.save(cache.lookup(tokens), pages(0, 0, 3, 2));
        final PrefixLookup lookup = cache.lookup(tokens);
        assertThat(lookup.hitBlocks()).isEqualTo(3);
        // Even a forced removal after the lookup does not take a page from it: the extent stays as it was until
        // the lease ends, and the load reads it there.
        client.remove(cache.keys().objectKey(lookup.blockHash(1), 0, 1), true);

        final long lookupsBefore = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(6);
        assertThat(cache.load(lookup, 3, dsts)).isEqualTo(3);
        assertThat(replicaListCalls()).as("the load asked the master nothing").isEqualTo(lookupsBefore);
        for (int b = 0; b < 3; b++)
        {
            for (int g = 0; g < 2; g++)
            {
                assertThat(dsts.get(b * 2 + g).flip().getInt(0)).isEqualTo(b << 8 | g);
            }
        }
    }

    @Test
    void shouldLookUpLoadAndSaveThroughTheAsyncView() throws Exception
    {
        final PrefixLayout one = PrefixLayout.builder().model("async").layerGroups(2)
            .tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache cache = new PrefixCache(client, one);
        final int[] tokens = prompt(9, 4, 3);

        final PrefixLookup miss = cache.lookupAsync(tokens).get(10, TimeUnit.SECONDS);
        assertThat(miss.blocks()).isEqualTo(4);
        assertThat(miss.hitBlocks()).isZero();
        assertThat(cache.loadAsync(miss, 0, List.of()).get(10, TimeUnit.SECONDS)).isZero();
        assertThat(cache.saveAsync(miss, pages(0, 0, 4, 2)).get(10, TimeUnit.SECONDS)).isEqualTo(4);

        final PrefixLookup hit = cache.lookupAsync(tokens, tokens.length).get(10, TimeUnit.SECONDS);
        assertThat(hit.hitBlocks()).isEqualTo(4);
        final long lookupsBefore = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(8);
        assertThat(cache.loadAsync(hit, 4, dsts).get(10, TimeUnit.SECONDS)).isEqualTo(4);
        assertThat(replicaListCalls()).isEqualTo(lookupsBefore);
        for (int b = 0; b < 4; b++)
        {
            for (int g = 0; g < 2; g++)
            {
                assertThat(dsts.get(b * 2 + g).flip().getInt(0)).isEqualTo(b << 8 | g);
            }
        }
        // A longer prompt saves only its new block, without a lookup.
        final int[] longer = prompt(9, 5, 0);
        assertThat(cache.saveAsync(longer, longer.length, 4, pages(0, 4, 5, 2)).get(10, TimeUnit.SECONDS)).isEqualTo(1);
        assertThat(cache.lookup(longer).hitBlocks()).isEqualTo(5);

        final PrefixStats stats = cache.stats();
        assertThat(stats.lookups()).isEqualTo(3);
        assertThat(stats.loadedBlocks()).isEqualTo(4);
        assertThat(stats.savedBlocks()).isEqualTo(5);
        assertThatThrownBy(() -> cache.loadAsync(hit, 5, buffers(10))).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> cache.saveAsync(miss, pages(0, 0, 1, 2))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldLoadALookupOfAnotherClientByLookingItsPagesUp()
    {
        final PrefixLayout one = PrefixLayout.builder().model("other-client").layerGroups(2)
            .tokensPerBlock(TOKENS_PER_BLOCK).build();
        final PrefixCache mine = new PrefixCache(client, one);
        final PrefixCache theirs = new PrefixCache(cluster.newClient(), one);
        final int[] tokens = prompt(10, 2, 0);
        mine.save(mine.lookup(tokens), pages(0, 0, 2, 2));
        final PrefixLookup lookup = mine.lookup(tokens);

        final long lookupsBefore = replicaListCalls();
        final List<ByteBuffer> dsts = buffers(4);
        assertThat(theirs.load(lookup, 2, dsts)).as("another client cannot use these leases").isEqualTo(2);
        assertThat(replicaListCalls()).isEqualTo(lookupsBefore + 1);
        assertThat(dsts.get(3).flip().getInt(0)).isEqualTo(1 << 8 | 1);
    }

    /** BatchGetReplicaList calls the master served so far, over either transport. */
    private static long replicaListCalls()
    {
        return cluster.masterCalls("BatchGetReplicaList");
    }

    @Test
    void shouldKeepSharedPrefixesAndEvictBranchesFromTheirEnds()
    {
        // A cluster of its own: a 16 MiB pool of 4 KiB pages, prefix-leaf-first, filled far past its capacity with
        // branches of one shared root.
        try (LocalCluster small = LocalCluster.builder().nodes(1).segmentSizeBytes(16L << 20)
            .masterContext(LocalCluster.defaultMasterContext().evictionPolicy(EvictionPolicy.PREFIX_LEAF_FIRST))
            .start())
        {
            final PrefixCache cache = new PrefixCache(small.newClient(),
                PrefixLayout.builder().model("branches").tokensPerBlock(TOKENS_PER_BLOCK).build());
            assertThat(fillWithBranches(small, cache, 100)).isZero();
            assertThat(small.master().evictor().prefixBreaks()).isZero();
        }
    }

    @Test
    void shouldLeaveHolesInTheSameFillUnderOldestLease()
    {
        // The contrast that shows the test above can fail: a branch's head is a little older than its tail. Holes
        // remain where the last eviction round stopped inside a branch (4-55 in 40 runs of one fill); two fills, so
        // that both rounds stopping exactly between branches (the rare run that found none) does not hide them.
        try (LocalCluster small = LocalCluster.builder().nodes(1).segmentSizeBytes(16L << 20)
            .masterContext(LocalCluster.defaultMasterContext().evictionPolicy(EvictionPolicy.OLDEST_LEASE))
            .start())
        {
            final PrefixCache cache = new PrefixCache(small.newClient(),
                PrefixLayout.builder().model("branches").tokensPerBlock(TOKENS_PER_BLOCK).build());
            assertThat(fillWithBranches(small, cache, 100) + fillWithBranches(small, cache, 1000)).isPositive();
            assertThat(small.master().evictor().prefixBreaks()).isPositive();
        }
    }

    /**
     * Saves 250 branches of 46 blocks (seeds {@code firstSeed} on) behind one 4-block root, then returns the holes
     * found in all of them.
     */
    private static long fillWithBranches(final LocalCluster small, final PrefixCache cache, final int firstSeed)
    {
        final int[] root = prompt(8, 4, 0);
        final PrefixLookup rootLookup = cache.lookup(root);
        cache.save(rootLookup, pages(0, rootLookup.hitBlocks(), 4, 1)); // a second fill finds it stored
        final List<int[]> branches = new ArrayList<>();
        for (int i = 0; i < 250; i++)
        {
            final int[] tokens = branch(root, 4, 50, firstSeed + i);
            branches.add(tokens);
            final PrefixLookup lookup = cache.lookup(tokens);
            assertThat(lookup.hitBlocks()).as("branch %d shares the root", i).isEqualTo(4);
            cache.save(lookup, pages(0, lookup.hitBlocks(), 50, 1));
        }
        assertThat(small.master().evictor().evictedObjects(0)).as("the pool overflowed").isPositive();
        long holes = 0;
        for (final int[] tokens : branches)
        {
            final PrefixLookup lookup = cache.lookup(tokens);
            assertThat(lookup.hitBlocks()).as("the shared root stays").isGreaterThanOrEqualTo(4);
            holes += cache.checkHoles(lookup).holes();
        }
        return holes;
    }
}
