package io.granary.cli;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs the granary command line in this JVM with captured stdout and stderr. */
record CliRun(int exitCode, String out, String err)
{
    static CliRun run(final String... args)
    {
        return run(System.getenv(), args);
    }

    /** Runs with {@code env} as the environment (for GRANARY_* variables) and {@code --config} read from args. */
    static CliRun run(final java.util.Map<String, String> env, final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final int exitCode = Granary.newCommandLine(args, env)
            .setOut(new PrintWriter(out, true))
            .setErr(new PrintWriter(err, true))
            .execute(args);
        return new CliRun(exitCode, out.toString(), err.toString());
    }

    @Override
    public String toString()
    {
        return "exit " + exitCode + "\n--- stdout\n" + out + "--- stderr\n" + err;
    }
}
