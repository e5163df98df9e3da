package io.granary.master.admin;

/** Minimal JSON writing for the admin endpoints (strings escaped per RFC 8259). */
final class Json
{
    private Json()
    {
    }

    static String quote(final String s)
    {
        final StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++)
        {
            final char c = s.charAt(i);
            switch (c)
            {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20)
                    {
                        b.append(String.format("\\u%04x", (int)c));
                    }
                    else
                    {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
