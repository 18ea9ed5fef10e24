"""The per-implementation summary of a sweep (slopes, crossovers, rates) and its printed table."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from suite import scaling
from suite.metrics import Metric, format_seconds, format_value
from suite.modes.common import text_table
from suite.modes.kernel import PHASES, SERIES_METRICS
from suite.modes.kernel.implementations import SDPA

SHAPE_KEY = ("causal", "dtype", "head_dim", "value_dim", "batch", "heads")
SERIES_KEY = ("impl", "source", *SHAPE_KEY)
# The range of the scaling goals (2K..8K tokens), fitted on its own when the grid covers it.
GOAL_RANGE = (2048, 8192)


def series_of(points: Sequence[Mapping]) -> dict[tuple, list[Mapping]]:
    """Points grouped by implementation and shape (everything but the length), in sweep order."""
    groups: dict[tuple, list[Mapping]] = defaultdict(list)
    for point in points:
        groups[tuple(point[k] for k in SERIES_KEY)].append(point)
    return groups


def _ok_by_length(points: Sequence[Mapping]) -> dict[int, Mapping]:
    return {p["length"]: p for p in sorted(points, key=lambda p: p["length"]) if p["status"] == "ok"}


def summarize(points: Sequence[Mapping]) -> list[dict]:
    """One row per series: its figures at the longest measured length, slopes and crossovers."""
    groups = series_of(points)
    rows = []
    for key, members in groups.items():
        row = dict(zip(SERIES_KEY, key))
        ok = _ok_by_length(members)
        row["lengths_measured"] = len(ok)
        row["statuses"] = sorted({p["status"] for p in members})
        if not ok:
            row["reason"] = next((p["reason"] for p in members if p["reason"]), None)
            rows.append(row)
            continue
        longest = ok[max(ok)]
        row["longest_length"] = longest["length"]
        for name in ("fwd_median_s", "fwdbwd_median_s", "fwd_peak_memory_bytes", "fwdbwd_peak_memory_bytes",
                     "fwdbwd_flops_per_s", "fwdbwd_matmul_fraction", "fwd_matmul_fraction"):
            row[name] = longest.get(name)  # the FLOP rates are absent for a method that declares no FLOPs
        lengths = list(ok)
        for phase in PHASES:
            times = [ok[n][f"{phase}_median_s"] for n in lengths]
            row[f"slope_{phase}"] = scaling.loglog_slope(lengths, times)
            row[f"slope_{phase}_2k_8k"] = scaling.slope_between(lengths, times, *GOAL_RANGE)
        row.update(_against_reference(row, ok, groups))
        rows.append(row)
    return rows


def _against_reference(row: Mapping, ok: Mapping[int, Mapping], groups: Mapping[tuple, list]) -> dict:
    """Crossovers with SDPA softmax of the same shape, and the speed-up at the longest common length."""
    if row["impl"] == SDPA:
        return {}
    shape = [row[k] for k in SHAPE_KEY]
    reference = next((_ok_by_length(members) for members in groups.values()
                      if members[0]["impl"] == SDPA and [members[0][k] for k in SHAPE_KEY] == shape), {})
    common = [n for n in ok if n in reference]
    found = {}
    for phase in PHASES:
        times = [ok[n][f"{phase}_median_s"] for n in common]
        reference_times = [reference[n][f"{phase}_median_s"] for n in common]
        cross = scaling.crossover(common, times, reference_times)
        found[f"crossover_{phase}"] = cross
        found[f"crossover_{phase}_length"] = cross["length"]
    if common:
        n = common[-1]
        found["speedup_vs_sdpa_length"] = n
        found["fwdbwd_speedup_vs_sdpa"] = reference[n]["fwdbwd_median_s"] / ok[n]["fwdbwd_median_s"]
        found["fwd_speedup_vs_sdpa"] = reference[n]["fwd_median_s"] / ok[n]["fwd_median_s"]
    return found


def cell(metric: Metric, row: Mapping) -> str:
    """One table cell: times with sub-ms precision, crossovers with where they fall."""
    value = row.get(metric.name)
    if metric.name.startswith("crossover_"):
        cross = row.get(metric.name.removesuffix("_length"))
        if cross is None:
            return "ref" if row["impl"] == SDPA else "-"
        if cross["where"] == "below_grid":
            return f"<={cross['length']:,.0f}"
        if cross["where"] == "beyond_grid":
            return f">{cross['checked_up_to']:,}"
        if cross["where"] == "no_common_lengths":
            return "-"
    if metric.unit == "s" and value is not None:
        return format_seconds(value)
    return format_value(metric, value)


def table(rows: Sequence[Mapping]) -> str:
    """The summary rows as a fixed-width text table, one line per series; a series with no
    measured length has its four identifying cells, then why."""
    header = ["impl", "mask", "dtype", "D", *(m.label for m in SERIES_METRICS)]
    lines = []
    for row in rows:
        ident = [row["impl"], "causal" if row["causal"] else "full", row["dtype"], str(row["head_dim"])]
        if "longest_length" not in row:
            lines.append(ident + [f"({', '.join(row['statuses'])}: {row.get('reason') or ''})"])
            continue
        lines.append(ident + [cell(m, row) for m in SERIES_METRICS])
    return "\n".join(text_table(header, lines))
