package io.granary.protocol;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

class LimitsTest
{
    /** The rule docs/protocol.md states for tenant ids, as a regular expression. */
    private static final Pattern TENANT_RULE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");

    @Test
    void shouldAcceptExactlyTheTenantIdsTheDocumentedRuleAccepts()
    {
        assertThat(Limits.checkTenant("default")).isNull();
        assertThat(Limits.checkTenant("")).as("empty = the default tenant").isNull();
        assertThat(Limits.checkTenant("a".repeat(64))).isNull();
        assertThat(Limits.checkTenant("a".repeat(65))).isNotNull();
        assertThat(Limits.checkTenant("-team")).isNotNull();
        assertThat(Limits.checkTenant("team a")).isNotNull();
        assertThat(Limits.checkTenant("tëam")).isNotNull();

        final char[] alphabet = "aZ09._-/ \u00e9\u0000+".toCharArray();
        final SplittableRandom random = new SplittableRandom(17);
        for (int i = 0; i < 50_000; i++)
        {
            final char[] id = new char[1 + random.nextInt(70)];
            for (int j = 0; j < id.length; j++)
            {
                id[j] = alphabet[random.nextInt(alphabet.length)];
            }
            final String tenant = new String(id);
            assertThat(Limits.checkTenant(tenant) == null).as("'%s'", tenant)
                .isEqualTo(TENANT_RULE.matcher(tenant).matches());
        }
    }
}
