package io.granary.node;

import io.granary.node.segment.HugePages;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The huge-pages property of embedded nodes: default, values, and a bad value named with the property. */
class HugePagesPropertyTest
{
    @AfterEach
    void clear()
    {
        System.clearProperty(Configuration.HUGE_PAGES_PROP_NAME);
    }

    @Test
    void shouldDefaultToAutoTakeAValueAndNameThePropertyOfABadOne()
    {
        assertThat(Configuration.hugePages()).isEqualTo(HugePages.AUTO);
        System.setProperty(Configuration.HUGE_PAGES_PROP_NAME, "off");
        assertThat(Configuration.hugePages()).isEqualTo(HugePages.OFF);
        assertThat(new StorageNode.Context().hugePages()).isEqualTo(HugePages.OFF);
        System.setProperty(Configuration.HUGE_PAGES_PROP_NAME, "maybe");
        assertThatThrownBy(Configuration::hugePages).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining(Configuration.HUGE_PAGES_PROP_NAME).hasMessageContaining("'maybe'");
    }
}
