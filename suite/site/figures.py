"""The site's figures, computed from runs: Pareto (accuracy against throughput and memory), kernel
and decode sweeps (time and memory against length, log-log, crossover marked), fidelity (error
against feature size and length, denominator first).

Sweep and fidelity records are read defensively: points are the dicts under ``metrics.points``
(and ``metrics.reference.points``, a reference method's sweep), else the first list of dicts in
``metrics``; nested dicts are flattened (``{"fwd": {"median_s": 1}}`` -> ``fwd.median_s``) and a
statistics dict (mean, median, ...) stands for its mean. What to plot is what suite.metrics declares
for the kind (``KERNEL_METRICS``, ...), else every key whose name carries a unit (``_s``,
``_bytes``, ``_error``): of sweeps, time and memory; of fidelity, the errors.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from suite.metrics import BY_NAME, Metric, format_value
from suite.site.board import ACCURACY, Row
from suite.site.runs import Run, declared_metrics, metric_for, number
from suite.site.svg import Axis, Marker, Series, color_of, pareto_front, plot

# Keys that may hold a point's length, feature size, or data source, in order of preference.
LENGTH_KEYS = ("N", "n", "seq_len", "length", "context_len", "context_length")
FEATURE_KEYS = ("d_phi", "num_features", "feature_dim", "features")
SOURCE_KEYS = ("source", "inputs", "distribution")
STAT_KEYS = ("mean", "median", "p50", "value")  # of a statistics dict, the value a plot shows
# Keys that split a sweep into separate figures when its points differ in them.
SPLIT_KEYS = ("causal", "dtype", "head_dim", "value_dim", "batch", "heads", "batch_size")
REFERENCE = ("softmax", "sdpa")  # a crossover is where a method beats the best of these
SPREAD_NAME = re.compile(r"(^|[._])(p\d+|min|max|std|mean|repeats)(_|$)")
FIRST_METRICS = ("denominator_rel_error",)  # the fidelity figures start with the denominator
MAX_SERIES = 10
SWEEP_UNITS = ("s", "bytes")  # kernel and decode figures: time and memory
FIDELITY_UNITS = ("ratio",)  # fidelity figures: relative errors
NOT_PLOTTED = ("skipped",)
DASHES = ("", "7 3", "2 3", "9 3 2 3")  # per implementation of one method (one color)  # a point never attempted is not a failure to mark


@dataclass(frozen=True)
class Figure:
    """One plot of the site: where it goes, its SVG, and a caption saying what it shows."""

    section: str  # "pareto", "kernel", "fidelity", "decode"
    title: str
    svg: str
    caption: str = ""


def metric_axis(metric: Metric, log: bool) -> Axis:
    return Axis(f"{metric.label} ({metric.unit})", log=log, fmt=lambda v: format_value(metric, v))


def length_axis(label: str) -> Axis:
    return Axis(label, log=True, fmt=compact_count, base=2)


def compact_count(n: float) -> str:
    """Lengths as kernel plots write them: 512, 1K (1024), 16K, 1M."""
    for size, suffix in ((2**20, "M"), (2**10, "K")):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{suffix}"
    return f"{n:g}"


def method_colors(names: Iterable[str]) -> dict[str, str]:
    """A stable color per method: softmax first, then by name."""
    ordered = sorted(set(names), key=lambda m: (m != "softmax", m))
    return {m: color_of(i) for i, m in enumerate(ordered)}


# -- Pareto -----------------------------------------------------------------------------------------

def pareto_figures(rows: list[Row], tasks: list[str]) -> list[Figure]:
    """Per task and device: mean test accuracy against mean throughput, then against peak memory."""
    colors = method_colors(r.method for r in rows)
    figures = []
    for task in tasks:
        for device in sorted({r.device for r in rows}):
            for x_metric in (BY_NAME["train_tokens_per_s"], BY_NAME["peak_memory_bytes"]):
                figure = _pareto_figure(rows, task, device, x_metric, colors)
                if figure:
                    figures.append(figure)
    return figures


def _pareto_figure(rows: list[Row], task: str, device: str, x_metric: Metric,
                   colors: dict[str, str]) -> Figure | None:
    placed = []  # (row, x, y)
    for row in rows:
        cell = row.cells.get(task)
        if row.device != device or cell is None:
            continue
        x, y = cell.mean(x_metric.name), cell.mean()
        if x is not None and y is not None:
            placed.append((row, x, y))
    if not placed:
        return None
    front = pareto_front([(x, y) for _, x, y in placed], x_metric.better, ACCURACY.better)
    series: dict[str, Series] = {}
    for row, x, y in placed:
        s = series.setdefault(row.method, Series(row.method, [], colors[row.method], line=False))
        s.points.append((x, y))
        s.tips.append(f"{row.budget} budget, {row.dtype}, {len(row.cells[task].values())} seeds")
    sources = {r.metrics.get("peak_memory_source") for row, _, _ in placed for r in row.cells[task].runs}
    sources.discard(None)
    caption = (f"Mean over seeds of each method's configuration (budget, dtype) on {task}, {device}. "
               f"{x_metric.label}: {'higher' if x_metric.better == 'higher' else 'lower'} is better; "
               f"the line joins the Pareto-optimal points.")
    if x_metric.unit == "bytes" and sources:
        caption += f" Memory source: {', '.join(sorted(map(str, sources)))}."
    title = f"{task} on {device}: {ACCURACY.label} vs {x_metric.label}"
    svg = plot(title, metric_axis(x_metric, log=True), metric_axis(ACCURACY, log=False),
               list(series.values()), frontier=[(placed[i][1], placed[i][2]) for i in front])
    return Figure("pareto", title, svg, caption)


# -- points of sweep and fidelity records -----------------------------------------------------------

def record_points(run: Run) -> list[dict]:
    """The run's measured points, flattened, each with its ``method`` and ``impl``; [] if none."""
    m = run.metrics
    blocks = [(m.get("points"), run.method, m.get("impl", run.impl))]
    if isinstance(m.get("reference"), Mapping):  # a reference method swept beside this one
        ref = m["reference"]
        blocks.append((ref.get("points"), ref.get("method", "reference"), ref.get("impl", "")))
    if not isinstance(blocks[0][0], list):
        first = next((v for v in m.values() if isinstance(v, list) and v and isinstance(v[0], Mapping)), [])
        blocks[0] = (first, *blocks[0][1:])
    points = []
    for found, method, impl in blocks:
        for p in found if isinstance(found, list) else []:
            if isinstance(p, Mapping):
                points.append({"method": str(method), "impl": str(impl), **_flatten(p)})
    return points


def _flatten(point: Mapping, prefix: str = "") -> dict:
    flat: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if not isinstance(value, Mapping):
            flat[name] = value
        elif key == "metrics":  # a "metrics" block: its keys are the point's own
            flat.update(_flatten(value, prefix))
        elif any(k in value for k in STAT_KEYS):  # summary statistics: the central one stands for them
            flat[name] = first_value(value, STAT_KEYS)
        else:
            flat.update(_flatten(value, f"{name}."))
    return flat


def first_value(point: Mapping, keys: tuple[str, ...]) -> Any:
    return next((point[k] for k in keys if k in point and point[k] is not None), None)


def plotted_metrics(kind: str, points: list[dict], units: tuple[str, ...]) -> list[str]:
    """The point keys to plot for records of ``kind``, in ``units``: the declared ones present, else
    those whose name carries a unit; a statistic beside a median (p10, max, ...) is not its own plot."""
    present = list(dict.fromkeys(k for p in points for k, v in p.items() if number(v) is not None))
    chosen = [n for n in declared_metrics(kind) if n in present] or [
        k for k in present if re.search(r"(_s|_bytes|_error)$", k) and not SPREAD_NAME.search(k)
    ]
    chosen = [k for k in chosen if k not in LENGTH_KEYS + FEATURE_KEYS + SPLIT_KEYS and metric_for(k).unit in units]
    first = [k for k in chosen if k in FIRST_METRICS]
    return first + [k for k in chosen if k not in first]


# -- kernel and decode sweeps -----------------------------------------------------------------------

def sweep_figures(runs: list[Run], kind: str, x_label: str) -> list[Figure]:
    """Per device (and shape, where points differ in it) and metric: the metric against length,
    log-log, one line per method and implementation, crossovers marked."""
    points = [(run.device, p) for run in runs if run.kind == kind for p in record_points(run)
              if (number(first_value(p, LENGTH_KEYS)) or 0) > 0]
    if not points:
        return []
    varying = [k for k in SPLIT_KEYS if len({str(p.get(k)) for _, p in points}) > 1]
    table = []  # (group, method, impl, x, point)
    for device, p in points:
        split = ", ".join(f"{k}={p.get(k)}" for k in varying)
        # A reference implementation (SDPA) is softmax's, whichever method's record measured it.
        method = "softmax" if p["impl"] in REFERENCE else p["method"]
        table.append((device + (f" ({split})" if split else ""), method, p["impl"],
                      number(first_value(p, LENGTH_KEYS)), p))
    colors = method_colors(m for _, m, _, _, _ in table)
    figures = []
    for name in plotted_metrics(kind, [p for *_, p in table], SWEEP_UNITS):
        metric = metric_for(name)
        for group in sorted({g for g, *_ in table}):
            rows = [(m, i, x, p) for g, m, i, x, p in table if g == group]
            figure = _sweep_figure(kind, name, metric, group, rows, colors, x_label)
            if figure:
                figures.append(figure)
    return figures


def _sweep_figure(kind: str, name: str, metric: Metric, group: str, rows: list, colors: dict[str, str],
                  x_label: str) -> Figure | None:
    values: dict[tuple[str, str], dict[float, list[float]]] = {}
    failed: dict[tuple[str, str], dict[float, str]] = {}
    for method, impl, x, p in rows:
        key = (method, impl)
        value, status = number(p.get(name)), str(p.get("status", "ok"))
        values.setdefault(key, {})
        if status == "ok" and value is not None and value > 0:
            values[key].setdefault(x, []).append(value)
        elif status not in NOT_PLOTTED and status != "ok":
            failed.setdefault(key, {})[x] = status
    series, lines_per_method = [], Counter()
    for (method, impl), by_x in sorted(values.items()):
        dash = DASHES[lines_per_method[method] % len(DASHES)]
        lines_per_method[method] += 1
        # The same implementation measured by several records (SDPA in each): their mean.
        pts = [(x, sum(v) / len(v)) for x, v in sorted(by_x.items())]
        fails = sorted(failed.get((method, impl), {}).items())
        if pts or fails:
            label = method if impl in ("", "None", method) else f"{method} · {impl}"
            series.append(Series(label, pts, colors[method], failed=fails, dash=dash))
    if not any(s.points for s in series):
        return None
    markers = crossover_markers(rows, name, metric, colors)
    title = f"{kind}: {metric.label} vs {x_label}, {group}"
    caption = (f"{metric.label} ({name}); {'lower' if metric.better == 'lower' else 'higher'} is better. "
               f"Log-log. Vertical lines: where a method becomes better than the best of "
               f"{' / '.join(REFERENCE)} and stays so (interpolated in log space).")
    svg = plot(title, length_axis(x_label), metric_axis(metric, log=True), series[:MAX_SERIES * 2],
               markers=markers)
    return Figure(kind, title, svg, caption)


def best_curve(rows: list, name: str, better: str | None, keep) -> dict[float, float]:
    """Per length, the best ok value of ``name`` over the rows ``keep`` accepts."""
    pick = max if better == "higher" else min
    curve: dict[float, float] = {}
    for method, impl, x, p in rows:
        value = number(p.get(name))
        if keep(method, impl) and p.get("status", "ok") == "ok" and value is not None and value > 0:
            curve[x] = pick(curve[x], value) if x in curve else value
    return curve


def crossover(reference: dict[float, float], other: dict[float, float], better: str | None) -> float | None:
    """The length from which ``other`` stays better than ``reference`` at every longer common
    length, interpolated in log-log between the two lengths that bracket the change; None when it
    is never better at the longest length or better everywhere (no crossover inside the range)."""
    xs = sorted(set(reference) & set(other))
    sign = 1.0 if better == "higher" else -1.0
    gain = [sign * math.log(other[x] / reference[x]) for x in xs]  # > 0: other is better
    if not xs or gain[-1] <= 0:
        return None
    worse = [i for i, g in enumerate(gain) if g <= 0]
    if not worse:
        return None
    i = worse[-1]
    a, b = math.log(xs[i]), math.log(xs[i + 1])
    return math.exp(a + (b - a) * (0.0 - gain[i]) / (gain[i + 1] - gain[i]))


def crossover_markers(rows: list, name: str, metric: Metric, colors: dict[str, str]) -> list[Marker]:
    """A marker per method that overtakes the reference (softmax / SDPA) in time or memory inside
    the measured range."""
    if metric.unit not in SWEEP_UNITS:
        return []
    is_reference = lambda m, i: m in REFERENCE or i in REFERENCE  # noqa: E731
    reference = best_curve(rows, name, metric.better, is_reference)
    markers = []
    for method in sorted({m for m, *_ in rows} - set(REFERENCE)):
        curve = best_curve(rows, name, metric.better, lambda m, i, method=method: m == method and not is_reference(m, i))
        x = crossover(reference, curve, metric.better) if reference and curve else None
        if x is not None:
            markers.append(Marker(x, f"{method} beats softmax from N≈{compact_count(round(x))}", colors[method]))
    return markers


# -- fidelity ---------------------------------------------------------------------------------------

def fidelity_figures(runs: list[Run]) -> list[Figure]:
    """Each error (the denominator's first) against feature size and against length: one line per
    method and source, per length (or feature size) when few, else at the largest."""
    table = []  # (method, source, d_phi, N, point)
    for run in runs:
        if run.kind == "fidelity":
            table.extend((p["method"], str(first_value(p, SOURCE_KEYS) or ""), number(first_value(p, FEATURE_KEYS)),
                          number(first_value(p, LENGTH_KEYS)), p) for p in record_points(run))
    figures = []
    for name in plotted_metrics("fidelity", [p for *_, p in table], FIDELITY_UNITS):
        for against in ("d_phi", "N"):
            figure = _fidelity_figure(table, name, metric_for(name), against)
            if figure:
                figures.append(figure)
    return figures


def _fidelity_figure(table: list, name: str, metric: Metric, against: str) -> Figure | None:
    # x is the swept quantity; the other one labels (or, when too many, fixes) the series.
    pos, fixed = (2, 3) if against == "d_phi" else (3, 2)
    rows = [r for r in table if r[pos] is not None and r[pos] > 0 and (number(r[4].get(name)) or 0) > 0]
    if len({r[pos] for r in rows}) < 2:
        return None
    keys = sorted({(r[0], r[1], r[fixed]) for r in rows}, key=lambda k: (k[0], k[1], k[2] or 0))
    if len(keys) > MAX_SERIES:  # only the largest value of the fixed quantity per method and source
        largest: dict[tuple[str, str], float] = {}
        for m, s, f in keys:
            largest[(m, s)] = max(largest.get((m, s), 0), f or 0)
        keys = [(m, s, f or None) for (m, s), f in largest.items()]
    other = "N" if against == "d_phi" else "d_phi"
    series = []
    for method, source, f in keys:
        pts = sorted((r[pos], number(r[4][name])) for r in rows if (r[0], r[1], r[fixed]) == (method, source, f))
        if pts:
            label = " · ".join(x for x in (method, source, f"{other}={compact_count(f)}" if f else "") if x)
            series.append(Series(label, pts, color_of(len(series))))
    if not series:
        return None
    title = f"fidelity: {metric.label} vs {against}"
    x_axis = length_axis("N (sequence length)") if against == "N" else Axis("d_phi (features)", log=True, fmt=compact_count, base=2)
    caption = (f"{metric.label} ({name}) against exact softmax attention; lower is better. Log-log. "
               "Where the record holds statistics over queries, the mean is plotted.")
    return Figure("fidelity", title, plot(title, x_axis, metric_axis(metric, log=True), series[:MAX_SERIES]), caption)
