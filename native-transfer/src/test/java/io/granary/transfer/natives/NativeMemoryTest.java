package io.granary.transfer.natives;

import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class NativeMemoryTest
{
    private static final long MIB = 1 << 20;

    @Test
    void shouldMapAlignedZeroedMemoryAndUnmapItOnce()
    {
        assumeTrue(NativeTransfer.isAvailable(), () -> String.valueOf(NativeTransfer.unavailabilityCause()));
        final NativeMemory.Mapping mapping = NativeMemory.map(3 * MIB + 1, false);
        assertThat(mapping.address() % NativeMemory.HUGE_PAGE_BYTES).isZero();
        assertThat(mapping.length()).isEqualTo(4 * MIB);
        assertThat(mapping.hugePagesAdvised()).isFalse();
        final long last = mapping.address() + mapping.length() - 8;
        assertThat(PlatformDependent.getLong(mapping.address())).isZero();
        assertThat(PlatformDependent.getLong(last)).isZero();
        PlatformDependent.putLong(last, 42);
        assertThat(PlatformDependent.getLong(last)).isEqualTo(42);
        NativeMemory.unmap(mapping);
        // An address or length the library did not hand out is refused, not unmapped.
        assertThatThrownBy(() -> NativeMemory.unmap(new NativeMemory.Mapping(mapping.address() + 4096, 4 * MIB, false)))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("refused");
        assertThatThrownBy(() -> NativeMemory.map(0, true)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> NativeMemory.map(2L << 40, false)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("mapping length");
    }

    @Test
    void shouldReadTheKernelsTransparentHugePageMode(@TempDir final Path dir) throws IOException
    {
        final Path file = dir.resolve("enabled");
        Files.writeString(file, "always [madvise] never\n");
        assertThat(NativeMemory.transparentHugePageMode(file)).isEqualTo("madvise");
        Files.writeString(file, "always madvise [never]\n");
        assertThat(NativeMemory.transparentHugePageMode(file)).isEqualTo("never");
        Files.writeString(file, "garbage\n");
        assertThat(NativeMemory.transparentHugePageMode(file)).isNull();
        assertThat(NativeMemory.transparentHugePageMode(dir.resolve("missing"))).isNull();
    }

    @Test
    void shouldSumTheHugePagesOfTheMappingsOverlappingARange(@TempDir final Path dir) throws IOException
    {
        final Path smaps = dir.resolve("smaps");
        Files.writeString(smaps, String.join("\n",
            "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 ",
            "Size:               4096 kB",
            "AnonHugePages:      2048 kB",
            "7f0000400000-7f0000c00000 rw-p 00000000 00:00 0 ",
            "Size:               8192 kB",
            "AnonHugePages:      6144 kB",
            "7f0000c00000-7f0001000000 rw-p 00000000 00:00 0                          [heap]",
            "AnonHugePages:      4096 kB",
            "VmFlags: rd wr mr mw me ac hg",
            ""));
        final long second = 0x7f0000400000L;
        assertThat(NativeMemory.hugePageBytes(smaps, second, 8 * MIB)).isEqualTo(6 * MIB);
        assertThat(NativeMemory.hugePageBytes(smaps, second - 4096, 8 * MIB)).isEqualTo(8 * MIB); // two mappings
        assertThat(NativeMemory.hugePageBytes(smaps, second, MIB)).isEqualTo(MIB);                // capped
        assertThat(NativeMemory.hugePageBytes(smaps, 0x1000, MIB)).isZero();
        assertThat(NativeMemory.hugePageBytes(smaps, new long[] {second, 0x1000, second - 4096},
            new long[] {8 * MIB, MIB, 8 * MIB})).containsExactly(6 * MIB, 0, 8 * MIB); // one read for all
        assertThat(NativeMemory.hugePageBytes(dir.resolve("missing"), second, MIB)).isZero();
    }
}
