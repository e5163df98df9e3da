package io.granary.common.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A small admin HTTP port over the JDK's built-in server, shared by the master and the storage node: exact-path
 * GET/HEAD routes that answer JSON or text, query parameters checked up front (a bad one is a 400 with a JSON
 * error), one daemon thread. Routes run on that thread only, one request at a time.
 */
public final class AdminHttp implements AutoCloseable
{
    /** Content type of the Prometheus text exposition format. */
    public static final String PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";
    private static final String JSON = "application/json; charset=utf-8";
    private static final String TEXT = "text/plain; charset=utf-8";

    private final HttpServer http;
    private final ExecutorService executor;
    private final Map<String, Route> routes = new LinkedHashMap<>();

    /** An answer: status, content type, body. */
    public record Response(int status, String contentType, String body)
    {
        public static Response json(final int status, final String body)
        {
            return new Response(status, JSON, body.endsWith("\n") ? body : body + "\n");
        }

        public static Response text(final int status, final String body)
        {
            return new Response(status, TEXT, body);
        }
    }

    /** Handles one request of its path. */
    @FunctionalInterface
    public interface Route
    {
        /** @throws BadRequest for a parameter the route cannot use; it becomes a 4xx with a JSON error. */
        Response handle(Query query);
    }

    /** A request the route refuses: the status (400 or 404) and a message for the JSON error body. */
    public static final class BadRequest extends RuntimeException
    {
        private final int status;

        public BadRequest(final int status, final String message)
        {
            super(message, null, false, false);
            this.status = status;
        }

        public BadRequest(final String message)
        {
            this(400, message);
        }

        public int status()
        {
            return status;
        }
    }

    /** The decoded query parameters of a request. */
    public static final class Query
    {
        private final Map<String, String> params;

        Query(final Map<String, String> params)
        {
            this.params = params;
        }

        /** Parses {@code a=1&b=x%20y}; a parameter given twice or without a name is refused. */
        public static Query parse(final String rawQuery)
        {
            final Map<String, String> params = new LinkedHashMap<>();
            if (rawQuery == null || rawQuery.isEmpty())
            {
                return new Query(params);
            }
            for (final String pair : rawQuery.split("&", -1))
            {
                if (pair.isEmpty())
                {
                    continue;
                }
                final int eq = pair.indexOf('=');
                final String name;
                final String value;
                try
                {
                    name = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
                    value = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
                }
                catch (final IllegalArgumentException ex)
                {
                    throw new BadRequest("malformed query string: " + ex.getMessage());
                }
                if (name.isEmpty())
                {
                    throw new BadRequest("query parameter without a name");
                }
                if (params.putIfAbsent(name, value) != null)
                {
                    throw new BadRequest("query parameter '" + name + "' given more than once");
                }
            }
            return new Query(params);
        }

        /** Refuses any parameter not named here. */
        public Query allow(final String... names)
        {
            final Set<String> allowed = Set.of(names);
            for (final String name : params.keySet())
            {
                if (!allowed.contains(name))
                {
                    throw new BadRequest("unknown query parameter '" + name + "'" +
                        (names.length == 0 ? "; this endpoint takes none" : "; expected " + String.join(", ", names)));
                }
            }
            return this;
        }

        /** The value, or {@code defaultValue} when absent. */
        public String get(final String name, final String defaultValue)
        {
            return params.getOrDefault(name, defaultValue);
        }

        /** The value of a required, non-empty parameter. */
        public String require(final String name)
        {
            final String value = params.get(name);
            if (value == null || value.isEmpty())
            {
                throw new BadRequest("missing query parameter '" + name + "'");
            }
            return value;
        }

        /** An integer parameter in {@code min..max}, or {@code defaultValue} when absent. */
        public int intValue(final String name, final int defaultValue, final int min, final int max)
        {
            final String value = params.get(name);
            if (value == null)
            {
                return defaultValue;
            }
            final int parsed;
            try
            {
                parsed = Integer.parseInt(value.trim());
            }
            catch (final NumberFormatException ex)
            {
                throw new BadRequest("query parameter '" + name + "' must be an integer, was '" + value + "'");
            }
            if (parsed < min || parsed > max)
            {
                throw new BadRequest("query parameter '" + name + "' must be in " + min + ".." + max + ", was " + parsed);
            }
            return parsed;
        }

        public Map<String, String> asMap()
        {
            return Collections.unmodifiableMap(params);
        }
    }

    /**
     * Binds {@code host:port} (0 picks a free port); call {@link #route} for each path, then {@link #start()}.
     *
     * @throws UncheckedIOException when the port cannot be bound.
     */
    public AdminHttp(final String host, final int port, final String threadName)
    {
        try
        {
            http = HttpServer.create(new InetSocketAddress(host, port), 64);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot bind the admin port " + host + ":" + port, ex);
        }
        executor = Executors.newSingleThreadExecutor(r ->
        {
            final Thread t = new Thread(r, threadName);
            t.setDaemon(true);
            return t;
        });
        http.setExecutor(executor);
        http.createContext("/", this::dispatch);
    }

    /** Serves {@code route} at exactly {@code path} ("/health"); register before {@link #start()}. */
    public AdminHttp route(final String path, final Route route)
    {
        routes.put(path, route);
        return this;
    }

    public AdminHttp start()
    {
        http.start();
        return this;
    }

    /** The bound port. */
    public int port()
    {
        return http.getAddress().getPort();
    }

    /** Answers a request in this JVM without HTTP (tests, and the CLI's local views). */
    public Response answer(final String path, final String rawQuery)
    {
        final Route route = routes.get(path);
        if (route == null)
        {
            return Response.json(404, Json.object().field("error", "not found: " + path)
                .field("endpoints", String.join(" ", routes.keySet())).end());
        }
        try
        {
            return route.handle(Query.parse(rawQuery));
        }
        catch (final BadRequest ex)
        {
            return Response.json(ex.status(), Json.error(ex.getMessage()));
        }
    }

    private void dispatch(final HttpExchange exchange)
    {
        try (exchange)
        {
            final String method = exchange.getRequestMethod();
            final Response response;
            if (!"GET".equals(method) && !"HEAD".equals(method))
            {
                exchange.getResponseHeaders().set("Allow", "GET, HEAD");
                response = Response.json(405, Json.error("only GET and HEAD are supported"));
            }
            else
            {
                response = answer(exchange.getRequestURI().getPath(), exchange.getRequestURI().getRawQuery());
            }
            send(exchange, response);
        }
        catch (final IOException | RuntimeException ex)
        {
            // The client went away or a route failed; answer 500 when the headers are still unsent.
            try
            {
                send(exchange, Response.json(500, Json.error(String.valueOf(ex))));
            }
            catch (final IOException | RuntimeException ignored)
            {
                // Nothing more to tell this client.
            }
        }
    }

    private static void send(final HttpExchange exchange, final Response response) throws IOException
    {
        final byte[] bytes = response.body().getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", response.contentType());
        final boolean head = "HEAD".equals(exchange.getRequestMethod());
        exchange.sendResponseHeaders(response.status(), head ? -1 : bytes.length);
        if (!head)
        {
            try (OutputStream out = exchange.getResponseBody())
            {
                out.write(bytes);
            }
        }
    }

    @Override
    public void close()
    {
        http.stop(0);
        executor.shutdownNow();
    }
}
