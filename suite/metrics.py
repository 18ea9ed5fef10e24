"""Metrics declared once: name, label, unit and which direction is better.

The summary table, the record and the site all read these declarations, so a metric is named and
formatted the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str  # the key in a record's ``metrics``
    label: str  # column header
    unit: Literal["fraction", "tokens/s", "s", "bytes", "count", "ratio"]
    better: Literal["higher", "lower"] | None


TRAIN_METRICS = (
    Metric("test_accuracy", "test acc", "fraction", "higher"),
    Metric("baseline_accuracy", "baseline acc", "fraction", None),
    Metric("val_accuracy", "best val acc", "fraction", "higher"),
    Metric("train_tokens_per_s", "train tok/s", "tokens/s", "higher"),
    Metric("median_step_time_s", "median step", "s", "lower"),
    Metric("peak_memory_bytes", "peak memory", "bytes", "lower"),
    Metric("param_count", "params", "count", None),
    Metric("wall_time_s", "wall time", "s", "lower"),
)

BY_NAME = {m.name: m for m in TRAIN_METRICS}


def format_value(metric: Metric, value: float | int | None) -> str:
    """Humanise a raw value (stored in bytes, seconds, fractions) for display."""
    if value is None:
        return "-"
    if metric.unit == "fraction":
        return f"{100 * value:.1f}%"
    if metric.unit == "bytes":
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(value) < 1024 or unit == "TiB":
                return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
            value /= 1024
    if metric.unit == "s":
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.1f} s"
    if metric.unit == "tokens/s":
        return f"{value:,.0f}"
    if metric.unit == "count":
        return f"{value:,}"
    return f"{value:.3g}"
