package io.granary.examples;

import io.granary.client.ClientConfig;
import io.granary.client.GranaryClient;
import io.granary.client.LeasePolicy;
import io.granary.client.OpResult;
import io.granary.client.ReadLease;
import io.granary.client.prefix.PrefixCache;
import io.granary.client.prefix.PrefixLayout;
import io.granary.client.prefix.PrefixLookup;
import io.granary.client.prefix.PrefixStats;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The prefix-cache lookup an inference engine does before a prefill, two ways. With raw probes: ask in one round
 * trip which checkpoint (a token position whose KV pages are stored for every tensor-parallel rank) is the last
 * complete one, lease exactly its pages, and load them. With the prefix-cache helper ({@link PrefixCache}): the
 * same shape of stored pages in blocks built from token ids, looked up as the longest run of whole blocks, with the
 * hole behind it counted. The engine then computes only the tokens after what it loaded.
 * Run against a cluster: {@code java -cp ... io.granary.examples.PrefixLookupExample 127.0.0.1:50051}.
 */
public final class PrefixLookupExample
{
    /** Token positions at which the engine stores KV: every 128 tokens. */
    static final int[] CHECKPOINTS = {128, 256, 384};
    /** Tensor-parallel ranks; a checkpoint is usable only when every rank's page is there. */
    static final int RANKS = 2;

    private PrefixLookupExample()
    {
    }

    public static void main(final String[] args)
    {
        final String masterAddress = args.length > 0 ? args[0] : "127.0.0.1:50051";
        final Result result = run(masterAddress);
        System.out.println(result.resumeFromToken > 0 ?
            "resume the prefill from token " + result.resumeFromToken + " (loaded " + result.loadedBytes + " bytes)" :
            "no cached prefix: compute the whole prompt");
        final HelperResult helper = runWithHelper(masterAddress);
        System.out.println("with the prefix-cache helper: " + helper.hitTokens() + " tokens reusable, " +
            helper.holes() + " hole(s), " + helper.recomputedTokens() + " stored tokens behind them recomputed");
    }

    /** What the lookup found: the token to resume from (0 for none) and the KV bytes loaded. */
    public record Result(int resumeFromToken, long loadedBytes, List<Boolean> mask)
    {
    }

    /** What the helper's lookup found: reusable tokens, and the holes and stranded tokens behind them. */
    public record HelperResult(int hitTokens, long holes, long recomputedTokens)
    {
    }

    /**
     * The canonical shape in blocks of 128 tokens: block 0 stored by both ranks, block 1 by rank 1 only (rank 0's page
     * was evicted), block 2 by both. The lookup finds block 0; block 1 is a hole and block 2, stored, is recomputed.
     */
    public static HelperResult runWithHelper(final String masterAddress)
    {
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(masterAddress)
            .tenant("examples")
            .build()))
        {
            final PrefixLayout layout = PrefixLayout.builder().model("example-lookup").worldSize(RANKS)
                .tokensPerBlock(128).build();
            final int[] tokens = new int[3 * 128 + 40];
            for (int i = 0; i < tokens.length; i++)
            {
                tokens[i] = 7 * i + 3;
            }
            for (int rank = 0; rank < RANKS; rank++)
            {
                final PrefixCache cache = new PrefixCache(client, layout.forRank(rank));
                final List<ByteBuffer> pages = new ArrayList<>();
                for (int block = 0; block < 3; block++)
                {
                    pages.add(ByteBuffer.wrap(("KV page block " + block + " rank " + rank).getBytes(StandardCharsets.UTF_8)));
                }
                cache.save(tokens, tokens.length, 0, pages);
            }
            final PrefixCache rank0 = new PrefixCache(client, layout);
            client.remove(rank0.keys().objectKey(rank0.keys().blockHashes(tokens)[1], 0, 0));

            final PrefixLookup lookup = rank0.lookup(tokens); // leases block 0's two pages
            rank0.checkHoles(lookup);
            final PrefixStats stats = rank0.stats();
            return new HelperResult(lookup.hitTokens(), stats.holes(), stats.recomputedTokens());
        }
    }

    /** Stores the canonical example's pages, then looks the prefix up. */
    public static Result run(final String masterAddress)
    {
        try (GranaryClient client = GranaryClient.connect(ClientConfig.builder()
            .masterAddress(masterAddress)
            .tenant("examples")
            .build()))
        {
            final String prompt = "prompt-7f3a";
            // What earlier requests left behind: checkpoint 128 on both ranks, 256 on rank 1 only,
            // 384 on rank 0 only (the other pages were evicted or never written).
            store(client, key(prompt, 128, 0));
            store(client, key(prompt, 128, 1));
            store(client, key(prompt, 256, 1));
            store(client, key(prompt, 384, 0));
            return lookUp(client, prompt);
        }
    }

    /**
     * The lookup itself: one probe over every candidate, which also brings back where the chosen candidate's pages
     * are, then one batch read of them that asks the master nothing more.
     */
    static Result lookUp(final GranaryClient client, final String prompt)
    {
        // Candidates in increasing position, RANKS keys each.
        final List<String> keys = new ArrayList<>();
        for (final int position : CHECKPOINTS)
        {
            for (int rank = 0; rank < RANKS; rank++)
            {
                keys.add(key(prompt, position, rank));
            }
        }
        // LAST_HIT_ONLY leases the members of the last complete candidate only, so they cannot be evicted
        // between this probe and the read below, and nothing else is pinned by the lookup.
        final List<OpResult<ReadLease>> probe = client.probeBatchForRead(keys, LeasePolicy.lastHitOnly(RANKS));
        final List<Boolean> mask = new ArrayList<>();
        final List<ReadLease> selected = new ArrayList<>();
        final List<ByteBuffer> pages = new ArrayList<>();
        int resumeFrom = 0;
        for (int i = 0; i < keys.size(); i++)
        {
            final boolean hit = probe.get(i).ok() && probe.get(i).value() != null;
            mask.add(hit);
            if (hit)
            {
                selected.add(probe.get(i).value());
                pages.add(ByteBuffer.allocateDirect((int)probe.get(i).value().length())); // the engine's KV slot
                resumeFrom = CHECKPOINTS[i / RANKS];
            }
        }
        long loaded = 0;
        if (!selected.isEmpty())
        {
            for (final OpResult<Integer> page : client.readBatchInto(selected, pages))
            {
                loaded += page.value();
            }
        }
        return new Result(resumeFrom, loaded, mask);
    }

    static String key(final String prompt, final int position, final int rank)
    {
        return "kv/" + prompt + "/tokens-" + position + "/rank-" + rank;
    }

    private static void store(final GranaryClient client, final String key)
    {
        client.put(key, ("KV page " + key).getBytes(StandardCharsets.UTF_8));
    }
}
