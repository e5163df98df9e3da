package io.granary.examples;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.PutOptions;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Batch loading a prefix: after a prefill the engine stores the KV pages of every block of the prompt (one page per
 * tensor-parallel rank) in one {@code putBatch}; a later request with the same prompt start finds the longest stored
 * run of blocks with one {@code LONGEST_PREFIX} probe (which leases exactly those pages) and loads them with one
 * {@code getBatch}. Run against a cluster: {@code java -cp ... io.granary.examples.PrefixBatchLoadExample
 * 127.0.0.1:50051}.
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
            result.loadedBlocks() + " blocks (" + result.loadedBytes() + " bytes) and computes from token " +
            result.loadedBlocks() * BLOCK_TOKENS);
    }

    /** Blocks stored by the first request, blocks (and bytes) the second one loaded. */
    public record Result(int storedBlocks, int loadedBlocks, long loadedBytes)
    {
    }

    /** The key of one rank's page of block {@code block} of prompt {@code prompt}. */
    static String key(final String prompt, final int block, final int rank)
    {
        return "prefix/" + prompt + "/block-" + block + "/rank-" + rank;
    }

    /** Candidate keys in block order, all ranks of a block together: the probe's candidates are blocks. */
    static List<String> keys(final String prompt, final int blocks)
    {
        final List<String> keys = new ArrayList<>(blocks * RANKS);
        for (int block = 0; block < blocks; block++)
        {
            for (int rank = 0; rank < RANKS; rank++)
            {
                keys.add(key(prompt, block, rank));
            }
        }
        return keys;
    }

    /** Stores a 6-block prefix, then looks up a 10-block prompt that starts the same way. */
    public static Result run(final String masterAddress)
    {
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(masterAddress).tenant("examples").build()))
        {
            final String prompt = "system-prompt-9c1e";

            // First request: prefill computed 6 blocks; store every page in one batch, grouped per block.
            final int computed = 6;
            final List<String> storeKeys = keys(prompt, computed);
            final List<ByteBuffer> pages = new ArrayList<>(storeKeys.size());
            for (int i = 0; i < storeKeys.size(); i++)
            {
                final ByteBuffer page = ByteBuffer.allocateDirect(PAGE_BYTES);
                page.putInt(0, i); // stands for the KV tensor bytes
                pages.add(page);
            }
            int stored = 0;
            final List<OpResult<Void>> puts = client.putBatch(storeKeys, pages, PutOptions.defaults());
            for (int block = 0; block < computed; block++)
            {
                boolean all = true;
                for (int rank = 0; rank < RANKS; rank++)
                {
                    all &= puts.get(block * RANKS + rank).ok();
                }
                stored += all ? 1 : 0;
            }

            // Second request: 10 blocks of prompt; find and lease the longest stored run from the start.
            final List<String> wanted = keys(prompt, 10);
            final List<OpResult<Boolean>> mask = client.probeBatch(wanted, LeasePolicy.longestPrefix(RANKS));
            final List<String> hits = new ArrayList<>();
            for (int i = 0; i < wanted.size() && mask.get(i).ok() && mask.get(i).value(); i++)
            {
                hits.add(wanted.get(i));
            }
            long bytes = 0;
            for (final OpResult<byte[]> page : client.getBatch(hits))
            {
                bytes += page.ok() ? page.value().length : 0;
            }
            return new Result(stored, hits.size() / RANKS, bytes);
        }
    }
}
