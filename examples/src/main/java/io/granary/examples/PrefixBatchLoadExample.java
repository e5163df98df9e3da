package io.granary.examples;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.prefix.PrefixCache;
import io.granary.client.prefix.PrefixLayout;
import io.granary.client.prefix.PrefixLookup;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Batch loading a prefix with the prefix-cache helper: after a prefill, each tensor-parallel rank saves its pages of
 * every block of the prompt ({@link PrefixCache#save}, one batch, one eviction group per block, each page naming its
 * predecessor as parent); a later request with the same prompt start finds the longest stored run of blocks with
 * one lookup (which leases exactly those pages), loads its pages into the engine's buffers, computes the rest and
 * saves only the blocks that were missing. Run against a cluster:
 * {@code java -cp ... io.granary.examples.PrefixBatchLoadExample 127.0.0.1:50051}.
 */
public final class PrefixBatchLoadExample
{
    /** Tokens per KV block. */
    static final int BLOCK_TOKENS = 16;
    /** Tensor-parallel ranks: a block is usable only when every rank's page is stored. */
    static final int RANKS = 2;
    /** Bytes of one rank's page of one block. */
    static final int PAGE_BYTES = 32 * 1024;

    private PrefixBatchLoadExample()
    {
    }

    public static void main(final String[] args)
    {
        final String masterAddress = args.length > 0 ? args[0] : "127.0.0.1:50051";
        final Result result = run(masterAddress);
        System.out.println("stored " + result.storedBlocks() + " blocks; a request sharing the prompt start loads " +
            result.loadedBlocks() + " blocks (" + result.loadedBytes() + " bytes), computes from token " +
            result.loadedBlocks() * BLOCK_TOKENS + " and saves " + result.savedBlocks() + " new blocks");
    }

    /** Blocks stored by the first request; blocks (and bytes) the second one loaded, and the blocks it saved. */
    public record Result(int storedBlocks, int loadedBlocks, long loadedBytes, int savedBlocks)
    {
    }

    /** The tokens of a prompt: the shared system prompt, then the request's own tokens. */
    static int[] prompt(final int blocks, final int ownFrom, final int seed)
    {
        final int[] tokens = new int[blocks * BLOCK_TOKENS + 5]; // a partial last block: never stored
        for (int i = 0; i < tokens.length; i++)
        {
            tokens[i] = i < ownFrom * BLOCK_TOKENS ? 1000 + i : seed * 100_000 + i;
        }
        return tokens;
    }

    /** Stand-ins for the KV pages an engine computed: one per block from {@code fromBlock} on. */
    static List<ByteBuffer> computedPages(final int fromBlock, final int toBlock, final int rank)
    {
        final List<ByteBuffer> pages = new ArrayList<>();
        for (int block = fromBlock; block < toBlock; block++)
        {
            final ByteBuffer page = ByteBuffer.allocateDirect(PAGE_BYTES);
            page.putInt(0, rank << 16 | block); // stands for the KV tensor bytes
            pages.add(page);
        }
        return pages;
    }

    /** Stores a 6-block prefix from both ranks, then serves a 10-block prompt that starts the same way. */
    public static Result run(final String masterAddress)
    {
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(masterAddress).tenant("examples").build()))
        {
            final PrefixLayout layout = PrefixLayout.builder().model("example-model").worldSize(RANKS)
                .layerGroups(1).tokensPerBlock(BLOCK_TOKENS).build();
            final List<PrefixCache> ranks = new ArrayList<>();
            for (int rank = 0; rank < RANKS; rank++)
            {
                ranks.add(new PrefixCache(client, layout.forRank(rank))); // each rank's process has its own
            }

            // First request: the prefill computed 6 blocks; every rank saves its pages of them.
            final int[] first = prompt(6, 6, 1);
            int stored = Integer.MAX_VALUE;
            for (int rank = 0; rank < RANKS; rank++)
            {
                final PrefixCache cache = ranks.get(rank);
                final PrefixLookup miss = cache.lookup(first);
                stored = Math.min(stored, cache.save(miss, computedPages(miss.hitBlocks(), miss.blocks(), rank)));
            }

            // Second request: 10 blocks, the first 6 shared. Each rank looks up, loads its pages of the hit, and
            // after computing the other 4 blocks saves only those.
            final int[] second = prompt(10, 6, 2);
            int loaded = Integer.MAX_VALUE;
            int saved = Integer.MAX_VALUE;
            long bytes = 0;
            for (int rank = 0; rank < RANKS; rank++)
            {
                final PrefixCache cache = ranks.get(rank);
                final PrefixLookup hit = cache.lookup(second);        // one round trip; the run is leased
                final List<ByteBuffer> slots = new ArrayList<>();
                for (int b = 0; b < hit.hitBlocks(); b++)
                {
                    slots.add(ByteBuffer.allocateDirect(PAGE_BYTES)); // the engine's KV buffers
                }
                final int got = cache.load(hit, hit.hitBlocks(), slots);
                for (int b = 0; b < got; b++)
                {
                    bytes += slots.get(b).position();
                }
                loaded = Math.min(loaded, got);
                saved = Math.min(saved, cache.save(hit, computedPages(hit.hitBlocks(), hit.blocks(), rank)));
            }
            return new Result(stored, loaded, bytes, saved);
        }
    }
}
