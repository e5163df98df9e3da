package io.granary.common.http;

import java.util.Locale;

/**
 * Minimal JSON writing for the admin endpoints: strings escaped per RFC 8259, objects and arrays appended to one
 * {@link StringBuilder}. Not thread safe; one writer per answer.
 */
public final class Json
{
    private final StringBuilder out;
    private boolean first = true;

    private Json(final StringBuilder out)
    {
        this.out = out;
    }

    /** A writer that has opened an object: add fields, then {@link #end()}. */
    public static Json object()
    {
        final Json json = new Json(new StringBuilder(256));
        json.out.append('{');
        return json;
    }

    /** {@code {"error": message}} with a newline, the body of every 4xx answer. */
    public static String error(final String message)
    {
        return object().field("error", message).end() + "\n";
    }

    public Json field(final String name, final String value)
    {
        name(name);
        if (value == null)
        {
            out.append("null");
        }
        else
        {
            quote(out, value);
        }
        return this;
    }

    public Json field(final String name, final long value)
    {
        name(name).append(value);
        return this;
    }

    public Json field(final String name, final double value)
    {
        name(name).append(Double.isFinite(value) ? Double.toString(value) : "null");
        return this;
    }

    public Json field(final String name, final boolean value)
    {
        name(name).append(value);
        return this;
    }

    /** A field whose value is already JSON text (a nested object or array). */
    public Json raw(final String name, final String json)
    {
        name(name).append(json);
        return this;
    }

    /** Opens a nested object field; close it with {@link #endObject()}. */
    public Json beginObject(final String name)
    {
        name(name).append('{');
        first = true;
        return this;
    }

    public Json endObject()
    {
        out.append('}');
        first = false;
        return this;
    }

    /** Opens an array field of objects; add each with {@link #beginElement()} ... {@link #endObject()}. */
    public Json beginArray(final String name)
    {
        name(name).append('[');
        first = true;
        return this;
    }

    /** Opens the next object element of the array being written. */
    public Json beginElement()
    {
        if (!first)
        {
            out.append(',');
        }
        out.append('{');
        first = true;
        return this;
    }

    public Json endArray()
    {
        out.append(']');
        first = false;
        return this;
    }

    /** Closes the top-level object and returns the text. */
    public String end()
    {
        return out.append('}').toString();
    }

    private StringBuilder name(final String name)
    {
        if (!first)
        {
            out.append(',');
        }
        first = false;
        quote(out, name);
        return out.append(':');
    }

    /** {@code s} as a JSON string literal. */
    public static String quote(final String s)
    {
        final StringBuilder b = new StringBuilder(s.length() + 2);
        quote(b, s);
        return b.toString();
    }

    private static void quote(final StringBuilder b, final String s)
    {
        b.append('"');
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
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int)c));
                    }
                    else
                    {
                        b.append(c);
                    }
            }
        }
        b.append('"');
    }
}
