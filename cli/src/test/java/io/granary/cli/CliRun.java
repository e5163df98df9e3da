package io.granary.cli;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs the granary command line in this JVM with captured stdout and stderr. */
record CliRun(int exitCode, String out, String err)
{
    static CliRun run(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final int exitCode = Granary.newCommandLine()
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
