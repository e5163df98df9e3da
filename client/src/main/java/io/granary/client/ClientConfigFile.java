package io.granary.client;

import io.granary.common.Units;

import java.io.IOException;
import java.io.Reader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The client's properties-file format: one key per {@link ClientConfig.Builder} setting, named after the setter in
 * kebab case ({@code rpcTimeout(Duration)} is {@code rpc-timeout}), so that a new setting is a new key without
 * code here. Values take the units of flags (durations ms/s/m/h, sizes k/m/g for whole numbers). Unknown keys and
 * bad values are refused with the key in the message. Stateless; thread safe.
 */
final class ClientConfigFile
{
    /** Key to setter, for every builder setter with one parameter of a type a file can hold. */
    private static final Map<String, Method> SETTERS = setters();

    private ClientConfigFile()
    {
    }

    static List<String> keys()
    {
        return List.copyOf(SETTERS.keySet());
    }

    static ClientConfig load(final Path file) throws IOException
    {
        final Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8))
        {
            properties.load(reader);
        }
        try
        {
            return load(properties, "");
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(file + ": " + ex.getMessage(), ex);
        }
    }

    static ClientConfig load(final Properties properties, final String prefix)
    {
        final ClientConfig.Builder builder = ClientConfig.builder();
        final List<String> names = new ArrayList<>(properties.stringPropertyNames());
        Collections.sort(names);
        for (final String name : names)
        {
            if (!name.startsWith(prefix))
            {
                continue;
            }
            final String key = name.substring(prefix.length());
            final Method setter = SETTERS.get(key);
            if (setter == null)
            {
                throw new IllegalArgumentException("unknown client setting '" + name + "'; known keys: " +
                    String.join(", ", SETTERS.keySet()));
            }
            final String value = properties.getProperty(name).trim();
            final Object converted;
            try
            {
                converted = convert(setter.getParameterTypes()[0], value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new IllegalArgumentException("bad value for '" + name + "': " + ex.getMessage(), ex);
            }
            try
            {
                setter.invoke(builder, converted);
            }
            catch (final IllegalAccessException ex)
            {
                throw new IllegalStateException(ex);
            }
            catch (final InvocationTargetException ex)
            {
                final Throwable cause = ex.getCause();
                throw new IllegalArgumentException("bad value for '" + name + "': " + cause.getMessage(), cause);
            }
        }
        return builder.build();
    }

    private static Object convert(final Class<?> type, final String value)
    {
        if (type == String.class)
        {
            return value.isEmpty() ? null : value;
        }
        if (type == Duration.class)
        {
            return Units.parseDuration(value);
        }
        if (type == boolean.class || type == Boolean.class)
        {
            switch (value.toLowerCase(Locale.ROOT))
            {
                case "true": return Boolean.TRUE;
                case "false": return Boolean.FALSE;
                default: throw new IllegalArgumentException("expected true or false, was '" + value + "'");
            }
        }
        if (type == int.class || type == Integer.class || type == long.class || type == Long.class)
        {
            final long number = parseWhole(value);
            final boolean isInt = type == int.class || type == Integer.class;
            if (isInt && (number < Integer.MIN_VALUE || number > Integer.MAX_VALUE))
            {
                throw new IllegalArgumentException("'" + value + "' is out of range for an int");
            }
            return isInt ? (Object)(int)number : (Object)number;
        }
        if (type == Path.class)
        {
            return Path.of(value);
        }
        if (type.isEnum())
        {
            final String wanted = value.replace('-', '_');
            for (final Object constant : type.getEnumConstants())
            {
                if (((Enum<?>)constant).name().equalsIgnoreCase(wanted))
                {
                    return constant;
                }
            }
            final List<String> names = new ArrayList<>();
            for (final Object constant : type.getEnumConstants())
            {
                names.add(((Enum<?>)constant).name().toLowerCase(Locale.ROOT));
            }
            throw new IllegalArgumentException("expected one of " + String.join(", ", names) + ", was '" + value + "'");
        }
        throw new IllegalStateException("no conversion to " + type);
    }

    /** A whole number, or a size with a k/m/g/t suffix. */
    private static long parseWhole(final String value)
    {
        try
        {
            return Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            return Units.parseSize(value);
        }
    }

    private static boolean convertible(final Class<?> type)
    {
        return type == String.class || type == Duration.class || type == boolean.class || type == Boolean.class ||
            type == int.class || type == Integer.class || type == long.class || type == Long.class ||
            type == Path.class || type.isEnum();
    }

    private static Map<String, Method> setters()
    {
        final Map<String, Method> setters = new TreeMap<>();
        for (final Method method : ClientConfig.Builder.class.getDeclaredMethods())
        {
            if (!Modifier.isPublic(method.getModifiers()) || Modifier.isStatic(method.getModifiers()) ||
                method.getParameterCount() != 1 || method.getReturnType() != ClientConfig.Builder.class ||
                !convertible(method.getParameterTypes()[0]))
            {
                continue;
            }
            // Overloads (a String and a typed form): keep the typed one.
            setters.merge(kebab(method.getName()), method,
                (a, b) -> a.getParameterTypes()[0] == String.class ? b : a);
        }
        return Collections.unmodifiableMap(setters);
    }

    /** "maxQueuedTransfersPerPeer" is "max-queued-transfers-per-peer". */
    static String kebab(final String camel)
    {
        final StringBuilder b = new StringBuilder(camel.length() + 8);
        for (int i = 0; i < camel.length(); i++)
        {
            final char c = camel.charAt(i);
            if (Character.isUpperCase(c))
            {
                if (i > 0 && !Character.isUpperCase(camel.charAt(i - 1)))
                {
                    b.append('-');
                }
                b.append(Character.toLowerCase(c));
            }
            else
            {
                b.append(c);
            }
        }
        return b.toString();
    }
}
