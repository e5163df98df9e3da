package io.granary.client.prefix;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The documented, versioned key format (docs/api.md), checked against an independent computation. */
class PrefixKeysTest
{
    private static final PrefixLayout LAYOUT = PrefixLayout.builder()
        .model("meta-llama/Llama-3.1-8B").worldSize(2).rank(1).layerGroups(3).tokensPerBlock(4).build();

    private static String sha256Hex(final byte[]... parts) throws Exception
    {
        final MessageDigest d = MessageDigest.getInstance("SHA-256");
        for (final byte[] p : parts)
        {
            d.update(p);
        }
        return HexFormat.of().formatHex(d.digest());
    }

    private static byte[] littleEndian(final int... tokens)
    {
        final ByteBuffer b = ByteBuffer.allocate(tokens.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (final int t : tokens)
        {
            b.putInt(t);
        }
        return b.array();
    }

    @Test
    void shouldChainSha256OverTheSeedAndLittleEndianTokens() throws Exception
    {
        final PrefixKeys keys = new PrefixKeys(LAYOUT);
        final int[] tokens = {1, 2, 3, 4, 5, 6, 7, -8, 9, 10};

        final String[] hashes = keys.blockHashes(tokens);

        final byte[] seed = HexFormat.of().parseHex(sha256Hex("granary-prefix-v1\u0000".getBytes(StandardCharsets.US_ASCII)));
        final String h0 = sha256Hex(seed, littleEndian(1, 2, 3, 4));
        final String h1 = sha256Hex(HexFormat.of().parseHex(h0), littleEndian(5, 6, 7, -8));
        assertThat(hashes).containsExactly(h0, h1); // the partial third block has no key
        assertThat(h0).hasSize(64).matches("[0-9a-f]{64}");
    }

    @Test
    void shouldNameObjectsGroupsAndTheModelAsDocumented()
    {
        final PrefixKeys keys = new PrefixKeys(LAYOUT);
        final String h = "ab".repeat(32);

        assertThat(keys.objectKey(h, 1, 2)).isEqualTo("kv1/meta-llama%2FLlama-3.1-8B/w2/r1/g2/" + h);
        assertThat(keys.objectKey(h, 0, 0)).isEqualTo("kv1/meta-llama%2FLlama-3.1-8B/w2/r0/g0/" + h);
        assertThat(keys.groupId(h)).isEqualTo("kv1/meta-llama%2FLlama-3.1-8B/w2/" + h);
        assertThat(PrefixKeys.encodeModel("Qwen 2.5 ü")).isEqualTo("Qwen%202.5%20%C3%BC");
        assertThat(keys.objectKey(h, 0, 0)).matches(keys.modelRegex());
        assertThat("kv1/other/w2/r0/g0/" + h).doesNotMatch(keys.modelRegex());
        assertThatThrownBy(() -> keys.objectKey(h, 2, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> keys.objectKey(h, 0, 3)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldGiveEqualPrefixesEqualKeysAndDivergeForEverLaterBlock()
    {
        final PrefixKeys keys = new PrefixKeys(LAYOUT);
        final String[] a = keys.blockHashes(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
        final String[] b = keys.blockHashes(new int[] {1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12});

        assertThat(a[0]).isEqualTo(b[0]);
        assertThat(a[1]).isNotEqualTo(b[1]);
        assertThat(a[2]).as("same tokens after a different block").isNotEqualTo(b[2]);
    }

    @Test
    void shouldSeparateSaltsAndBlockSizes()
    {
        final int[] tokens = {1, 2, 3, 4, 5, 6, 7, 8};
        final String plain = new PrefixKeys(LAYOUT).blockHashes(tokens)[0];
        final String salted = new PrefixKeys(LAYOUT.toBuilder().salt("lora:7").build()).blockHashes(tokens)[0];
        final String wider = new PrefixKeys(LAYOUT.toBuilder().tokensPerBlock(8).build()).blockHashes(tokens)[0];

        assertThat(salted).isNotEqualTo(plain);
        assertThat(wider).isNotEqualTo(plain);
        assertThat(new PrefixKeys(LAYOUT.toBuilder().salt("").build()).blockHashes(tokens)[0]).isEqualTo(plain);
        assertThat(new PrefixKeys(LAYOUT.forRank(0)).blockHashes(tokens)[0]).as("rank is not hashed").isEqualTo(plain);
    }

    @Test
    void shouldHashOnlyTheFirstLengthTokensAndAtMostMaxBlocks()
    {
        final PrefixKeys keys = new PrefixKeys(LAYOUT);
        final int[] tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

        assertThat(keys.blockHashes(tokens, 7, Integer.MAX_VALUE)).hasSize(1);
        assertThat(keys.blockHashes(tokens, 12, 2)).containsExactly(keys.blockHashes(tokens, 8, 9));
        assertThat(keys.blockHashes(tokens, 3, 5)).isEmpty();
        assertThatThrownBy(() -> keys.blockHashes(tokens, 13, 1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shouldRefuseImpossibleLayouts()
    {
        assertThatThrownBy(() -> PrefixLayout.builder().build()).hasMessageContaining("model");
        assertThatThrownBy(() -> PrefixLayout.builder().model("m").worldSize(0).build()).hasMessageContaining("worldSize");
        assertThatThrownBy(() -> PrefixLayout.builder().model("m").worldSize(2).rank(2).build())
            .hasMessageContaining("rank must be in 0..1");
        assertThatThrownBy(() -> PrefixLayout.builder().model("m").layerGroups(0).build())
            .hasMessageContaining("layerGroups");
        assertThatThrownBy(() -> PrefixLayout.builder().model("m").worldSize(1024).layerGroups(1024).build())
            .hasMessageContaining("objects per block");
        assertThatThrownBy(() -> PrefixLayout.builder().model("m").tokensPerBlock(0).build())
            .hasMessageContaining("tokensPerBlock");
        assertThat(LAYOUT.objectsPerBlock()).isEqualTo(6);
        assertThat(LAYOUT.forRank(0).rank()).isZero();
    }
}
