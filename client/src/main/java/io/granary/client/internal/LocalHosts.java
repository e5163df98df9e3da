package io.granary.client.internal;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.Collections;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Decides whether a storage node's endpoint is on this host, by comparing the endpoint's host text
 * (no DNS lookups) with a configured name or, by default, with this machine's interface addresses and
 * "localhost". Thread safe; answers are cached per endpoint.
 */
final class LocalHosts
{
    private final Set<String> names;
    private final ConcurrentHashMap<String, Boolean> cache = new ConcurrentHashMap<>();

    private LocalHosts(final Set<String> names)
    {
        this.names = names;
    }

    /** Exactly {@code host} (case-insensitive) counts as local. */
    static LocalHosts of(final String host)
    {
        return new LocalHosts(Set.of(normalise(host)));
    }

    /** This machine's interface addresses, the loopback addresses and "localhost". */
    static LocalHosts ofThisMachine()
    {
        final Set<String> names = new HashSet<>();
        names.add("localhost");
        names.add("127.0.0.1");
        names.add("::1");
        try
        {
            for (final NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces()))
            {
                for (final InetAddress address : Collections.list(nif.getInetAddresses()))
                {
                    names.add(normalise(address.getHostAddress()));
                }
            }
        }
        catch (final SocketException | RuntimeException ex)
        {
            // Without the interface list only loopback counts as local; replica choice still works.
        }
        return new LocalHosts(Set.copyOf(names));
    }

    boolean isLocal(final String endpoint)
    {
        return cache.computeIfAbsent(endpoint, e -> names.contains(normalise(hostOf(e))));
    }

    /** The host part of host:port ([v6]:port too); the whole text when there is no port. */
    static String hostOf(final String endpoint)
    {
        if (endpoint.startsWith("["))
        {
            final int close = endpoint.indexOf(']');
            return close > 0 ? endpoint.substring(1, close) : endpoint;
        }
        final int colon = endpoint.lastIndexOf(':');
        if (colon < 0 || endpoint.indexOf(':') != colon)
        {
            return endpoint; // no port, or a bare IPv6 address
        }
        return endpoint.substring(0, colon);
    }

    private static String normalise(final String host)
    {
        String h = host.trim().toLowerCase(Locale.ROOT);
        if (h.startsWith("[") && h.endsWith("]"))
        {
            h = h.substring(1, h.length() - 1);
        }
        final int scope = h.indexOf('%');
        if (scope >= 0)
        {
            h = h.substring(0, scope);
        }
        if (h.equals("0:0:0:0:0:0:0:1"))
        {
            return "::1";
        }
        return h;
    }
}
