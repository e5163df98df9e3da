package io.granary.client.prefix;

import java.util.Objects;

/**
 * Where an engine's KV blocks live in the store: the model, the tensor-parallel world and this process's rank
 * in it, how many objects (layer groups) each rank writes per block, the tokens per block, and an optional salt
 * that keeps otherwise equal prompts apart (a LoRA adapter, a multimodal input, a per-tenant cache salt).
 * Immutable; see {@link PrefixKeys} for the key format it defines.
 */
public final class PrefixLayout
{
    /** Most characters of a model name. */
    public static final int MAX_MODEL_LENGTH = 256;

    private final String model;
    private final int worldSize;
    private final int rank;
    private final int layerGroups;
    private final int tokensPerBlock;
    private final String salt;

    private PrefixLayout(final Builder b)
    {
        this.model = b.model;
        this.worldSize = b.worldSize;
        this.rank = b.rank;
        this.layerGroups = b.layerGroups;
        this.tokensPerBlock = b.tokensPerBlock;
        this.salt = b.salt;
    }

    public static Builder builder()
    {
        return new Builder();
    }

    public Builder toBuilder()
    {
        return new Builder().model(model).worldSize(worldSize).rank(rank).layerGroups(layerGroups)
            .tokensPerBlock(tokensPerBlock).salt(salt);
    }

    public String model()
    {
        return model;
    }

    /** Tensor-parallel ranks that each hold a shard of every block. */
    public int worldSize()
    {
        return worldSize;
    }

    /** This process's rank, 0..worldSize-1: the objects it saves and loads. */
    public int rank()
    {
        return rank;
    }

    /** Objects each rank writes per block (e.g. one per group of layers). */
    public int layerGroups()
    {
        return layerGroups;
    }

    public int tokensPerBlock()
    {
        return tokensPerBlock;
    }

    /** The salt mixed into the first block's hash; empty for none. */
    public String salt()
    {
        return salt;
    }

    /** Objects that make one block whole: every rank's every layer group. */
    public int objectsPerBlock()
    {
        return worldSize * layerGroups;
    }

    /** The same layout seen from another rank (to name or check that rank's objects). */
    public PrefixLayout forRank(final int otherRank)
    {
        return toBuilder().rank(otherRank).build();
    }

    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof PrefixLayout))
        {
            return false;
        }
        final PrefixLayout other = (PrefixLayout)o;
        return worldSize == other.worldSize && rank == other.rank && layerGroups == other.layerGroups &&
            tokensPerBlock == other.tokensPerBlock && model.equals(other.model) && salt.equals(other.salt);
    }

    @Override
    public int hashCode()
    {
        return Objects.hash(model, worldSize, rank, layerGroups, tokensPerBlock, salt);
    }

    @Override
    public String toString()
    {
        return "PrefixLayout[model=" + model + ", world=" + worldSize + ", rank=" + rank + ", layerGroups=" +
            layerGroups + ", tokensPerBlock=" + tokensPerBlock + (salt.isEmpty() ? "" : ", salted") + "]";
    }

    /** Fluent builder; {@link #build()} validates. Not thread safe. */
    public static final class Builder
    {
        private String model;
        private int worldSize = 1;
        private int rank;
        private int layerGroups = 1;
        private int tokensPerBlock = 512;
        private String salt = "";

        private Builder()
        {
        }

        /** The model name (any text; characters outside {@code [A-Za-z0-9._-]} are percent-encoded in keys). */
        public Builder model(final String model)
        {
            this.model = model;
            return this;
        }

        public Builder worldSize(final int worldSize)
        {
            this.worldSize = worldSize;
            return this;
        }

        public Builder rank(final int rank)
        {
            this.rank = rank;
            return this;
        }

        public Builder layerGroups(final int layerGroups)
        {
            this.layerGroups = layerGroups;
            return this;
        }

        /** Default 512. */
        public Builder tokensPerBlock(final int tokensPerBlock)
        {
            this.tokensPerBlock = tokensPerBlock;
            return this;
        }

        /** Null or empty for none. */
        public Builder salt(final String salt)
        {
            this.salt = salt == null ? "" : salt;
            return this;
        }

        /** @throws IllegalArgumentException naming the bad setting. */
        public PrefixLayout build()
        {
            if (model == null || model.isEmpty() || model.length() > MAX_MODEL_LENGTH)
            {
                throw new IllegalArgumentException(
                    "model must be 1.." + MAX_MODEL_LENGTH + " characters, was " + (model == null ? "null" :
                    model.length() + " characters"));
            }
            if (worldSize < 1 || worldSize > 65_536)
            {
                throw new IllegalArgumentException("worldSize must be in 1..65536, was " + worldSize);
            }
            if (rank < 0 || rank >= worldSize)
            {
                throw new IllegalArgumentException("rank must be in 0.." + (worldSize - 1) + ", was " + rank);
            }
            if (layerGroups < 1 || layerGroups > 65_536)
            {
                throw new IllegalArgumentException("layerGroups must be in 1..65536, was " + layerGroups);
            }
            if ((long)worldSize * layerGroups > 65_536)
            {
                throw new IllegalArgumentException("worldSize x layerGroups must be at most 65536 objects per block, was " +
                    (long)worldSize * layerGroups);
            }
            if (tokensPerBlock < 1)
            {
                throw new IllegalArgumentException("tokensPerBlock must be positive, was " + tokensPerBlock);
            }
            return new PrefixLayout(this);
        }
    }
}
