package io.granary.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** A plain-text table: a header row, left-aligned text, right-aligned numbers, two spaces between columns. */
final class Table
{
    private final String[] headers;
    private final boolean[] rightAligned;
    private final List<String[]> rows = new ArrayList<>();

    /** @param headers column names; a name starting with '>' is right-aligned (the '>' is not printed). */
    Table(final String... headers)
    {
        this.headers = new String[headers.length];
        this.rightAligned = new boolean[headers.length];
        for (int i = 0; i < headers.length; i++)
        {
            rightAligned[i] = headers[i].startsWith(">");
            this.headers[i] = rightAligned[i] ? headers[i].substring(1) : headers[i];
        }
    }

    Table row(final Object... cells)
    {
        if (cells.length != headers.length)
        {
            throw new IllegalArgumentException("expected " + headers.length + " cells, got " + Arrays.toString(cells));
        }
        final String[] row = new String[cells.length];
        for (int i = 0; i < cells.length; i++)
        {
            row[i] = cells[i] == null ? "-" : cells[i].toString();
        }
        rows.add(row);
        return this;
    }

    int size()
    {
        return rows.size();
    }

    void print(final PrintWriter out, final String indent)
    {
        final int[] widths = new int[headers.length];
        for (int i = 0; i < headers.length; i++)
        {
            widths[i] = headers[i].length();
            for (final String[] row : rows)
            {
                widths[i] = Math.max(widths[i], row[i].length());
            }
        }
        printRow(out, indent, headers, widths);
        for (final String[] row : rows)
        {
            printRow(out, indent, row, widths);
        }
    }

    private void printRow(final PrintWriter out, final String indent, final String[] cells, final int[] widths)
    {
        final StringBuilder line = new StringBuilder(indent);
        for (int i = 0; i < cells.length; i++)
        {
            final String cell = cells[i];
            final int pad = widths[i] - cell.length();
            if (i > 0)
            {
                line.append("  ");
            }
            if (rightAligned[i])
            {
                line.append(" ".repeat(pad)).append(cell);
            }
            else
            {
                line.append(cell);
                if (i < cells.length - 1)
                {
                    line.append(" ".repeat(pad));
                }
            }
        }
        out.println(line);
    }
}
