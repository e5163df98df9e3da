package io.granary.protocol;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import static io.granary.protocol.FrameDescriptor.*;
import static org.assertj.core.api.Assertions.assertThat;

class CommitRecordTest
{
    private static CommitRecord sample()
    {
        return new CommitRecord(CommitRecord.FLAG_HARD_PIN | CommitRecord.FLAG_CRC32C, "tenant-1", "layer/0/blk-é",
            "group-7", 300_001L, 0x0123_4567_89AB_CDEFL, 0, 0xCAFEBABE);
    }

    @Test
    void shouldRoundTripEveryField()
    {
        final byte[] payload = sample().encode();
        final byte[] framed = new byte[payload.length + 5];
        System.arraycopy(payload, 0, framed, 5, payload.length);

        final CommitRecord read = CommitRecord.decode(framed, 5, payload.length);

        assertThat(read).isNotNull();
        assertThat(read.flags()).isEqualTo(CommitRecord.FLAG_HARD_PIN | CommitRecord.FLAG_CRC32C);
        assertThat(read.tenant()).isEqualTo("tenant-1");
        assertThat(read.key()).isEqualTo("layer/0/blk-é");
        assertThat(read.groupId()).isEqualTo("group-7");
        assertThat(read.valueLength()).isEqualTo(300_001L);
        assertThat(read.version()).isEqualTo(0x0123_4567_89AB_CDEFL);
        assertThat(read.hasCrc32c()).isTrue();
        assertThat(read.crc32c()).isEqualTo(0xCAFEBABE);
    }

    @Test
    void shouldGiveTheNamesOfADecodedRecordAsTheyCameAndAsARecordOfStringsWouldWriteThem()
    {
        for (final String key : new String[] {"k", "layer/0/blk-é", "ключ/😀"})
        {
            for (final String group : new String[] {"", "group-7", "група"})
            {
                for (final String parent : new String[] {"", "p", "layer/0/blk-ё"})
                {
                    final CommitRecord made = new CommitRecord(0, "tenant-1", key, group, parent, 1, 9, 0, 0);
                    final byte[] payload = made.encode();
                    final CommitRecord read = CommitRecord.decode(payload, 0, payload.length);
                    final byte[] utf8 = (key + group + parent).getBytes(StandardCharsets.UTF_8);

                    assertThat(read.keyUtf8Length()).isEqualTo(made.keyUtf8Length())
                        .isEqualTo(key.getBytes(StandardCharsets.UTF_8).length);
                    assertThat(read.groupUtf8Length()).isEqualTo(made.groupUtf8Length())
                        .isEqualTo(group.getBytes(StandardCharsets.UTF_8).length);
                    assertThat(read.namesUtf8Length()).isEqualTo(made.namesUtf8Length()).isEqualTo(utf8.length);
                    final byte[] fromRead = new byte[utf8.length + 3];
                    final byte[] fromMade = new byte[utf8.length + 3];
                    read.putNames(fromRead, 3);
                    made.putNames(fromMade, 3);
                    assertThat(Arrays.copyOfRange(fromRead, 3, fromRead.length)).isEqualTo(utf8);
                    assertThat(fromMade).isEqualTo(fromRead);
                    assertThat(read.key()).isEqualTo(key);
                    assertThat(read.groupId()).isEqualTo(group);
                    assertThat(read.parentKey()).isEqualTo(parent);
                    assertThat(read.flags() & CommitRecord.FLAG_PARENT).isEqualTo(parent.isEmpty() ? 0 :
                        CommitRecord.FLAG_PARENT);
                    assertThat(read.encode()).isEqualTo(payload);
                    assertThat(read.withCrc32c(5).encode()).isEqualTo(made.encodeWithCrc32c(5));
                    assertThat(read.withCrc32c(5).parentKey()).isEqualTo(parent);
                }
            }
        }
    }

    @Test
    void shouldLayOutARecordWithoutAParentAsBeforeTheFlagAndAParentKeyAfterTheGroupId()
    {
        final byte[] without = new CommitRecord(CommitRecord.FLAG_PARENT, "t", "k", "g", "", 4096, 77, 1500, 0)
            .encode();
        assertThat(without).isEqualTo(reference(0, "t", "k", "g", 0));

        final byte[] with = new CommitRecord(0, "t", "k", "g", "parent/é", 4096, 77, 1500, 0).encode();
        final byte[] parent = "parent/é".getBytes(StandardCharsets.UTF_8);
        final byte[] head = reference(CommitRecord.FLAG_PARENT, "t", "k", "g", 0);
        assertThat(Arrays.copyOf(with, head.length)).isEqualTo(head);
        assertThat(Arrays.copyOfRange(with, head.length, with.length)).isEqualTo(parent);
    }

    @Test
    void shouldRefuseAParentKeyThatIsMissingMalformedOrUnannounced()
    {
        final byte[] good = new CommitRecord(0, "t", "k", "g", "pk", 1, 1, 0, 0).encode();
        assertThat(CommitRecord.decode(good, 0, good.length)).isNotNull();

        assertThat(CommitRecord.decode(with(good, COMMIT_FLAGS_OFFSET, 0), 0, good.length))
            .as("parent bytes without the flag").isNull();
        final byte[] flaggedEmpty = reference(CommitRecord.FLAG_PARENT, "t", "k", "g", 0);
        assertThat(CommitRecord.decode(flaggedEmpty, 0, flaggedEmpty.length)).as("the flag without a parent key")
            .isNull();
        final byte[] nul = Arrays.copyOf(good, good.length);
        nul[nul.length - 1] = 0;
        assertThat(CommitRecord.decode(nul, 0, nul.length)).as("NUL in the parent key").isNull();
        final byte[] notUtf8 = Arrays.copyOf(good, good.length);
        notUtf8[notUtf8.length - 2] = (byte)0xC3;
        assertThat(CommitRecord.decode(notUtf8, 0, notUtf8.length)).as("parent key not UTF-8").isNull();
        final String longest = "p".repeat(io.granary.protocol.Limits.MAX_KEY_BYTES);
        final byte[] atLimit = new CommitRecord(0, "t", "k", "", longest, 1, 1, 0, 0).encode();
        assertThat(CommitRecord.decode(atLimit, 0, atLimit.length).parentKey()).isEqualTo(longest);
        final byte[] tooLong = new CommitRecord(0, "t", "k", "", longest + "p", 1, 1, 0, 0).encode();
        assertThat(CommitRecord.decode(tooLong, 0, tooLong.length)).as("parent key too long").isNull();
    }

    @Test
    void shouldPlaceTheFixedFieldsWhereTheDescriptorSays()
    {
        final ByteBuffer payload = ByteBuffer.wrap(sample().encode());

        assertThat(payload.get(COMMIT_FORMAT_OFFSET)).isEqualTo(COMMIT_FORMAT);
        assertThat(payload.getShort(COMMIT_TENANT_LENGTH_OFFSET)).isEqualTo((short)8);
        assertThat(payload.getLong(COMMIT_VALUE_LENGTH_OFFSET)).isEqualTo(300_001L);
        assertThat(payload.getLong(COMMIT_VERSION_OFFSET)).isEqualTo(0x0123_4567_89AB_CDEFL);
        assertThat(new String(payload.array(), COMMIT_STRINGS_OFFSET, 8, StandardCharsets.US_ASCII))
            .isEqualTo("tenant-1");
    }

    @Test
    void shouldRefuseMalformedPayloads()
    {
        final byte[] good = sample().encode();

        assertThat(CommitRecord.decode(good, 0, good.length - 1)).as("truncated").isNull();
        assertThat(CommitRecord.decode(good, 0, COMMIT_STRINGS_OFFSET - 1)).as("shorter than fixed part").isNull();
        assertThat(CommitRecord.decode(good, 1, good.length)).as("past the array").isNull();
        assertThat(CommitRecord.decode(with(good, COMMIT_FORMAT_OFFSET, 2), 0, good.length)).as("format").isNull();
        assertThat(CommitRecord.decode(with(good, COMMIT_FLAGS_OFFSET, 0x40), 0, good.length)).as("flags").isNull();
        assertThat(CommitRecord.decode(withLong(good, COMMIT_VERSION_OFFSET, 0), 0, good.length)).as("version 0")
            .isNull();
        assertThat(CommitRecord.decode(withLong(good, COMMIT_VALUE_LENGTH_OFFSET, -1), 0, good.length))
            .as("negative length").isNull();
        final byte[] noKey = new CommitRecord(0, "t", "k", "", 1, 1, 0, 0).encode();
        noKey[COMMIT_STRINGS_OFFSET + 1] = 0; // the key becomes a NUL character
        assertThat(CommitRecord.decode(noKey, 0, noKey.length)).as("NUL in the key").isNull();
        final byte[] badTenant = new CommitRecord(0, "-t", "k", "", 1, 1, 0, 0).encode();
        assertThat(CommitRecord.decode(badTenant, 0, badTenant.length)).as("bad tenant").isNull();
        final byte[] dotTenant = new CommitRecord(0, "t.x_y-z", "k", "", 1, 1, 0, 0).encode();
        assertThat(CommitRecord.decode(dotTenant, 0, dotTenant.length)).as("tenant of every allowed kind").isNotNull();
        dotTenant[COMMIT_STRINGS_OFFSET + 1] = '/';
        assertThat(CommitRecord.decode(dotTenant, 0, dotTenant.length)).as("'/' in the tenant").isNull();
        final byte[] nulAfterUtf8 = new CommitRecord(0, "t", "éa", "", 1, 1, 0, 0).encode();
        nulAfterUtf8[nulAfterUtf8.length - 1] = 0; // "é" then NUL
        assertThat(CommitRecord.decode(nulAfterUtf8, 0, nulAfterUtf8.length)).as("NUL after a non-ASCII character")
            .isNull();
        final byte[] badKey = new CommitRecord(0, "t", "ab", "", 1, 1, 0, 0).encode();
        badKey[COMMIT_STRINGS_OFFSET + 1] = (byte)0xC3; // a lead byte followed by ASCII: not UTF-8
        assertThat(CommitRecord.decode(badKey, 0, badKey.length)).as("key not UTF-8").isNull();
        final byte[] badGroup = new CommitRecord(0, "t", "k", "gg", 1, 1, 0, 0).encode();
        badGroup[badGroup.length - 1] = (byte)0xFF;
        assertThat(CommitRecord.decode(badGroup, 0, badGroup.length)).as("group id not UTF-8").isNull();
        assertThat(CommitRecord.decode(new byte[MAX_COMMIT_PAYLOAD + 1], 0, MAX_COMMIT_PAYLOAD + 1))
            .as("too long").isNull();
    }

    @Test
    void shouldEncodeEveryStringAsItsUtf8BytesAsciiOrNotAndAddTheChecksumWithoutASecondRecord()
    {
        final String[] texts = {"k", "layer/0/blk-7", "ключ", "emoji-😀-x", "lone-\uD800-surrogate", ""};
        for (final String tenant : new String[] {"t", "тенант"})
        {
            for (final String key : texts)
            {
                for (final String group : texts)
                {
                    final CommitRecord record = new CommitRecord(CommitRecord.FLAG_SOFT_PIN, tenant, key, group, 4096,
                        77, 1500, 0);
                    assertThat(record.encode()).isEqualTo(reference(CommitRecord.FLAG_SOFT_PIN, tenant, key, group,
                        0));
                    assertThat(record.encodeWithCrc32c(0x1234_5678))
                        .isEqualTo(record.withCrc32c(0x1234_5678).encode())
                        .isEqualTo(reference(CommitRecord.FLAG_SOFT_PIN | CommitRecord.FLAG_CRC32C, tenant, key, group,
                            0x1234_5678));
                }
            }
        }
    }

    /** The layout of docs/protocol.md written field by field, each string by String.getBytes. */
    private static byte[] reference(final int flags, final String tenant, final String key, final String group,
        final int crc)
    {
        final byte[] t = tenant.getBytes(StandardCharsets.UTF_8);
        final byte[] k = key.getBytes(StandardCharsets.UTF_8);
        final byte[] g = group.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(COMMIT_STRINGS_OFFSET + t.length + k.length + g.length)
            .put(COMMIT_FORMAT).put((byte)flags).putShort((short)t.length).putShort((short)k.length)
            .putShort((short)g.length).putLong(4096).putLong(77).putLong(1500).putInt(crc).put(t).put(k).put(g)
            .array();
    }

    private static byte[] with(final byte[] payload, final int at, final int value)
    {
        final byte[] copy = Arrays.copyOf(payload, payload.length);
        copy[at] = (byte)value;
        return copy;
    }

    private static byte[] withLong(final byte[] payload, final int at, final long value)
    {
        final byte[] copy = Arrays.copyOf(payload, payload.length);
        ByteBuffer.wrap(copy).putLong(at, value);
        return copy;
    }
}
