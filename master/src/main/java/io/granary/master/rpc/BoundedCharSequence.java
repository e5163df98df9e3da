package io.granary.master.rpc;

import java.util.regex.Pattern;

/**
 * A key as a {@link CharSequence} that lets a regex read it only so many times: a matcher that backtracks
 * exponentially on it runs out of budget and stops instead of holding the thread. One per match; not thread safe.
 */
final class BoundedCharSequence implements CharSequence
{
    /** Character reads allowed per key character, plus a fixed allowance: ample for any sane pattern. */
    static final int READS_PER_CHAR = 256;
    static final int BASE_READS = 65_536;

    private final String text;
    private int budget;

    private BoundedCharSequence(final String text, final int budget)
    {
        this.text = text;
        this.budget = budget;
    }

    /** Whether {@code pattern} matches all of {@code key}; false when the match ran out of budget. */
    static boolean matches(final Pattern pattern, final String key)
    {
        final BoundedCharSequence bounded = new BoundedCharSequence(key, BASE_READS + READS_PER_CHAR * key.length());
        try
        {
            return pattern.matcher(bounded).matches();
        }
        catch (final BudgetExceeded ex)
        {
            return false;
        }
        catch (final StackOverflowError ex)
        {
            return false; // deeply nested groups on a long key: the JDK matcher recurses per character
        }
    }

    @Override
    public char charAt(final int index)
    {
        if (--budget < 0)
        {
            throw BudgetExceeded.INSTANCE;
        }
        return text.charAt(index);
    }

    @Override
    public int length()
    {
        return text.length();
    }

    @Override
    public CharSequence subSequence(final int start, final int end)
    {
        return new BoundedCharSequence(text.substring(start, end), budget);
    }

    @Override
    public String toString()
    {
        return text;
    }

    /** Thrown out of the matcher when the budget is spent; shared and stackless. */
    private static final class BudgetExceeded extends RuntimeException
    {
        static final BudgetExceeded INSTANCE = new BudgetExceeded();

        private BudgetExceeded()
        {
            super("regex budget exceeded", null, false, false);
        }
    }
}
