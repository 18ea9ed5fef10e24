"""The site's figures, computed from runs: the board's (MQAR accuracy against key-value pairs and
against state size, accuracy against throughput with memory as marker size), Pareto (accuracy
against throughput and memory), kernel and decode sweeps (time and memory against length, log-log,
crossovers marked, kernel times with their p10-p90 band), fidelity (error against feature size and
length, the denominator first).

Every value is read from the record's schema (suite/schema.py): a sweep's points and the field it
sweeps (its mode's ``SWEEP``), a fidelity point's statistics over queries (their mean is plotted).
What is plotted of a kind is what its mode declares (suite/modes/<mode>/); suite/site/charts.py
draws it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from suite import scaling
from suite.metrics import Metric, format_bytes, format_seconds, format_value
from suite.modes import declared, sweep_layout
from suite.schema import Statistics
from suite.site import known, stats
from suite.site.board import (
    ACCURACY,
    NO_STATE,
    RECALL_FAMILIES,
    VERDICTS,
    Cell,
    Column,
    Row,
    by_host,
    column_baselines,
    format_lr,
    verdict,
    within_sampling_error,
)
from suite.site.charts import PALETTE, SHAPES, Axis, Layout, chart
from suite.site.costs import INFERENCE, CellCost, cost_for
from suite.site.runs import Run, metric_for

# A crossover is where a method beats the best of exact attention's implementations: the methods
# package's reference method (suite/site/known.py) and these implementations of it, in whichever
# method's record they were measured (PyTorch's scaled_dot_product_attention).
REFERENCE_IMPLS = ("sdpa",)
FIRST_METRICS = ("denominator_rel_error",)  # the fidelity figures start with the denominator
MAX_FIDELITY_SERIES = 10  # beyond this, a fidelity figure keeps one line per method and source (and says so)
FIDELITY_FEATURES = 256  # the fidelity headline's feature count: each method's nearest measured one
SWEEP_UNITS = ("s", "bytes")  # kernel and decode figures: time and memory
NOT_PLOTTED = ("skipped",)  # a point never attempted is not a failure to mark
HOLLOW = ("Hollow markers: not clearly above baseline (n=1, or the comparison test cannot separate it from the "
          "baseline).")
BASELINE = "Grey dashed: the baseline, what a model that learned nothing scores (hover it for which)."
LEGEND = "Hover a point for its values; click a legend entry to show that series alone (shift-click: more)."


@dataclass(frozen=True)
class Figure:
    """One plot of the site: where it goes, its Vega-Lite spec, and a caption saying what it shows."""

    section: str  # "board", or the kind of the records it draws (a mode's section of the plots page)
    title: str
    spec: dict
    caption: str = ""

    def series(self) -> list[str]:
        """The names of the series drawn (each has a legend entry)."""
        blocks = [self.spec, *self.spec["layer"]]
        rows = [row for block in blocks for row in block.get("data", {}).get("values", [])]
        return sorted({r["series"] for r in rows if "series" in r})


def metric_axis(metric: Metric, log: bool) -> Axis:
    unit = {"fraction": "fraction", "bytes": "bytes", "s": "s"}.get(metric.unit, "")
    shown = "%" if metric.unit == "fraction" else metric.unit  # a fraction's ticks are written in percent
    return Axis(f"{metric.label} ({shown})", unit, log=log or metric.unit == "bytes")


def baseline_levels(rows: list[Row], columns: list[Column]) -> list[dict]:
    """The baselines of ``columns`` as horizontal lines ({y, label}), one per distinct accuracy: every
    accuracy figure draws what learning nothing scores beside what was learnt."""
    found = column_baselines(rows)
    levels: dict[float, list[str]] = {}
    for column in (c for c in columns if c in found):
        levels.setdefault(found[column].accuracy, []).append(f"{column.label}: {found[column].name}")
    return [{"y": y, "label": f"{format_value(ACCURACY, y)}, " + "; ".join(labels)} for y, labels in levels.items()]


def compact_count(n: float) -> str:
    """Lengths as kernel plots write them: 512, 1K (1024), 16K, 1M."""
    for size, suffix in ((2**20, "M"), (2**10, "K")):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{suffix}"
    return f"{n:g}"


def crowding_note(series: Iterable[str]) -> str:
    """What a caption says when a plot has more series than colours (every series is drawn)."""
    count = len(set(series))
    if count <= len(PALETTE):
        return ""
    pairs = len(PALETTE) * len(SHAPES) // math.gcd(len(PALETTE), len(SHAPES))
    how = ("colour and marker shape together tell them apart" if count <= pairs
           else "some share colour and shape; hover a point for its series")
    return f" {count} series, more than the {len(PALETTE)} colours: all are drawn; {how}."


def by_device_and_budget(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    """Rows per (device, budget): an accuracy plot shows one budget on one device."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.device, row.budget), []).append(row)
    return dict(sorted(groups.items()))


def cell_row(series: str, x: float, x_text: str, cell: Cell, where: str, size: float | None = None) -> dict:
    """A cell's mean accuracy at ``x`` with ± one standard deviation over seeds; hollow unless
    clearly above its baseline."""
    return accuracy_row(series, x, x_text, cell.values(), cell.baseline(), cell.test_size(), cell.lr, where, size)


def accuracy_text(values: list[float]) -> str:
    """Accuracies over seeds as the board writes them: their mean, ± one standard deviation from two seeds."""
    spread = f" ± {100 * statistics.stdev(values):.1f}" if len(values) >= 2 else ""
    return format_value(ACCURACY, statistics.fmean(values)) + spread


def accuracy_row(series: str, x: float, x_text: str, values: list[float], baseline: float | None,
                 examples: int | None, lr: float | None, where: str, size: float | None = None) -> dict:
    """One point of an accuracy figure: the mean of ``values`` (one per seed, on ``examples`` test
    examples) at ``x`` with ± one standard deviation; hollow unless clearly above ``baseline``;
    ``where`` opens its tooltip."""
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if len(values) >= 2 else None
    judged = verdict(values, baseline, examples)
    rate = "" if lr is None else f", lr {format_lr(lr)}"
    row = {"series": series, "x": x, "y": mean, "x_text": x_text, "y_text": accuracy_text(values),
           "hollow": judged != "above",
           "tip": f"{where}, n={len(values)}{rate}, {VERDICTS[judged] or 'clearly above baseline'}"}
    if spread is not None:  # an accuracy lies in [0, 1]: so does its bar
        row.update(lo=max(mean - spread, 0.0), hi=min(mean + spread, 1.0))
    if size is not None:
        row["size"] = size
    return row


def pareto_front(points: Sequence[tuple[float, float]], x_better: str, y_better: str) -> list[int]:
    """Indices of the points no other point dominates (at least as good on both axes, better on
    one), given which direction ("higher" or "lower") is better on each; sorted by x."""
    sx = 1 if x_better == "higher" else -1
    sy = 1 if y_better == "higher" else -1

    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        ge = sx * a[0] >= sx * b[0] and sy * a[1] >= sy * b[1]
        return ge and (sx * a[0] > sx * b[0] or sy * a[1] > sy * b[1])

    front = [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda i: points[i][0])


# -- Pareto -----------------------------------------------------------------------------------------

def pareto_figures(rows: list[Row], columns: list[Column]) -> list[Figure]:
    """Per board point, device, budget and host: mean test accuracy against mean throughput, then memory."""
    figures = []
    for column in columns:
        for (device, budget), group in by_device_and_budget(rows).items():
            for host, found in by_host(group):
                for x_metric in (declared("train")["train_tokens_per_s"], declared("train")["peak_memory_bytes"]):
                    figure = _pareto_figure(found, column, f"{budget} budget, {device}, on {host}", x_metric)
                    if figure:
                        figures.append(figure)
    return figures


def cell_cost(cell: Cell, metric: Metric) -> float | None:
    """A cell's mean of a cost metric; for memory, the run's own peak only (Cell.memory: never the
    whole process's peak of older records)."""
    return cell.memory()[0] if metric.unit == "bytes" else cell.mean(metric.name)


def old_memory_note(cells: list[Cell]) -> str:
    """What a memory axis says of the cells it leaves off: their records measured the whole process."""
    old = [c for c in cells if c.memory()[0] is None and c.memory(own=False)[0] is not None]
    if not old:
        return ""
    sources = sorted({str(c.memory(own=False)[1]) for c in old})
    return (f" {len(old)} cell(s) left off: their records measured the whole process's peak memory "
            f"({', '.join(sources)}), the runtime's footprint rather than the method's.")


def _pareto_figure(rows: list[Row], column: Column, where: str, x_metric: Metric) -> Figure | None:
    placed = []  # (row, x, y)
    for row in rows:
        cell = row.cells.get(column)
        x, y = (cell_cost(cell, x_metric), cell.mean()) if cell else (None, None)
        if x is not None and y is not None:
            placed.append((row, x, y))
    if not placed:
        return None
    front = pareto_front([(x, y) for _, x, y in placed], x_metric.better, ACCURACY.better)
    data = [{"series": row.method, "x": x, "y": y, "x_text": format_value(x_metric, x),
             "y_text": format_value(ACCURACY, y), "hollow": False,
             "tip": f"{row.label}, {row.dtype}, {len(row.cells[column].values())} seeds"} for row, x, y in placed]
    frontier = [{"x": placed[i][1], "y": placed[i][2]} for i in front]
    caption = (f"Mean over seeds of each method on {column.label} ({where}). "
               f"{x_metric.label}: {'higher' if x_metric.better == 'higher' else 'lower'} is better; "
               f"the dashed line joins the Pareto-optimal points. {LEGEND}")
    if x_metric.unit == "bytes":
        sources = {row.cells[column].memory()[1] for row, _, _ in placed}
        caption += (f" Memory: the run's own peak ({', '.join(sorted(map(str, sources)))}), the median of the "
                    "cell's runs." + old_memory_note([r.cells[column] for r in rows if column in r.cells]))
    title = f"{column.label}, {where}: {ACCURACY.label} vs {x_metric.label}"
    spec = chart(title, data, metric_axis(x_metric, log=True), metric_axis(ACCURACY, log=False),
                 Layout(line=False, frontier=frontier, levels=baseline_levels(rows, [column])))
    return Figure("train", title, spec, f"{caption} {BASELINE}" + crowding_note(r["series"] for r in data))


# -- the board's figures: recall (MQAR), accuracy against state size, accuracy against cost ----------
# Which tasks get the recall figures, and what the figures call them, the board files say (a
# family's ``figures: recall`` and ``label``; suite/boards/).

def recall_points(columns: list[Column]) -> list[Column]:
    """The board points of the families with recall figures."""
    return [c for c in columns if any(c.task in f.tasks for f in RECALL_FAMILIES)]


def board_figures(rows: list[Row], columns: list[Column], costs: dict[str, CellCost] | None = None) -> list[Figure]:
    """The figures under the board's tables: MQAR accuracy against key-value pairs and against state
    size, then accuracy against throughput and memory per board point (MQAR's points together);
    where the cells' configurations have cost records (``costs``: costs.cell_costs), accuracy against
    cost at each length they were tested at, and where each method pays."""
    figures: list[Figure] = []
    for (device, budget), group in by_device_and_budget(rows).items():
        where = f"{budget} budget, {device}"
        usual = [r for r in group if not r.variant]  # variants (other widths, features) join the state plots
        figures += recall_figures(usual, columns, where)
        figures += state_figures(group, columns, where)
        figures += length_figures(usual, columns, where)
        for host, found in by_host(usual):  # speed and memory: one host per figure
            figures += cost_figures(found, columns, f"{where}, on {host}")
        figures += length_cost_figures(usual, columns, costs or {}, where)
    return figures


def length_figures(rows: list[Row], columns: list[Column], where: str) -> list[Figure]:
    """Per MQAR board point whose runs were also tested at longer lengths (``length_accuracy``):
    accuracy against the test length, one line per method at its default state; the first point is
    the trained length, the others hold as many pairs per token (so more pairs in all)."""
    figures = []
    for column in recall_points(columns):
        data = []
        trained = column_baselines(rows).get(column)
        floor = {column.seq_len: (trained.accuracy, trained.name)} if trained else {}  # the baseline by length
        for row in (r for r in rows if column in r.cells and r.cells[column].mean() is not None):
            cell = row.cells[column]
            longer = cell.length_points()
            if not longer:
                continue
            data.append(cell_row(row.method, column.seq_len, f"{column.seq_len} tokens (trained)", cell, column.label))
            for length, found in sorted(longer.items()):
                pairs, baseline = found[0].get("num_kv_pairs"), found[0].get("baseline_accuracy")
                if baseline is not None:
                    floor[length] = (baseline, f"1 / {pairs} pairs" if pairs else "recorded")
                data.append(accuracy_row(row.method, length, f"{length} tokens, {pairs} pairs",
                                         [f["accuracy"] for f in found], baseline, cell.test_size(), cell.lr,
                                         f"{column.label}, tested at {length} tokens"))
        if not data:
            continue
        title = f"{column.label}: {ACCURACY.label} vs test length, {where}"
        caption = (f"{ACCURACY.label} of the same weights at the trained length ({column.seq_len} tokens) and at "
                   f"longer test lengths with as many key-value pairs per token (evaluation only; the hybrid has no "
                   f"position embeddings), each method at its default state and chosen rate, on {column.label} "
                   f"({where}); log x. Bars: ± one standard deviation over seeds. {HOLLOW} {BASELINE} {LEGEND}")
        baseline = [{"x": x, "y": y, "label": f"{format_value(ACCURACY, y)} at {x} tokens: {name}"}
                    for x, (y, name) in sorted(floor.items())]
        spec = chart(title, data, Axis("test length", "tokens", log=True), metric_axis(ACCURACY, log=False),
                     Layout(line=True, error="bar", baseline=baseline))
        figures.append(Figure("board", title, spec, caption + crowding_note(r["series"] for r in data)))
    return figures


@dataclass(frozen=True)
class AtLength:
    """A cell's accuracy at one length it was tested at, and what its configuration cost there."""

    row: Row
    values: list[float]  # accuracy, one per seed
    baseline: float | None
    examples: int | None
    cost: CellCost

    def estimate(self) -> stats.Estimate:
        return stats.accuracy_estimate(self.values, self.examples)


def at_lengths(rows: list[Row], column: Column, costs: dict[str, CellCost]) -> dict[str, dict[int, list[AtLength]]]:
    """Per cost host, per length (the trained one and each longer test length), the cells of
    ``column`` whose configuration has a cost record on that host with a ratio to exact attention's."""
    found: dict[str, dict[int, list[AtLength]]] = {}
    trained = column_baselines(rows).get(column)
    for row in rows:
        cell = row.cells.get(column)
        cost = cost_for(cell.runs, costs) if cell is not None and cell.mean() is not None else None
        if cost is None or cost.reference is None:
            continue
        lengths = {column.seq_len: (cell.values(), trained.accuracy if trained else None)}
        for length, points in cell.length_points().items():
            lengths[length] = ([p["accuracy"] for p in points], points[0].get("baseline_accuracy"))
        for length, (values, baseline) in lengths.items():
            if cost.ratio(INFERENCE, length) is not None and values:
                found.setdefault(cost.host, {}).setdefault(length, []).append(
                    AtLength(row, values, baseline, cell.test_size(), cost))
    return found


def length_cost_figures(rows: list[Row], columns: list[Column], costs: dict[str, CellCost],
                        where: str) -> list[Figure]:
    """Per recall board point with cost records: at each length, accuracy against inference time
    relative to exact attention, marker area by peak memory (LRA's Figure 3, per length); then one
    figure of where each method pays: its inference time relative to exact attention against length,
    hollow where it loses exact attention's accuracy there. One cost host per figure."""
    figures = []
    reference = known.reference_method()
    for column in recall_points(columns):
        for host, found in sorted(at_lengths(rows, column, costs).items()):
            # exact attention beside itself alone says nothing: a length needs another method
            lengths = {n: cells for n, cells in found.items() if any(c.row.method != reference for c in cells)}
            if not lengths:
                continue
            on = f"{where}; cost on {host}"
            for length, cells in sorted(lengths.items()):
                figures.append(accuracy_cost_figure(column, length, cells, on))
            figures.append(pays_figure(column, lengths, reference, on))
    return figures


def accuracy_cost_figure(column: Column, length: int, cells: list[AtLength], where: str) -> Figure:
    trained = length == column.seq_len
    at = f"{length:,} tokens" + (" (trained)" if trained else " (tested only)")
    data = []
    for c in cells:
        ratio, memory = c.cost.ratio(INFERENCE, length), c.cost.value(INFERENCE, length, "memory")
        point = accuracy_row(c.row.method, ratio, f"{ratio:.2f}× exact attention's time", c.values, c.baseline,
                             c.examples, c.row.cells[column].lr, f"{column.label} at {at}", size=memory or 0)
        point["tip"] += (f", {format_seconds(c.cost.value(INFERENCE, length))} per sequence, peak memory "
                         + (format_bytes(memory) if memory is not None else "not recorded"))
        data.append(point)
    baselines = {c.baseline for c in cells if c.baseline is not None}
    levels = [{"y": b, "label": f"{format_value(ACCURACY, b)}: the baseline at {length:,} tokens"} for b in baselines]
    title = f"{column.label} at {length:,} tokens: {ACCURACY.label} vs inference time relative to exact attention"
    caption = (f"{ACCURACY.label} at {at} against inference time per sequence relative to exact attention's, both "
               f"measured on the same host at the same commit ({where}), as in LRA's Figure 3; left of 1 is faster. "
               f"Marker area is proportional to inference's peak memory at that length. Each method at its default "
               f"state and chosen rate. Bars: ± one standard deviation over seeds. {HOLLOW} {BASELINE} {LEGEND}")
    spec = chart(title, data, Axis("inference time relative to exact attention", "", log=True),
                 metric_axis(ACCURACY, log=False),
                 Layout(line=False, error="bar", size=Axis("peak memory", "bytes", log=True), levels=levels))
    return Figure("board", title, spec, caption + crowding_note(r["series"] for r in data))


def pays_figure(column: Column, lengths: dict[int, list[AtLength]], reference: str | None, where: str) -> Figure:
    data = []
    for length, cells in sorted(lengths.items()):
        exact = next((c for c in cells if c.row.method == reference), None)
        for c in cells:
            ratio = c.cost.ratio(INFERENCE, length)
            mean = statistics.fmean(c.values)
            loses = exact is not None and c is not exact and stats.clearly_ahead(exact.estimate(), c.estimate())
            kept = f"{format_value(ACCURACY, mean)} accuracy" + (
                "" if exact is None or c is exact else
                f" against exact attention's {format_value(ACCURACY, statistics.fmean(exact.values))}: "
                + ("clearly below it" if loses else "not clearly below it"))
            data.append({"series": c.row.method, "x": length, "y": ratio, "x_text": f"{length:,} tokens",
                         "y_text": f"{ratio:.2f}×", "hollow": loses, "tip": f"{column.label}: {kept}"})
    title = f"{column.label}: where each method pays, inference time relative to exact attention vs length"
    caption = (f"Each method's inference time per sequence relative to exact attention's, measured on the same host "
               f"at the same commit ({where}), against the sequence length: the trained length and the longer "
               f"lengths it was tested at (evaluation only); log-log. Below the grey line (1×) the method is faster. "
               f"Filled: its accuracy there is not clearly below exact attention's (the board's comparison test, "
               f"TEST); hollow: clearly below it, so the time it saves is paid for in accuracy. Hover a point for "
               f"its accuracy. {LEGEND}")
    spec = chart(title, data, Axis("sequence length", "count", log=True),
                 Axis("inference time relative to exact attention", "", log=True),
                 Layout(line=True, levels=[{"y": 1.0, "label": "1×: exact attention's time"}]))
    return Figure("board", title, spec, caption + crowding_note(r["series"] for r in data))


def recall_figures(rows: list[Row], columns: list[Column], where: str) -> list[Figure]:
    """Per recall family and model: accuracy against the number of key-value pairs, one line per method."""
    figures = []
    for family in RECALL_FAMILIES:
        figures += family_recall_figures(family.label, [c for c in columns if c.task in family.tasks], rows, where)
    return figures


# What a recall point's models learned from beyond its length and pairs: a line across the pairs
# joins only points trained alike, since a longer budget or another vocabulary moves accuracy too.
TRAINING_SETUP = (("budget", "max_steps"), ("budget", "batch_size"), ("budget", "target_val_accuracy"),
                  ("task", "vocab_size"), ("task", "train_mix"))


def training_setup(rows: list[Row], column: Column) -> tuple:
    """The TRAINING_SETUP values of the column's runs (each distinct value set once, in order)."""
    found = []
    for row in rows:
        cell = row.cells.get(column)
        for run in cell.runs if cell else ():
            config = run.record.get("config") or {}
            setup = tuple(repr((config.get(group) or {}).get(key)) for group, key in TRAINING_SETUP)
            if setup not in found:
                found.append(setup)
    return tuple(found)


def point_names(points: list[Column]) -> list[str]:
    return [f"{c.seq_len}·{c.num_kv_pairs}" for c in points]


def family_recall_figures(label: str, columns: list[Column], rows: list[Row], where: str) -> list[Figure]:
    """One figure per model and training setup whose points hold more than one number of pairs."""
    figures = []
    recall = sorted((c for c in columns if c.recall), key=lambda c: (c.num_kv_pairs, c.seq_len))
    groups: dict[tuple, list[Column]] = {}
    for column in recall:
        groups.setdefault((column.model or "", training_setup(rows, column)), []).append(column)
    lines = {key: points for key, points in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0].sort_key()))
             if len({c.num_kv_pairs for c in points}) > 1}  # one pairs value: its length figure and cells show it
    for (model, _), points in lines.items():
        named = "" if sum(m == model for m, _ in lines) == 1 else f" ({', '.join(point_names(points))})"
        apart = [c for c in recall if (c.model or "") == model and c not in points]
        one_per_x = len({c.num_kv_pairs for c in points}) == len(points)  # else a line would zigzag
        data = [cell_row(row.method, column.num_kv_pairs, f"{column.num_kv_pairs} pairs", row.cells[column],
                         column.label) for row in rows for column in points
                if column in row.cells and row.cells[column].mean() is not None]
        if not data:
            continue
        on = f" on the {model} model" if model else ""
        title = f"{label}: {ACCURACY.label} vs key-value pairs{on}{named}, {where}"
        caption = (f"{ACCURACY.label} on {label} against the number of key-value pairs to recall{on} ({where}); "
                   f"board points (length·pairs): {', '.join(point_names(points))}"
                   + (f"; not joined to {', '.join(point_names(apart))}, trained under another budget, "
                      "vocabulary or training mix" if apart else "") + ". "
                   f"Band: ± one standard deviation over seeds. {HOLLOW} {BASELINE} {LEGEND}")
        found = column_baselines(rows)
        floor = {c.num_kv_pairs: found[c] for c in points if c in found}  # 1 / pairs: one per x
        baseline = [{"x": x, "y": b.accuracy, "label": f"{format_value(ACCURACY, b.accuracy)} at {x} pairs: {b.name}"}
                    for x, b in sorted(floor.items())]
        spec = chart(title, data, Axis("key-value pairs", "count", log=True), metric_axis(ACCURACY, log=False),
                     Layout(line=one_per_x, error="band" if one_per_x else "bar", baseline=baseline))
        figures.append(Figure("board", title, spec, caption + crowding_note(r["series"] for r in data)))
    return figures


def state_figures(rows: list[Row], columns: list[Column], where: str) -> list[Figure]:
    """Per recall board point: accuracy against the bytes of recurrent state (Based, Figure 2)."""
    figures = []
    for column in recall_points(columns):
        data, stateless = [], []
        for method in dict.fromkeys(r.method for r in rows):
            # Every configuration of the method counts here (its variant rows too): one point per
            # state size it was run at.
            cells = [r.cells[column] for r in rows if r.method == method and column in r.cells]
            placed = [(c.median("state_bytes"), c) for cell in cells for c in (cell, *cell.others)]
            if any(c.state_not_applicable() for _, c in placed):
                stateless.append(method)
            for state, c in sorted((p for p in placed if p[0] and p[1].mean() is not None), key=lambda p: p[0]):
                data.append(cell_row(method, state, format_bytes(state), c, column.label))
        if not data:
            continue
        title = f"{column.label}: {ACCURACY.label} vs state size, {where}"
        caption = (f"{ACCURACY.label} against the bytes of each method's recurrent state per sequence "
                   f"(exact attention: its KV cache) on {column.label} ({where}); log x. A method run at several state "
                   f"sizes has a point for each. Bars: ± one standard deviation over seeds. {HOLLOW} {BASELINE} "
                   f"{LEGEND}")
        if stateless:
            caption += f" Not on it: {', '.join(stateless)} (state size {NO_STATE})."
        spec = chart(title, data, Axis("state size", "bytes", log=True), metric_axis(ACCURACY, log=False),
                     Layout(error="bar", levels=baseline_levels(rows, [column])))
        figures.append(Figure("board", title, spec, caption + crowding_note(r["series"] for r in data)))
    return figures


def cost_figures(rows: list[Row], columns: list[Column], where: str) -> list[Figure]:
    """LRA's Figure 3 form: accuracy against train throughput, marker area by peak memory; one
    figure per board point, a recall family's points in one (MQAR's)."""
    recall = recall_points(columns)
    groups = [("", [c]) for c in columns if c not in recall] + [
        (f.label, [c for c in recall if c.task in f.tasks]) for f in RECALL_FAMILIES]
    speed, memory_metric = declared("train")["train_tokens_per_s"], declared("train")["peak_memory_bytes"]
    figures = []
    for label, group in (g for g in groups if g[1]):
        data = []
        shown = []  # the points with a timed cell (Cell.values: a board's runs may time nothing)
        for row in rows:
            for column in group:
                cell = row.cells.get(column)
                tokens = cell.median(speed.name) if cell else None
                if tokens and cell.mean() is not None:
                    shown += [column] if column not in shown else []
                    memory = cell.memory()[0]
                    point = cell_row(row.method, tokens, f"{format_value(speed, tokens)} tok/s", cell, column.label,
                                     size=memory or 0)
                    point["tip"] += (f", peak memory {format_value(memory_metric, memory)}" if memory is not None
                                     else ", its own peak memory not recorded: drawn at the smallest size")
                    data.append(point)
        if not data:
            continue
        largest = max((r["size"] for r in data), default=0)
        group = [c for c in group if c in shown]
        name = group[0].label if len(group) == 1 else label
        title = f"{name}: {ACCURACY.label} vs train throughput, {where}"
        sizes = (f"largest: {format_bytes(largest)}" if largest
                 else "no run recorded it: every marker has the same size")
        unsized = sum(1 for r in data if not r["size"]) if largest else 0
        caption = (f"{ACCURACY.label} against train tokens/s (median over the cell's runs) on "
                   f"{', '.join(c.label for c in group)} ({where}), as in LRA's Figure 3. Marker area is "
                   f"proportional to the run's own peak memory ({sizes}); the whole process's peak of older "
                   f"records is never used. Bars: ± one standard deviation over seeds. {HOLLOW} {BASELINE} {LEGEND}")
        if unsized:
            caption += f" {unsized} point(s) without the run's own memory are drawn at the smallest size."
        if len(group) > 1:
            caption += f" Each method has one point per {label} board point (hover a point for which)."
        spec = chart(title, data, metric_axis(speed, log=True), metric_axis(ACCURACY, log=False),
                     Layout(line=False, error="bar", size=Axis("peak memory", "bytes", log=True),
                            levels=baseline_levels(rows, group)))
        figures.append(Figure("board", title, spec, caption + crowding_note(r["series"] for r in data)))
    return figures


# -- kernel and decode sweeps -----------------------------------------------------------------------

@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep record: whose it is, where it sits, and the point as the schema reads it."""

    method: str
    impl: str
    x: float
    group: tuple  # (device, the shape fields' values)
    point: Any  # the kind's point model (suite/schema.py)


def schema_field(model: Any, name: str, default: Any = None) -> Any:
    """A field the model's schema names (extra keys of the record are never read)."""
    return getattr(model, name) if name in type(model).model_fields else default


def sweep_points(run: Run) -> list[SweepPoint]:
    """The run's points, and those of the reference method its record measured beside it."""
    layout, metrics = sweep_layout(run.kind), run.model.metrics
    blocks = [(run.method, schema_field(metrics, "impl") or run.impl, metrics.points)]
    reference = schema_field(metrics, "reference")
    if reference is not None:
        blocks.append((reference.method, reference.impl or "", reference.points))
    found = []
    for method, impl, points in blocks:
        for p in points:
            own = schema_field(p, "impl") or impl
            # A reference implementation (SDPA) is the exact method's, whichever method's record measured it.
            who = (known.reference_method() or own) if own in REFERENCE_IMPLS else method
            shape = tuple(getattr(p, k) for k in layout.shape)
            found.append(SweepPoint(who, own, getattr(p, layout.x), (run.device, shape), p))
    return found


def series_label(method: str, impl: str) -> str:
    return method if impl in ("", "None", method) else f"{method} · {impl}"


def sweep_figures(runs: list[Run], kind: str, x_label: str) -> list[Figure]:
    """Per device (and shape, where points differ in it) and metric: the metric against length,
    log-log, one line per method and implementation, crossovers marked."""
    points = [p for run in runs if run.kind == kind for p in sweep_points(run)]
    if not points:
        return []
    point_fields = type(points[0].point).model_fields
    names = [m.name for m in declared(kind).values() if m.unit in SWEEP_UNITS and m.name in point_fields
             and any(getattr(p.point, m.name) is not None for p in points)]
    figures = []
    for name in names:
        for where, group in sweep_groups(kind, points):
            figure = _sweep_figure(kind, name, where, group, x_label)
            if figure:
                figures.append(figure)
    return figures


def sweep_groups(kind: str, points: list[SweepPoint]) -> list[tuple[str, list[SweepPoint]]]:
    """The points per device (and shape, where points differ in it), each group named: 'cpu',
    'cpu (batch_size=8)'."""
    shape = sweep_layout(kind).shape
    varying = [i for i, _ in enumerate(shape) if len({p.group[1][i] for p in points}) > 1]
    groups = []
    for group in sorted({p.group for p in points}, key=repr):
        split = ", ".join(f"{shape[i]}={group[1][i]}" for i in varying)
        groups.append((group[0] + (f" ({split})" if split else ""), [p for p in points if p.group == group]))
    return groups


def _sweep_figure(kind: str, name: str, where: str, points: list[SweepPoint], x_label: str) -> Figure | None:
    metric, band = metric_for(name), sweep_layout(kind).bands.get(name)
    values: dict[tuple[str, str], dict[float, list[tuple]]] = {}
    failed = []
    for p in points:
        value, status = getattr(p.point, name), p.point.status
        if status == "ok" and value:
            spread = (getattr(p.point, band[0]), getattr(p.point, band[1])) if band else (None, None)
            values.setdefault((p.method, p.impl), {}).setdefault(p.x, []).append((value, *spread))
        elif status not in NOT_PLOTTED and status != "ok":
            failed.append({"series": series_label(p.method, p.impl), "x": p.x,
                           "tip": f"{status} at {compact_count(p.x)}"})
    data = []
    for (method, impl), by_x in sorted(values.items(), key=lambda kv: (known.method_rank(kv[0][0]), kv[0][1])):
        for x, found in sorted(by_x.items()):
            # The same implementation measured by several records (SDPA in each): their mean.
            y = sum(v for v, _, _ in found) / len(found)
            row = {"series": series_label(method, impl), "impl": impl, "x": x, "y": y, "hollow": False,
                   "x_text": compact_count(x), "y_text": format_value(metric, y), "tip": f"{kind}, {where}"}
            if band and all(lo is not None and hi is not None for _, lo, hi in found):
                row["lo"], row["hi"] = (sum(f[i] for f in found) / len(found) for i in (1, 2))
                row["tip"] += f", p10-p90 {format_value(metric, row['lo'])} to {format_value(metric, row['hi'])}"
            data.append(row)
    if not data:
        return None
    markers = crossover_markers(points, name, metric)
    title = f"{kind}: {metric.label} vs {x_label}, {where}"
    caption = (f"{metric.label} ({name}); {'lower' if metric.better == 'lower' else 'higher'} is better. "
               f"Log-log; the wheel zooms, a drag pans, a double click resets. Dashed vertical lines: where a "
               f"method becomes better than the best of {' / '.join(reference_names())} and stays so (interpolated in "
               "log space).")
    if band:
        caption += " Band: p10 to p90 of the timed repeats."
    if failed:
        caption += " Crosses on the top edge: no value (the run failed there; hover for why)."
    spec = chart(title, data, Axis(x_label, "count", log=True), metric_axis(metric, log=True),
                 Layout(error="band" if band else "", zoom=True, dashes=True, markers=markers),
                 subtitle=[m["label"] for m in markers], failed=failed)
    return Figure(kind, title, spec, caption + " " + LEGEND + crowding_note([r["series"] for r in data + failed]))


def best_curve(points: list[SweepPoint], name: str, better: str | None, keep) -> dict[float, float]:
    """Per length, the best ok value of ``name`` over the points ``keep`` accepts."""
    pick = max if better == "higher" else min
    curve: dict[float, float] = {}
    for p in points:
        value = getattr(p.point, name)
        if keep(p.method, p.impl) and p.point.status == "ok" and value:
            curve[p.x] = pick(curve[p.x], value) if p.x in curve else value
    return curve


def curve_crossover(reference: dict[float, float], other: dict[float, float], better: str | None) -> dict:
    """suite.scaling.crossover's answer for the curve ``other`` against ``reference`` (values by
    length) on their common lengths: ``where`` says whether it lies inside the measured range."""
    xs = sorted(set(reference) & set(other))
    cost = (lambda v: 1.0 / v) if better == "higher" else (lambda v: v)  # noqa: E731 -- lower is better
    return scaling.crossover(xs, [cost(other[x]) for x in xs], [cost(reference[x]) for x in xs])


def reference_names() -> tuple[str, ...]:
    """What a crossover is measured against: the exact method and its reference implementations."""
    return tuple(filter(None, (known.reference_method(), *REFERENCE_IMPLS)))


def is_reference(method: str, impl: str) -> bool:
    return method == known.reference_method() or impl in REFERENCE_IMPLS


def crossovers(points: list[SweepPoint], name: str, metric: Metric) -> dict[str, dict]:
    """Per method other than the reference: where it becomes better than the reference's best
    implementation for good in ``name`` (suite.scaling.crossover's answer, on the lengths both
    measured), in the method order."""
    reference = best_curve(points, name, metric.better, is_reference)
    found = {}
    for method in sorted({p.method for p in points if not is_reference(p.method, p.impl)}, key=known.method_rank):
        mine = lambda m, i, method=method: m == method and not is_reference(m, i)  # noqa: E731
        curve = best_curve(points, name, metric.better, mine)
        if curve and reference:
            found[method] = curve_crossover(reference, curve, metric.better)
    return found


def crossover_markers(points: list[SweepPoint], name: str, metric: Metric) -> list[dict]:
    """A marker per method that overtakes the reference (the exact method / SDPA) in time or memory
    inside the measured range, in the colour of the method's first series."""
    markers = []
    for method, found in crossovers(points, name, metric).items():
        if found["where"] == "within_grid":
            mine = [series_label(p.method, p.impl) for p in points
                    if p.method == method and not is_reference(p.method, p.impl)]
            exact = known.reference_method() or "exact attention"
            label = f"{method} beats {exact} from N≈{compact_count(round(found['length']))}"
            markers.append({"x": found["length"], "series": min(mine), "label": label})
    return markers


# -- fidelity ---------------------------------------------------------------------------------------

def fidelity_points(runs: list[Run]) -> list[Any]:
    """The points of the fidelity records but exact softmax's (d_phi null): the reference itself, on no
    feature axis, its errors nothing but rounding."""
    return [p for run in runs if run.kind == "fidelity" for p in run.model.metrics.points if p.d_phi is not None]


def mean_of(value: Statistics | None) -> float | None:
    """A fidelity error's mean over queries (None: not measured, every query overflowed)."""
    return None if value is None else value.mean


def fidelity_figures(runs: list[Run]) -> list[Figure]:
    """Each error (the denominator's first) against feature size and against length: one line per
    method and source, per length (or feature size) when few, else at the largest."""
    points = fidelity_points(runs)
    if not points:
        return []
    names = [m.name for m in declared("fidelity").values() if m.unit == "ratio"
             and any(mean_of(getattr(p, m.name)) for p in points)]
    names = [n for n in names if n in FIRST_METRICS] + [n for n in names if n not in FIRST_METRICS]
    figures = []
    for name in names:
        for against in ("d_phi", "N"):
            figure = _fidelity_figure(points, name, metric_for(name), against)
            if figure:
                figures.append(figure)
    return figures


def _fidelity_figure(points: list, name: str, metric: Metric, against: str) -> Figure | None:
    # x is the swept quantity; the other one labels (or, when too many, fixes) the series.
    swept, fixed = ("d_phi", "seq_len") if against == "d_phi" else ("seq_len", "d_phi")
    rows = [p for p in points if (mean_of(getattr(p, name)) or 0) > 0]
    if len({getattr(p, swept) for p in rows}) < 2:
        return None
    keys = sorted({(p.method, p.source, getattr(p, fixed)) for p in rows})
    other = "N" if against == "d_phi" else "d_phi"
    reduced = ""
    if len(keys) > MAX_FIDELITY_SERIES:  # too many lines to read: the largest fixed value per method and source
        largest: dict[tuple[str, str], int] = {}
        for m, s, f in keys:
            largest[(m, s)] = max(largest.get((m, s), 0), f)
        reduced = (f" {len(keys)} lines (method · source · {other}) are too many to read: each method and "
                   f"source is shown at its largest {other} only; the run pages list every point.")
        keys = [(m, s, f) for (m, s), f in largest.items()]
    data = []
    for method, source, f in keys:
        label = f"{method} · {source} · {other}={compact_count(f)}"
        for p in sorted((p for p in rows if (p.method, p.source, getattr(p, fixed)) == (method, source, f)),
                        key=lambda p: getattr(p, swept)):
            value = mean_of(getattr(p, name))
            data.append({"series": label, "x": getattr(p, swept), "y": value, "hollow": False,
                         "x_text": compact_count(getattr(p, swept)), "y_text": f"{value:.3g}",
                         "tip": f"mean over queries; N={p.seq_len}, d_phi={p.d_phi}"})
    title = f"fidelity: {metric.label} vs {against}"
    x_axis = Axis("N (sequence length)" if against == "N" else "d_phi (features)", "count", log=True)
    caption = (f"{metric.label} ({name}) against exact softmax attention; lower is better. Log-log; the wheel "
               "zooms, a drag pans. The mean over queries is plotted. " + LEGEND)
    spec = chart(title, data, x_axis, Axis(f"{metric.label} ({metric.unit})", log=True), Layout(zoom=True))
    return Figure("fidelity", title, spec, caption + reduced + crowding_note(r["series"] for r in data))


COMPARABLE_ERRORS = ("output_rel_error", "attention_tv")  # mean the same for every map: the ranking's keys
DENOMINATOR = "denominator_rel_error"  # the seed question, where the map's normaliser estimates softmax's


@dataclass(frozen=True)
class FidelityRow:
    """One map (a fidelity point's method: 'hedgehog', 'hedgehog fitted') at the headline's length."""

    method: str
    features: float  # its feature count used (nearest FIDELITY_FEATURES)
    errors: dict[str, float]  # per error: the mean over queries, averaged over the headline's sources
    estimates_denominator: bool  # whether its normaliser estimates softmax's (known.denominator_estimates_softmax)


@dataclass(frozen=True)
class CaptureModel:
    """The model a captured source's queries and keys came from, as the fidelity record names it
    (task.capture_model): its test accuracy against its task's baseline on a test set of ``examples``."""

    task: str
    test_accuracy: float
    baseline_accuracy: float
    examples: int | None
    steps: int | None

    @property
    def trained(self) -> bool:
        """FIDELITY: whether the model learned, by the board's margin: its test accuracy above the
        baseline's sampling error on its test set (board.within_sampling_error; no test size: any
        accuracy above the baseline)."""
        above = self.test_accuracy > self.baseline_accuracy
        return above and not (self.examples and within_sampling_error(self.test_accuracy, self.baseline_accuracy,
                                                                       self.examples))


@dataclass(frozen=True)
class FidelityScale:
    """The maps ranked at one input source, so at one score scale (the spread of q·k/√D the source
    gives: a synthetic std, or what a model's captured queries and keys give)."""

    source: str
    score_std: float | None  # the measured std of the scores, mean over the ranked points (None: not recorded)
    capture: CaptureModel | None  # a captured source's model
    rows: list[FidelityRow]  # by output error, then attention TV: most faithful first

    @property
    def ranked(self) -> bool:
        """Whether a ranking is stated here: not for queries and keys of a model that did not learn
        (near-uniform attention, which any map approximates trivially)."""
        return self.capture is None or self.capture.trained

    @property
    def name(self) -> str:
        """The source as the fidelity sentence and table name it: with its measured score std, and for
        a captured source its model's test accuracy against its baseline."""
        std = "" if self.score_std is None else f"score std {self.score_std:.2g}"
        if self.capture is None:
            return self.source + (f" ({std})" if std and "std" not in self.source else "")
        model = self.capture
        return (f"{self.source} (captured from a {model.task} model at {100 * model.test_accuracy:.1f}% test "
                f"accuracy against a {100 * model.baseline_accuracy:.1f}% baseline" + (f", {std}" if std else "") + ")")


@dataclass(frozen=True)
class FidelityHeadline:
    """The maps ranked by the comparable errors at one length, per input source (score scale)."""

    length: float
    scales: list[FidelityScale]

    def not_estimates(self) -> list[str]:
        return list(dict.fromkeys(r.method for s in self.scales for r in s.rows if not r.estimates_denominator))


def finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


def capture_model(run: Run) -> CaptureModel | None:
    """The record's capture model (task.capture_model), when it names its accuracy and baseline."""
    found = run.record.get("task", {}).get("capture_model")
    if not isinstance(found, dict):
        return None
    accuracy, baseline = finite(found.get("test_accuracy")), finite(found.get("baseline_accuracy"))
    if accuracy is None or baseline is None:
        return None
    budget = (run.record.get("config") or {}).get("budget") or {}
    examples, steps = budget.get("num_test"), found.get("steps")
    return CaptureModel(str(found.get("task") or run.task), accuracy, baseline,
                        examples if isinstance(examples, int) and examples > 0 else None,
                        steps if isinstance(steps, int) else None)


def fidelity_headline(runs: list[Run]) -> FidelityHeadline | None:
    """From each method's latest fidelity record: at the longest length every map measured, each
    map's feature count nearest FIDELITY_FEATURES, per input source the maps that measured it there
    ranked by output error then attention TV (FIDELITY rule); None without one."""
    points: dict[str, list] = {}  # map -> its points
    estimates: dict[str, bool] = {}
    captures: dict[str, CaptureModel] = {}  # source -> its model, for captured sources
    for run in sorted((r for r in runs if r.kind == "fidelity" and r.status == "ok"), key=lambda r: r.created):
        found: dict[str, list] = {}
        for p in fidelity_points([run]):  # exact softmax's own points (d_phi null) are no map's
            if all(mean_of(getattr(p, name)) is not None for name in COMPARABLE_ERRORS):
                found.setdefault(p.method, []).append(p)
                estimates[p.method] = known.denominator_estimates_softmax(run.method)
                model = capture_model(run)
                if p.source_kind == "captured" and model is not None:
                    captures[p.source] = model
        points.update(found)  # a later record of a method replaces an earlier one
    common = set.intersection(*({p.seq_len for p in pts} for pts in points.values())) if points else set()
    if not common:
        return None
    length = max(common)
    chosen = {}
    for method, pts in points.items():
        at_length = [p for p in pts if p.seq_len == length]
        features = min({p.d_phi for p in at_length}, key=lambda d: (abs(math.log(d / FIDELITY_FEATURES)), -d))
        chosen[method] = [p for p in at_length if p.d_phi == features]
    scales = []
    for source in sorted({p.source for pts in chosen.values() for p in pts}):  # each ranks the maps that measured it
        rows, stds = [], []
        for method, pts in chosen.items():
            mine = [p for p in pts if p.source == source]
            if not mine:
                continue
            stds += [v for v in (finite((p.model_extra or {}).get("score_std")) for p in mine) if v is not None]
            errors = {}
            for name in (DENOMINATOR, *COMPARABLE_ERRORS):
                values = [mean_of(getattr(p, name)) for p in mine]
                if values and None not in values:
                    errors[name] = sum(values) / len(values)
            rows.append(FidelityRow(method, mine[0].d_phi, errors, estimates[method]))
        rows.sort(key=lambda r: tuple(r.errors[name] for name in COMPARABLE_ERRORS))
        scales.append(FidelityScale(source, statistics.fmean(stds) if stds else None, captures.get(source), rows))
    # Synthetic scales by their spread, then the captured sources by name.
    scales.sort(key=lambda s: (1, 0.0, s.source) if s.capture else (0, s.score_std or 0.0, s.source))
    return FidelityHeadline(length, scales) if scales else None
