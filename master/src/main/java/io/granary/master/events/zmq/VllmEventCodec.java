package io.granary.master.events.zmq;

import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * Encodes KV events as vLLM's {@code KVEventBatch} in msgpack, the positional ("array_like") layout that vLLM's
 * msgspec structs and Dynamo's decoder read: a batch is {@code [ts, [event...], data_parallel_rank]}; events are
 * tagged arrays {@code ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 * lora_name, extra_keys]}, {@code ["BlockRemoved", block_hashes, medium]} and {@code ["AllBlocksCleared"]}. A
 * Granary key is one block: its hash is {@link #blockHash}, and {@code extra_keys} carries
 * {@code [[tenant, key, group]]} so that a consumer can tell which key a hash stands for. One instance per thread.
 */
public final class VllmEventCodec
{
    static final String BLOCK_STORED = "BlockStored";
    static final String BLOCK_REMOVED = "BlockRemoved";
    static final String ALL_BLOCKS_CLEARED = "AllBlocksCleared";

    private final MessageDigest sha256;

    public VllmEventCodec()
    {
        try
        {
            sha256 = MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is part of every JDK", ex);
        }
    }

    /**
     * The 64-bit block hash of a key: the first 8 bytes, big-endian, of SHA-256(tenant UTF-8, 0x00, key UTF-8), as a
     * signed msgpack int64.
     */
    public long blockHash(final String tenant, final byte[] key)
    {
        sha256.reset();
        sha256.update(tenant.getBytes(StandardCharsets.UTF_8));
        sha256.update((byte)0);
        sha256.update(key);
        final byte[] digest = sha256.digest();
        long h = 0;
        for (int i = 0; i < 8; i++)
        {
            h = (h << 8) | (digest[i] & 0xFF);
        }
        return h;
    }

    /** A batch being written: events are added with the methods below, then {@link #finish()}. */
    public final class Batch
    {
        private final java.util.List<byte[]> encoded = new java.util.ArrayList<>();
        private final double timestampSeconds;

        Batch(final double timestampSeconds)
        {
            this.timestampSeconds = timestampSeconds;
        }

        public int size()
        {
            return encoded.size();
        }

        /** @param parentKeyOrNull the key (same tenant) of the object this one continues: its parent_block_hash. */
        public Batch stored(final String tenant, final byte[] key, final String groupOrNull, final byte[] parentKeyOrNull)
        {
            try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker())
            {
                p.packArrayHeader(9);
                p.packString(BLOCK_STORED);
                p.packArrayHeader(1).packLong(blockHash(tenant, key));
                if (parentKeyOrNull == null)
                {
                    p.packNil();                  // parent_block_hash: none
                }
                else
                {
                    p.packLong(blockHash(tenant, parentKeyOrNull));
                }
                p.packArrayHeader(0);             // token_ids: Granary does not know the tokens
                p.packInt(0);                     // block_size
                p.packNil();                      // lora_id
                p.packString(io.granary.master.events.EventJournal.MEDIUM);
                p.packNil();                      // lora_name
                p.packArrayHeader(1).packArrayHeader(3)   // extra_keys: one entry for the one block
                    .packString(tenant)
                    .packString(new String(key, StandardCharsets.UTF_8))
                    .packString(groupOrNull == null ? "" : groupOrNull);
                encoded.add(p.toByteArray());
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
            return this;
        }

        public Batch removed(final String tenant, final byte[] key)
        {
            try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker())
            {
                p.packArrayHeader(3);
                p.packString(BLOCK_REMOVED);
                p.packArrayHeader(1).packLong(blockHash(tenant, key));
                p.packString(io.granary.master.events.EventJournal.MEDIUM);
                encoded.add(p.toByteArray());
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
            return this;
        }

        public Batch allCleared()
        {
            try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker())
            {
                p.packArrayHeader(1);
                p.packString(ALL_BLOCKS_CLEARED);
                encoded.add(p.toByteArray());
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
            return this;
        }

        /** The msgpack bytes of the whole batch. */
        public byte[] finish()
        {
            try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker())
            {
                p.packArrayHeader(3);
                p.packDouble(timestampSeconds);
                p.packArrayHeader(encoded.size());
                for (final byte[] e : encoded)
                {
                    p.writePayload(e);
                }
                p.packNil(); // data_parallel_rank
                return p.toByteArray();
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException(ex);
            }
        }
    }

    /** Starts a batch stamped with {@code epochMillis} (vLLM's {@code ts} is float seconds). */
    public Batch batch(final long epochMillis)
    {
        return new Batch(epochMillis / 1000.0);
    }
}
