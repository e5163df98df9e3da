package io.granary.cli;

import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;
import picocli.CommandLine;
import picocli.CommandLine.IDefaultValueProvider;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParseResult;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Every flag of a command also settable from the environment and from a {@code --config} file, for any flag the
 * command has, with no code per flag: a picocli default-value provider in front of the command's own defaults.
 * Precedence: flags &gt; environment &gt; file &gt; defaults. The rule: {@code granary master --lease-ttl} is the
 * environment variable {@code GRANARY_MASTER_LEASE_TTL} and the file key {@code lease-ttl}; the file is Java
 * properties, or YAML for {@code .yaml}/{@code .yml} (a flat map). Unknown file keys and unknown
 * {@code GRANARY_<COMMAND>_*} variables are refused. One instance per command, used on the thread that runs it.
 */
final class ConfigDefaults implements IDefaultValueProvider
{
    /** The option that names the file; it is also {@code GRANARY_<COMMAND>_CONFIG}. */
    static final String CONFIG_OPTION = "--config";
    /** Shown instead of the value of an option whose name says it holds a secret. */
    static final String MASK = "****";
    private static final Set<String> SECRET_WORDS =
        Set.of("key", "password", "passphrase", "secret", "token", "credential", "credentials");

    /** Where an option's value came from. */
    enum Source
    {
        FLAG, ENV, FILE, DEFAULT
    }

    private final String command;
    private final IDefaultValueProvider fallback;
    private final Map<String, String> env;
    private final String configPath;
    private Map<String, String> fileValues;
    private boolean checked;
    private final Map<String, Source> sources = new HashMap<>();
    private final Map<String, String> rawValues = new HashMap<>();

    ConfigDefaults(
        final String command,
        final IDefaultValueProvider fallback,
        final Map<String, String> env,
        final String configPath)
    {
        this.command = command;
        this.fallback = fallback;
        this.env = env;
        this.configPath = configPath != null ? configPath : env.get(envName(command, CONFIG_OPTION));
    }

    /**
     * Adds {@code --config FILE} to {@code cmd} and puts environment and file values in front of its defaults.
     *
     * @param args the command line (the file is read from {@code --config} there, before parsing).
     */
    static void install(final CommandLine cmd, final String command, final Map<String, String> env, final String[] args)
    {
        final CommandSpec spec = cmd.getCommandSpec();
        if (!spec.optionsMap().containsKey(CONFIG_OPTION))
        {
            spec.addOption(OptionSpec.builder(CONFIG_OPTION)
                .paramLabel("FILE")
                .type(String.class)
                .description("Read settings from FILE: Java properties, or YAML for .yaml/.yml; keys are flag names "
                    + "without '--'. Precedence: flags > environment (GRANARY_" + command.toUpperCase(Locale.ROOT)
                    + "_<FLAG>) > file > defaults.")
                .build());
        }
        spec.defaultValueProvider(new ConfigDefaults(command, spec.defaultValueProvider(), env, configPath(args)));
    }

    /** The value of {@code --config} on a command line (before parsing), or null. */
    static String configPath(final String[] args)
    {
        if (args == null)
        {
            return null;
        }
        for (int i = 1; i < args.length; i++)
        {
            final String arg = args[i];
            if ("--".equals(arg))
            {
                return null;
            }
            if (CONFIG_OPTION.equals(arg) && i + 1 < args.length)
            {
                return args[i + 1];
            }
            if (arg.startsWith(CONFIG_OPTION + "="))
            {
                return arg.substring(CONFIG_OPTION.length() + 1);
            }
        }
        return null;
    }

    /** {@code GRANARY_MASTER_LEASE_TTL} for command "master" and flag "--lease-ttl". */
    static String envName(final String command, final String flag)
    {
        return ("GRANARY_" + command + "_" + key(flag)).toUpperCase(Locale.ROOT).replace('-', '_');
    }

    /** The file key of a flag: its name without the leading dashes. */
    static String key(final String flag)
    {
        int start = 0;
        while (start < flag.length() && flag.charAt(start) == '-')
        {
            start++;
        }
        return flag.substring(start);
    }

    /**
     * Whether an option's value is shown masked: a word of its name (split at '-') is key, password, passphrase,
     * secret, token or credential(s): {@code --token-key-file} and {@code --tls-key-password} are, {@code
     * --list-keys-limit} is not.
     */
    static boolean isSecret(final OptionSpec option)
    {
        for (final String word : key(option.longestName()).toLowerCase(Locale.ROOT).split("[-_.]"))
        {
            if (SECRET_WORDS.contains(word))
            {
                return true;
            }
        }
        return false;
    }

    /** The options a file or the environment may set: every option but help, version and --config itself. */
    static boolean configurable(final OptionSpec option)
    {
        return !option.usageHelp() && !option.versionHelp() && !CONFIG_OPTION.equals(option.longestName());
    }

    @Override
    public String defaultValue(final ArgSpec argSpec) throws Exception
    {
        if (!argSpec.isOption() || !configurable((OptionSpec)argSpec))
        {
            return fallback == null ? null : fallback.defaultValue(argSpec);
        }
        final OptionSpec option = (OptionSpec)argSpec;
        check(option.command());
        final String name = option.longestName();
        final String fromEnv = env.get(envName(command, name));
        if (fromEnv != null)
        {
            return record(name, Source.ENV, fromEnv);
        }
        final String fromFile = fileValues.get(key(name));
        if (fromFile != null)
        {
            return record(name, Source.FILE, fromFile);
        }
        final String fallbackValue = fallback == null ? null : fallback.defaultValue(argSpec);
        return record(name, Source.DEFAULT, fallbackValue != null ? fallbackValue : option.defaultValue());
    }

    private String record(final String name, final Source source, final String value)
    {
        sources.put(name, source);
        rawValues.put(name, value);
        return source == Source.DEFAULT && value == null ? null : value;
    }

    /** Loads the file and refuses unknown keys and variables, once, with the command's options at hand. */
    private void check(final CommandSpec spec)
    {
        if (checked)
        {
            return;
        }
        checked = true;
        final Set<String> keys = new TreeSet<>();
        for (final OptionSpec option : spec.options())
        {
            if (configurable(option))
            {
                keys.add(key(option.longestName()));
            }
        }
        fileValues = configPath == null ? Map.of() : load(spec.commandLine(), Path.of(configPath));
        for (final String key : fileValues.keySet())
        {
            if (!keys.contains(key))
            {
                throw new CommandLine.ParameterException(spec.commandLine(), "unknown key '" + key + "' in " +
                    configPath + ": granary " + command + " has no --" + key + suggestion(key, keys) +
                    " (keys are flag names without '--')");
            }
        }
        final String prefix = envName(command, "");
        final String configVariable = envName(command, CONFIG_OPTION);
        for (final String variable : new TreeSet<>(env.keySet()))
        {
            if (variable.startsWith(prefix) && !variable.equals(configVariable))
            {
                final String key = variable.substring(prefix.length()).toLowerCase(Locale.ROOT).replace('_', '-');
                if (!keys.contains(key))
                {
                    throw new CommandLine.ParameterException(spec.commandLine(), "unknown environment variable " +
                        variable + ": granary " + command + " has no --" + key + suggestion(key, keys));
                }
            }
        }
    }

    private static String suggestion(final String key, final Collection<String> keys)
    {
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (final String candidate : keys)
        {
            final int d = distance(key, candidate);
            if (d < bestDistance)
            {
                bestDistance = d;
                best = candidate;
            }
        }
        return best != null && bestDistance <= Math.max(2, key.length() / 3) ? " (did you mean '" + best + "'?)" : "";
    }

    /** Levenshtein distance, for "did you mean". */
    private static int distance(final String a, final String b)
    {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++)
        {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++)
        {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++)
            {
                final int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                current[j] = Math.min(Math.min(current[j - 1] + 1, previous[j] + 1), previous[j - 1] + cost);
            }
            final int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }

    /** Key to value text; YAML scalars as text, lists joined with commas. */
    static Map<String, String> load(final CommandLine cmd, final Path file)
    {
        final String name = file.getFileName() == null ? "" : file.getFileName().toString().toLowerCase(Locale.ROOT);
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8))
        {
            return name.endsWith(".yaml") || name.endsWith(".yml") ? yaml(cmd, file, reader) : properties(reader);
        }
        catch (final IOException ex)
        {
            throw new CommandLine.ParameterException(cmd, "cannot read --config " + file + ": " + ex);
        }
    }

    private static Map<String, String> properties(final Reader reader) throws IOException
    {
        final Properties properties = new Properties();
        properties.load(reader);
        final Map<String, String> values = new TreeMap<>();
        for (final String name : properties.stringPropertyNames())
        {
            values.put(name.trim(), properties.getProperty(name).trim());
        }
        return values;
    }

    private static Map<String, String> yaml(final CommandLine cmd, final Path file, final Reader reader)
    {
        final LoaderOptions options = new LoaderOptions();
        options.setAllowDuplicateKeys(false);
        options.setMaxAliasesForCollections(10);
        final Object document;
        try
        {
            document = new Yaml(new SafeConstructor(options)).load(reader);
        }
        catch (final YAMLException ex)
        {
            throw new CommandLine.ParameterException(cmd, "--config " + file + " is not valid YAML: " +
                ex.getMessage().replace('\n', ' '));
        }
        if (document == null)
        {
            return Map.of();
        }
        if (!(document instanceof Map))
        {
            throw new CommandLine.ParameterException(cmd, "--config " + file +
                " must be a YAML map of flag names to values, e.g. 'lease-ttl: 10s'");
        }
        final Map<String, String> values = new LinkedHashMap<>();
        for (final Map.Entry<?, ?> entry : ((Map<?, ?>)document).entrySet())
        {
            final String key = String.valueOf(entry.getKey()).trim();
            final Object value = entry.getValue();
            if (value instanceof Map)
            {
                throw new CommandLine.ParameterException(cmd, "key '" + key + "' in " + file +
                    " must hold a value or a list, not a map");
            }
            if (value instanceof List)
            {
                final List<String> items = new ArrayList<>();
                for (final Object item : (List<?>)value)
                {
                    items.add(String.valueOf(item));
                }
                values.put(key, String.join(",", items));
            }
            else
            {
                values.put(key, value == null ? "" : String.valueOf(value));
            }
        }
        return values;
    }

    /** Where the value of {@code option} came from, once the command line was parsed. */
    Source source(final OptionSpec option, final ParseResult parsed)
    {
        if (parsed != null && parsed.hasMatchedOption(option))
        {
            return Source.FLAG;
        }
        return sources.getOrDefault(option.longestName(), Source.DEFAULT);
    }

    /** " (from GRANARY_X)" or " (from key 'x' in FILE)" for an option set by the environment or the file, else "". */
    String origin(final String flag)
    {
        final Source source = sources.get(flag);
        if (source == Source.ENV)
        {
            return " (from environment variable " + envName(command, flag) + ")";
        }
        if (source == Source.FILE)
        {
            return " (from key '" + key(flag) + "' in " + configPath + ")";
        }
        return "";
    }

    /** {@code message} with the origin of every flag it names that the environment or the file set. */
    String withOrigins(final String message, final CommandSpec spec)
    {
        final StringBuilder b = new StringBuilder(message);
        final ParseResult parsed = spec.commandLine().getParseResult();
        for (final OptionSpec option : spec.options())
        {
            final String flag = option.longestName();
            if (message.contains(flag) && source(option, parsed) != Source.FLAG && !origin(flag).isEmpty())
            {
                b.append(origin(flag));
            }
        }
        return b.toString();
    }

    /**
     * The resolved configuration of a parsed command on one line, each setting with its source and secrets
     * masked: {@code admin-port=9003 (default), lease-ttl=5s (env GRANARY_MASTER_LEASE_TTL), ...}.
     */
    String describe(final CommandSpec spec)
    {
        final ParseResult parsed = spec.commandLine().getParseResult();
        final List<String> parts = new ArrayList<>();
        final Map<String, OptionSpec> sorted = new TreeMap<>();
        for (final OptionSpec option : spec.options())
        {
            if (configurable(option))
            {
                sorted.put(key(option.longestName()), option);
            }
        }
        for (final Map.Entry<String, OptionSpec> entry : sorted.entrySet())
        {
            final OptionSpec option = entry.getValue();
            final Source source = source(option, parsed);
            String value;
            if (source == Source.FLAG)
            {
                final List<String> given = parsed.matchedOption(option.longestName()).stringValues();
                value = given.isEmpty() ? "true" : String.join(",", given);
            }
            else
            {
                value = rawValues.get(option.longestName());
            }
            if (value == null)
            {
                value = "<unset>";
            }
            else if (isSecret(option))
            {
                value = MASK;
            }
            final String from;
            switch (source)
            {
                case FLAG: from = "flag"; break;
                case ENV: from = "env " + envName(command, option.longestName()); break;
                case FILE: from = "file"; break;
                default: from = "default"; break;
            }
            parts.add(entry.getKey() + "=" + value + " (" + from + ")");
        }
        final String config = configPath == null ? "" : " [config file " + configPath + "]";
        return String.join(", ", parts) + config;
    }

    /** The provider installed on {@code spec}, or null when it has none. */
    static ConfigDefaults of(final CommandSpec spec)
    {
        final IDefaultValueProvider provider = spec.defaultValueProvider();
        return provider instanceof ConfigDefaults ? (ConfigDefaults)provider : null;
    }
}
