"""What the modes' job modules do alike: pick the budget's grid, and write a summary (its heading,
its fixed-width tables, its error line). Plain Python: jobs run on bare GPU hosts too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def select_grid(config: Mapping) -> dict:
    """The mode's grid for the budget's name (suite.config checks that it exists, and its keys)."""
    return dict(config["mode"]["grids"][config["budget"]["name"]])


def heading(record: Mapping, what: str, detail: str = "", device: str | None = None) -> list[str]:
    """A summary's first line, underlined: ``<what> (<detail>; <budget> budget, <device>): <status>``;
    ``device`` names the device in more words than the record's cpu or cuda (its model)."""
    where = f"{record['config']['budget']['name']} budget, {device or record['env']['device']}"
    line = f"{what} ({detail + '; ' if detail else ''}{where}): {record['status']}"
    return [line, "-" * len(line)]


def error_lines(record: Mapping) -> list[str]:
    """A summary's closing line when the run failed: its error."""
    return [f"error: {record['error']}"] if record["error"] else []


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: bool = False) -> list[str]:
    """Rows of cells under a header and a rule, each column as wide as its widest cell, two spaces
    apart, left-aligned (``right``: right-aligned, for columns of numbers). A row shorter than the
    header ends in a note that runs free (why a series has no values): its other cells align, and
    the note widens no column."""
    aligned = [header, *(row if len(row) == len(header) else row[:-1] for row in rows)]
    widths = [max(len(row[i]) for row in aligned if i < len(row)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if right else c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(row) if len(row) == len(header) else f"{line(row[:-1])}  {row[-1]}" for row in rows]
    return out
