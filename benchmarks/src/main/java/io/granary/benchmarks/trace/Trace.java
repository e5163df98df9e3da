package io.granary.benchmarks.trace;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A request trace with prefix-block hashes in the Mooncake FAST'25 format (one JSON object a line:
 * {@code timestamp}, {@code input_length}, {@code output_length}, {@code hash_ids}; each hash id one 512-token
 * block, equal ids the same reusable block, a block reusable only if every block before it is). Keeps, per request,
 * the ids of its full blocks only: engines never store the partial last block. Immutable after loading.
 */
public final class Trace
{
    /** Tokens per block of the traces. */
    public static final int TOKENS_PER_BLOCK = 512;

    private final String name;
    private final int[][] requests;
    private final int uniqueBlocks;
    private final long blockReferences;

    private Trace(final String name, final int[][] requests)
    {
        this.name = name;
        this.requests = requests;
        final Map<Integer, Boolean> seen = new HashMap<>();
        long refs = 0;
        for (final int[] r : requests)
        {
            for (final int id : r)
            {
                seen.put(id, Boolean.TRUE);
            }
            refs += r.length;
        }
        this.uniqueBlocks = seen.size();
        this.blockReferences = refs;
    }

    /** The first {@code maxRequests} requests of a trace file (all of them when it has fewer). */
    public static Trace load(final Path file, final int maxRequests) throws IOException
    {
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8))
        {
            return read(file.getFileName().toString(), in, maxRequests);
        }
    }

    /** Reads up to {@code maxRequests} lines. @throws IOException naming the line that does not parse. */
    public static Trace read(final String name, final Reader reader, final int maxRequests) throws IOException
    {
        final BufferedReader in = reader instanceof BufferedReader ? (BufferedReader)reader : new BufferedReader(reader);
        final List<int[]> requests = new ArrayList<>();
        String line;
        int lineNo = 0;
        while (requests.size() < maxRequests && (line = in.readLine()) != null)
        {
            lineNo++;
            if (line.isBlank())
            {
                continue;
            }
            try
            {
                requests.add(parse(line));
            }
            catch (final RuntimeException ex)
            {
                throw new IOException(name + " line " + lineNo + ": " + ex.getMessage(), ex);
            }
        }
        return new Trace(name, requests.toArray(new int[0][]));
    }

    /** The full blocks of one line: the first {@code input_length / 512} hash ids. */
    static int[] parse(final String line)
    {
        final long inputLength = number(line, "\"input_length\"");
        final int open = line.indexOf('[', field(line, "\"hash_ids\""));
        final int close = line.indexOf(']', open);
        if (open < 0 || close < 0)
        {
            throw new IllegalArgumentException("hash_ids is not a list");
        }
        final String body = line.substring(open + 1, close).trim();
        final String[] parts = body.isEmpty() ? new String[0] : body.split(",");
        final int full = (int)Math.min(parts.length, inputLength / TOKENS_PER_BLOCK);
        final int[] ids = new int[full];
        for (int i = 0; i < full; i++)
        {
            ids[i] = Integer.parseInt(parts[i].trim());
            if (ids[i] < 0 || ids[i] > Integer.MAX_VALUE / TOKENS_PER_BLOCK)
            {
                throw new IllegalArgumentException("hash id out of range: " + ids[i]);
            }
        }
        return ids;
    }

    private static int field(final String line, final String quotedName)
    {
        final int at = line.indexOf(quotedName);
        if (at < 0)
        {
            throw new IllegalArgumentException("no " + quotedName + " field");
        }
        return at + quotedName.length();
    }

    private static long number(final String line, final String quotedName)
    {
        int i = line.indexOf(':', field(line, quotedName)) + 1;
        while (i < line.length() && line.charAt(i) == ' ')
        {
            i++;
        }
        int j = i;
        while (j < line.length() && Character.isDigit(line.charAt(j)))
        {
            j++;
        }
        if (j == i)
        {
            throw new IllegalArgumentException(quotedName + " is not a number");
        }
        return Long.parseLong(line.substring(i, j));
    }

    public String name()
    {
        return name;
    }

    public int requestCount()
    {
        return requests.length;
    }

    /** The full-block ids of request {@code i}, in prefix order (not copied: do not change). */
    public int[] request(final int i)
    {
        return requests[i];
    }

    /** Distinct full blocks: the working set a pool would need to hold everything. */
    public int uniqueBlocks()
    {
        return uniqueBlocks;
    }

    /** Full blocks summed over all requests. */
    public long blockReferences()
    {
        return blockReferences;
    }

    /** The most any cache can reuse: every reference but the first of each block. */
    public double maxReuse()
    {
        return blockReferences == 0 ? 0 : 1.0 - (double)uniqueBlocks / blockReferences;
    }

    /**
     * Token ids standing for a request's blocks: token j of block id h is {@code h * 512 + j}, so equal ids give
     * equal tokens and, through the chained hash, equal keys exactly when their prefixes are equal.
     */
    public static int[] tokens(final int[] blockIds)
    {
        final int[] tokens = new int[blockIds.length * TOKENS_PER_BLOCK];
        for (int b = 0; b < blockIds.length; b++)
        {
            final int base = blockIds[b] * TOKENS_PER_BLOCK;
            for (int j = 0; j < TOKENS_PER_BLOCK; j++)
            {
                tokens[b * TOKENS_PER_BLOCK + j] = base + j;
            }
        }
        return tokens;
    }

    @Override
    public String toString()
    {
        return name + ": " + requests.length + " requests, " + uniqueBlocks + " unique blocks, " + blockReferences +
            " block references" + (requests.length == 0 ? "" : ", first " + Arrays.toString(
            Arrays.copyOf(requests[0], Math.min(3, requests[0].length))));
    }
}
