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

from suite.metrics import Metric, declared, format_bytes, format_value
from suite.site.board import ACCURACY, VERDICTS, Cell, Column, Row, format_lr
from suite.site.runs import Run, declared_metrics, metric_for, number
from suite.site.svg import PALETTE, SHAPES, Axis, Marker, Series, color_of, pareto_front, plot, shape_of

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
MAX_FIDELITY_SERIES = 10  # beyond this, a fidelity figure keeps one line per method and source (and says so)
MQAR = "mqar"  # the recall task with the board's own figures
FIDELITY_FEATURES = 256  # the fidelity headline's feature count: each method's nearest measured one
SWEEP_UNITS = ("s", "bytes")  # kernel and decode figures: time and memory
FIDELITY_UNITS = ("ratio",)  # fidelity figures: relative errors
NOT_PLOTTED = ("skipped",)  # a point never attempted is not a failure to mark
DASHES = ("", "7 3", "2 3", "9 3 2 3")  # per implementation of one method (one color)


@dataclass(frozen=True)
class Figure:
    """One plot of the site: where it goes, its SVG, and a caption saying what it shows."""

    section: str  # "board", or the kind of the records it draws (a mode's section of the plots page)
    title: str
    svg: str
    caption: str = ""


def metric_axis(metric: Metric, log: bool) -> Axis:
    if metric.unit == "bytes":  # binary powers read round (1 MiB, 4 MiB), decimal ones do not
        return bytes_axis(f"{metric.label} ({metric.unit})")
    return Axis(f"{metric.label} ({metric.unit})", log=log, fmt=lambda v: format_value(metric, v))


def bytes_axis(label: str) -> Axis:
    return Axis(label, log=True, fmt=lambda v: format_bytes(v).replace(".0 ", " "), base=2)


def length_axis(label: str) -> Axis:
    return Axis(label, log=True, fmt=compact_count, base=2)


def compact_count(n: float) -> str:
    """Lengths as kernel plots write them: 512, 1K (1024), 16K, 1M."""
    for size, suffix in ((2**20, "M"), (2**10, "K")):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{suffix}"
    return f"{n:g}"


def method_styles(names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """A stable (colour, marker shape) per method: softmax first, then by name; the pair is distinct
    for the first 30 methods, so colour is never a series' only cue."""
    ordered = sorted(set(names), key=lambda m: (m != "softmax", m))
    return {m: (color_of(i), shape_of(i)) for i, m in enumerate(ordered)}


def crowding_note(series: list[Series]) -> str:
    """What a caption says when a plot has more series than colours (every series is drawn)."""
    if len(series) <= len(PALETTE):
        return ""
    pairs = len(PALETTE) * len(SHAPES) // math.gcd(len(PALETTE), len(SHAPES))
    how = ("colour and marker shape together tell them apart" if len(series) <= pairs
           else "some share colour and shape; hover a point for its series")
    return f" {len(series)} series, more than the {len(PALETTE)} colours: all are drawn; {how}."


def by_device_and_budget(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    """Rows per (device, budget): an accuracy plot shows one budget on one device."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.device, row.budget), []).append(row)
    return dict(sorted(groups.items()))


def add_point(series: Series, x: float, cell: Cell, where: str, size: float | None = None) -> None:
    """A cell's mean accuracy at ``x``: a bar of its spread, hollow unless clearly above baseline."""
    series.points.append((x, cell.mean()))
    series.errors.append(cell.spread())
    series.hollow.append(cell.verdict() != "above")
    if size is not None:
        series.sizes.append(size)
    lr = "" if cell.lr is None else f", lr {format_lr(cell.lr)}"
    series.tips.append(f"{where}, n={len(cell.values())}{lr}, {VERDICTS[cell.verdict()] or 'clearly above baseline'}")


HOLLOW = "Hollow markers: not clearly above baseline (n=1, or mean − 2·SE ≤ baseline)."


# -- Pareto -----------------------------------------------------------------------------------------

def pareto_figures(rows: list[Row], columns: list[Column]) -> list[Figure]:
    """Per board point, device and budget: mean test accuracy against mean throughput, then memory."""
    styles = method_styles(r.method for r in rows)
    figures = []
    for column in columns:
        for (device, budget), group in by_device_and_budget(rows).items():
            for x_metric in (declared("train")["train_tokens_per_s"], declared("train")["peak_memory_bytes"]):
                figure = _pareto_figure(group, column, f"{budget} budget, {device}", x_metric, styles)
                if figure:
                    figures.append(figure)
    return figures


def _pareto_figure(rows: list[Row], column: Column, where: str, x_metric: Metric,
                   styles: dict[str, tuple[str, str]]) -> Figure | None:
    placed = []  # (row, x, y)
    for row in rows:
        cell = row.cells.get(column)
        x, y = (cell.mean(x_metric.name), cell.mean()) if cell else (None, None)
        if x is not None and y is not None:
            placed.append((row, x, y))
    if not placed:
        return None
    front = pareto_front([(x, y) for _, x, y in placed], x_metric.better, ACCURACY.better)
    by_method: dict[str, Series] = {}
    for row, x, y in placed:
        color, shape = styles[row.method]
        s = by_method.setdefault(row.method, Series(row.method, [], color, line=False, shape=shape))
        s.points.append((x, y))
        s.tips.append(f"{row.dtype}, {len(row.cells[column].values())} seeds")
    series = list(by_method.values())
    sources = {r.metrics.get("peak_memory_source") for row, _, _ in placed for r in row.cells[column].runs}
    sources.discard(None)
    caption = (f"Mean over seeds of each method on {column.label} ({where}). "
               f"{x_metric.label}: {'higher' if x_metric.better == 'higher' else 'lower'} is better; "
               f"the line joins the Pareto-optimal points.")
    if x_metric.unit == "bytes" and sources:
        caption += f" Memory source: {', '.join(sorted(map(str, sources)))}."
    title = f"{column.label}, {where}: {ACCURACY.label} vs {x_metric.label}"
    svg = plot(title, metric_axis(x_metric, log=True), metric_axis(ACCURACY, log=False),
               series, frontier=[(placed[i][1], placed[i][2]) for i in front])
    return Figure("train", title, svg, caption + crowding_note(series))


# -- the board's figures: MQAR recall, accuracy against state size, accuracy against cost ------------

def board_figures(rows: list[Row], columns: list[Column]) -> list[Figure]:
    """The figures under the board's tables: MQAR accuracy against key-value pairs and against state
    size, then accuracy against throughput and memory per board point (MQAR's points together)."""
    styles = method_styles(r.method for r in rows)
    figures: list[Figure] = []
    for (device, budget), group in by_device_and_budget(rows).items():
        where = f"{budget} budget, {device}"
        usual = [r for r in group if not r.variant]  # variants (other widths, features) join the state plots
        figures += recall_figures(usual, columns, where, styles)
        figures += state_figures(group, columns, where, styles)
        figures += cost_figures(usual, columns, where, styles)
    return figures


def recall_figures(rows: list[Row], columns: list[Column], where: str, styles) -> list[Figure]:
    """Per model: MQAR accuracy against the number of key-value pairs, one line per method."""
    figures = []
    mqar = sorted((c for c in columns if c.task == MQAR and c.recall), key=lambda c: (c.num_kv_pairs, c.seq_len))
    for model in sorted({c.model or "" for c in mqar}):
        points = [c for c in mqar if (c.model or "") == model]
        one_per_x = len({c.num_kv_pairs for c in points}) == len(points)  # else a line would zigzag
        series = []
        for row in rows:
            color, shape = styles[row.method]
            s = Series(row.method, [], color, line=one_per_x, shape=shape)
            for column in points:
                cell = row.cells.get(column)
                if cell and cell.mean() is not None:
                    add_point(s, column.num_kv_pairs, cell, column.label)
            if s.points:
                series.append(s)
        if not series:
            continue
        on = f" on the {model} model" if model else ""
        title = f"MQAR: {ACCURACY.label} vs key-value pairs{on}, {where}"
        x_axis = Axis("key-value pairs", log=True, fmt=compact_count, base=2)
        caption = (f"{ACCURACY.label} on MQAR against the number of key-value pairs to recall{on} ({where}); "
                   f"board points (length·pairs): {', '.join(f'{c.seq_len}·{c.num_kv_pairs}' for c in points)}. "
                   f"Bars: ± one standard deviation over seeds. {HOLLOW}")
        figures.append(Figure("board", title, plot(title, x_axis, metric_axis(ACCURACY, log=False), series),
                              caption + crowding_note(series)))
    return figures


def state_figures(rows: list[Row], columns: list[Column], where: str, styles) -> list[Figure]:
    """Per MQAR board point: accuracy against the bytes of recurrent state (Based, Figure 2)."""
    figures = []
    for column in (c for c in columns if c.task == MQAR):
        series = []
        for method in dict.fromkeys(r.method for r in rows):
            color, shape = styles[method]
            s = Series(method, [], color, shape=shape)
            # Every configuration of the method counts here (its variant rows too): one point per
            # state size it was run at.
            cells = [r.cells[column] for r in rows if r.method == method and column in r.cells]
            placed = [(c.median("state_bytes"), c) for cell in cells for c in (cell, *cell.others)]
            for state, c in sorted((p for p in placed if p[0] and p[1].mean() is not None), key=lambda p: p[0]):
                add_point(s, state, c, column.label)
            if s.points:
                series.append(s)
        if not series:
            continue
        title = f"{column.label}: {ACCURACY.label} vs state size, {where}"
        caption = (f"{ACCURACY.label} against the bytes of each method's recurrent state per sequence "
                   f"(softmax: its KV cache) on {column.label} ({where}); log x. A method run at several state "
                   f"sizes has a point for each. Bars: ± one standard deviation over seeds. {HOLLOW}")
        svg = plot(title, bytes_axis("state size (bytes)"), metric_axis(ACCURACY, log=False), series)
        figures.append(Figure("board", title, svg, caption + crowding_note(series)))
    return figures


def cost_figures(rows: list[Row], columns: list[Column], where: str, styles) -> list[Figure]:
    """LRA's Figure 3 form: accuracy against train throughput, marker area by peak memory; one
    figure per board point, MQAR's points in one."""
    groups = [[c] for c in columns if c.task != MQAR] + [[c for c in columns if c.task == MQAR]]
    figures = []
    for group in (g for g in groups if g):
        placed = []  # (row, column, tokens/s, peak memory, cell)
        for row in rows:
            for column in group:
                cell = row.cells.get(column)
                speed = cell.median("train_tokens_per_s") if cell else None
                if speed and cell.mean() is not None:
                    placed.append((row, column, speed, cell.median("peak_memory_bytes"), cell))
        if not placed:
            continue
        largest = max((m for *_, m, _ in placed if m), default=None)
        series: dict[str, Series] = {}
        for row, column, speed, memory, cell in placed:
            color, shape = styles[row.method]
            s = series.setdefault(row.method, Series(row.method, [], color, line=False, shape=shape))
            # Area proportional to memory; a run that recorded none gets the smallest marker.
            add_point(s, speed, cell, column.label, 3 + 9 * math.sqrt(memory / largest) if memory and largest else 3)
        name = group[0].label if len(group) == 1 else "MQAR"
        title = f"{name}: {ACCURACY.label} vs train throughput, {where}"
        sizes = f"largest: {format_bytes(largest)}" if largest else "no run recorded its memory"
        caption = (f"{ACCURACY.label} against train tokens/s (median over the cell's runs) on "
                   f"{', '.join(c.label for c in group)} ({where}), as in LRA's Figure 3. Marker area is "
                   f"proportional to peak memory ({sizes}). Bars: ± one standard deviation over seeds. {HOLLOW}")
        if len(group) > 1:
            caption += " Each method has one point per MQAR board point (hover a point for which)."
        svg = plot(title, metric_axis(declared("train")["train_tokens_per_s"], log=True), metric_axis(ACCURACY, log=False),
                   list(series.values()))
        figures.append(Figure("board", title, svg, caption + crowding_note(list(series.values()))))
    return figures


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
    styles = method_styles(m for _, m, _, _, _ in table)
    figures = []
    for name in plotted_metrics(kind, [p for *_, p in table], SWEEP_UNITS):
        metric = metric_for(name)
        for group in sorted({g for g, *_ in table}):
            rows = [(m, i, x, p) for g, m, i, x, p in table if g == group]
            figure = _sweep_figure(kind, name, metric, group, rows, styles, x_label)
            if figure:
                figures.append(figure)
    return figures


def _sweep_figure(kind: str, name: str, metric: Metric, group: str, rows: list,
                  styles: dict[str, tuple[str, str]], x_label: str) -> Figure | None:
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
            color, shape = styles[method]
            series.append(Series(label, pts, color, failed=fails, dash=dash, shape=shape))
    if not any(s.points for s in series):
        return None
    markers = crossover_markers(rows, name, metric, {m: color for m, (color, _) in styles.items()})
    title = f"{kind}: {metric.label} vs {x_label}, {group}"
    caption = (f"{metric.label} ({name}); {'lower' if metric.better == 'lower' else 'higher'} is better. "
               f"Log-log. Vertical lines: where a method becomes better than the best of "
               f"{' / '.join(REFERENCE)} and stays so (interpolated in log space).")
    svg = plot(title, length_axis(x_label), metric_axis(metric, log=True), series, markers=markers)
    return Figure(kind, title, svg, caption + crowding_note(series))


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
    other = "N" if against == "d_phi" else "d_phi"
    reduced = ""
    if len(keys) > MAX_FIDELITY_SERIES:  # too many lines to read: the largest fixed value per method and source
        largest: dict[tuple[str, str], float] = {}
        for m, s, f in keys:
            largest[(m, s)] = max(largest.get((m, s), 0), f or 0)
        reduced = (f" {len(keys)} lines (method · source · {other}) are too many to read: each method and "
                   f"source is shown at its largest {other} only; the run pages list every point.")
        keys = [(m, s, f or None) for (m, s), f in largest.items()]
    series = []
    for method, source, f in keys:
        pts = sorted((r[pos], number(r[4][name])) for r in rows if (r[0], r[1], r[fixed]) == (method, source, f))
        if pts:
            label = " · ".join(x for x in (method, source, f"{other}={compact_count(f)}" if f else "") if x)
            series.append(Series(label, pts, color_of(len(series)), shape=shape_of(len(series))))
    if not series:
        return None
    title = f"fidelity: {metric.label} vs {against}"
    x_axis = length_axis("N (sequence length)") if against == "N" else Axis("d_phi (features)", log=True, fmt=compact_count, base=2)
    caption = (f"{metric.label} ({name}) against exact softmax attention; lower is better. Log-log. "
               "Where the record holds statistics over queries, the mean is plotted.")
    svg = plot(title, x_axis, metric_axis(metric, log=True), series)
    return Figure("fidelity", title, svg, caption + reduced + crowding_note(series))


@dataclass(frozen=True)
class FidelityHeadline:
    """The denominator's relative error per method and input source, at one length and feature count."""

    length: float
    sources: list[str]
    rows: list[tuple[str, float, dict[str, float]]]  # method, its feature count used, mean error per source


def fidelity_headline(runs: list[Run]) -> FidelityHeadline | None:
    """From each method's latest fidelity record: the mean denominator error at the longest length
    every method measured, at the method's feature count nearest FIDELITY_FEATURES; None without one."""
    by_method: dict[str, list[tuple[str, float, float, float]]] = {}  # method -> (source, N, d_phi, error)
    for run in sorted((r for r in runs if r.kind == "fidelity" and r.status == "ok"), key=lambda r: r.created):
        found: dict[str, list] = {}
        for p in record_points(run):
            n, d = number(first_value(p, LENGTH_KEYS)), number(first_value(p, FEATURE_KEYS))
            error = number(p.get("denominator_rel_error"))
            if n and d and error is not None:
                found.setdefault(p["method"], []).append((str(first_value(p, SOURCE_KEYS) or "-"), n, d, error))
        by_method.update(found)  # a later record of a method replaces an earlier one
    common = set.intersection(*({n for _, n, _, _ in pts} for pts in by_method.values())) if by_method else set()
    if not common:
        return None
    length = max(common)
    rows, sources = [], []
    for method, pts in sorted(by_method.items()):
        at_length = [p for p in pts if p[1] == length]
        features = min({d for _, _, d, _ in at_length}, key=lambda d: (abs(math.log(d / FIDELITY_FEATURES)), -d))
        errors: dict[str, list[float]] = {}
        for source, _, d, error in at_length:
            if d == features:
                errors.setdefault(source, []).append(error)
                sources += [source] if source not in sources else []
        rows.append((method, features, {s: sum(v) / len(v) for s, v in errors.items()}))
    return FidelityHeadline(length, sources, rows)
