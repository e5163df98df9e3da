package io.granary.master.events.zmq;

/** Validation of the ZeroMQ endpoints the master binds: {@code tcp://HOST:PORT}, PORT 1..65535 or {@code *}. */
public final class ZmqEndpoints
{
    private ZmqEndpoints()
    {
    }

    /** Null when {@code endpoint} is one the publisher can bind, else what is wrong with it. */
    public static String check(final String endpoint)
    {
        if (endpoint == null || !endpoint.startsWith("tcp://"))
        {
            return "must be tcp://HOST:PORT (PORT 1..65535, or * for a free one), was '" + endpoint + "'";
        }
        final String rest = endpoint.substring("tcp://".length());
        final int colon = rest.lastIndexOf(':');
        if (colon <= 0 || rest.length() > 300)
        {
            return "must be tcp://HOST:PORT (PORT 1..65535, or * for a free one), was '" + endpoint + "'";
        }
        final String host = rest.substring(0, colon);
        final String port = rest.substring(colon + 1);
        for (int i = 0; i < host.length(); i++)
        {
            final char c = host.charAt(i);
            if (!(Character.isLetterOrDigit(c) || c == '.' || c == '-' || c == '*' || c == ':' || c == '[' ||
                c == ']'))
            {
                return "has a bad host '" + host + "': " + endpoint;
            }
        }
        if ("*".equals(port))
        {
            return null;
        }
        try
        {
            final int p = Integer.parseInt(port);
            return p >= 1 && p <= 65535 ? null : "port must be 1..65535 or *, was " + port;
        }
        catch (final NumberFormatException ex)
        {
            return "port must be 1..65535 or *, was '" + port + "'";
        }
    }
}
