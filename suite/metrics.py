"""Metrics declared once: name, label, unit and which direction is better. Each mode declares its
own (suite/modes/<mode>/__init__.py), as a table (``metric_table``); the modes' registry gathers them
(``suite.modes.declared()``): this module imports no mode.

The summary table, the record and the site all read these declarations, so a metric is named and
formatted the same way everywhere.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

Unit = Literal["fraction", "tokens/s", "s", "bytes", "count", "ratio", "tokens", "flop/s"]
UNITS = typing.get_args(Unit)


@dataclass(frozen=True)
class Metric:
    name: str  # the key in a record's ``metrics``
    label: str  # column header
    unit: Unit
    better: Literal["higher", "lower"] | None


def metric_table(text: str) -> tuple[Metric, ...]:
    """Metrics written as a table, one a line: ``name | label | unit | better``, ``better`` being
    higher, lower or empty (neither is better). A unit or direction outside these is refused when
    the mode declaring it is imported."""
    found = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) != 4 or cells[2] not in UNITS or cells[3] not in ("higher", "lower", ""):
            raise ValueError(f"a metric is 'name | label | unit | higher, lower or nothing' with a unit among "
                             f"{', '.join(UNITS)}; got {line.strip()!r}")
        name, label, unit, better = cells
        found.append(Metric(name, label, unit, better or None))
    return tuple(found)


def format_bytes(value: float) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_seconds(value: float) -> str:
    """Seconds as ms below one second (to 0.01 ms below 10 ms), else s."""
    if value < 0.01:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def format_value(metric: Metric, value: float | int | None) -> str:
    """Humanise a raw value (stored in bytes, seconds, fractions) for display."""
    if value is None:
        return "-"
    if metric.unit == "fraction":
        return f"{100 * value:.1f}%"
    if metric.unit == "bytes":
        return format_bytes(value)
    if metric.unit == "s":
        if value < 1e-3:  # decode steps take microseconds
            return f"{value * 1e6:.0f} us"
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.1f} s"
    if metric.unit == "tokens":
        return f"{value:,.0f}"
    if metric.unit == "flop/s":
        return f"{value / 1e9:,.1f} G"
    if metric.unit == "tokens/s":
        return f"{value:,.0f}"
    if metric.unit == "count":
        return f"{value:,}"
    return f"{value:.3g}"
