"""What the board's first screen states, derived from the records: the recall figures (accuracy
against key-value pairs at each method's default state, accuracy against recurrent state bytes at
the state-bound point), one line per board point naming its best method and its best sub-quadratic
method at no more state, the best of each kind at or below each state budget of the state-bound
point, and where each method's kernel overtakes exact attention."""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.metrics import declared
from suite.site import known
from suite.site.board import Cell, Column, Row, board_tables
from suite.site.figures import (
    Figure,
    by_device_and_budget,
    compact_count,
    crossovers,
    recall_figures,
    reference_names,
    state_figures,
    sweep_groups,
    sweep_points,
)
from suite.site.runs import Run

RANK_RULE = (
    "Per point, over the cells with at least two seeds (one seed gives no spread): the best is the highest "
    "mean, whatever its method and state; the best sub-quadratic is the highest mean among methods whose time "
    "grows slower than N² (the record's method.time_in_length is not N^2), counting only cells whose recurrent "
    "state is at most the best's, so that no method wins by holding more state. At the state-bound point "
    "(the recall point where the methods ran at the most state sizes) the same is asked at each state budget, "
    "a power of 4 bytes: the best cell of each kind whose state is at most that budget. Spread: ± one "
    "standard deviation over seeds, n seeds. A cell that is not clearly above its baseline says so."
)
ASSUMED_TIME = (
    "Some of these records predate method.time_in_length: among them, the methods package's reference "
    "method is taken as exact attention and every other as sub-quadratic."
)
KERNEL_TIMES = ("fwdbwd_median_s", "fwd_median_s")  # the kernel times whose crossovers the first screen states


@dataclass(frozen=True)
class Entry:
    """A cell as the first screen names it."""

    row: Row
    cell: Cell
    state: float | None  # median recurrent state bytes of its runs
    exact: bool  # exact attention (time N^2), else sub-quadratic
    assumed: bool  # no run recorded method.time_in_length: ``exact`` follows known.is_exact's fallback


@dataclass(frozen=True)
class PointLine:
    column: Column
    where: str  # budget and device, when the board has several
    best: Entry | None
    best_sub: Entry | None  # the best sub-quadratic entry with no more state than ``best``


@dataclass(frozen=True)
class Lead:
    figures: list[Figure]
    lines: list[PointLine]
    state_point: Column | None
    budgets: list[tuple[float, Entry | None, Entry | None]]  # (state at most, best sub-quadratic, best exact)
    kernel: KernelTable | None
    assumed: bool  # some ranked entry relied on ASSUMED_TIME


def entry(row: Row, cell: Cell) -> Entry:
    recorded = [r.model.method.time_in_length for r in cell.runs if r.model.method.time_in_length]
    time = recorded[0] if recorded else None
    return Entry(row, cell, cell.median("state_bytes"), known.is_exact(row.method, time), time is None)


def ranked(rows: list[Row], column: Column) -> list[Entry]:
    """The column's cells with two or more seeds, best mean first."""
    found = [entry(r, r.cells[column]) for r in rows if column in r.cells and len(r.cells[column].values()) >= 2]
    return sorted(found, key=lambda e: -e.cell.mean())


def at_most(entries: list[Entry], state: float | None, exact: bool) -> Entry | None:
    """The best entry of the kind whose state is at most ``state`` (any state when None)."""
    return next((e for e in entries if e.exact == exact and (state is None or (e.state or math.inf) <= state)), None)


def extra_state_sizes(rows: list[Row], column: Column) -> int:
    """How many state sizes the methods ran at on ``column`` beyond one each."""
    sizes = {(r.method, r.cells[column].median("state_bytes")) for r in rows if column in r.cells}
    return len({s for s in sizes if s[1] is not None}) - len({m for m, state in sizes if state is not None})


def state_bound_point(rows: list[Row], columns: list[Column]) -> Column | None:
    """The recall point where the methods ran at the most state sizes (ties: more pairs, then
    longer), if a method ran at more than one anywhere."""
    recall = [c for c in columns if c.recall and extra_state_sizes(rows, c) > 0]
    return max(recall, key=lambda c: (extra_state_sizes(rows, c), c.num_kv_pairs, c.seq_len or 0), default=None)


def lead_group(rows: list[Row]) -> tuple[str, list[Row]]:
    """The (budget, device) group the first screen's figures show: the one with the most recall cells."""
    groups = by_device_and_budget(rows)
    (device, budget), group = max(groups.items(), key=lambda kv: (
        sum(c.recall for r in kv[1] for c in r.cells), sum(len(r.cells) for r in kv[1])))
    return f"{budget} budget, {device}", group


def budget_rows(entries: list[Entry]) -> list[tuple[float, Entry | None, Entry | None]]:
    """At each power of 4 bytes from the smallest state measured to the largest: the best
    sub-quadratic and the best exact entry with at most that state."""
    states = [e.state for e in entries if e.state]
    if not states:
        return []
    low, high = (math.ceil(math.log(v, 4) - 1e-9) for v in (min(states), max(states)))
    return [(4.0**k, at_most(entries, 4.0**k, False), at_most(entries, 4.0**k, True)) for k in range(low, high + 1)]


def lead(rows: list[Row], columns: list[Column], runs: list[Run]) -> Lead:
    """The first screen of a board with rows; its figures are for the lead group."""
    figures: list[Figure] = []
    lines, budgets, state_point = [], [], None
    if rows:
        where, group = lead_group(rows)
        state_point = state_bound_point(group, columns)
        model = state_point.model if state_point else None
        usual = [r for r in group if not r.variant]
        recall = [c for c in columns if c.recall and (state_point is None or c.model == model)]
        figures += recall_figures(usual, recall, where)[:1]
        if state_point:
            figures += state_figures(group, [state_point], where)
            budgets = budget_rows(ranked(group, state_point))
        groups = by_device_and_budget(rows)
        ordered = [c for t in board_tables(rows, columns) for c in t.columns]  # as the tables show them
        for (device, budget), found in groups.items():
            for column in (c for c in ordered if any(c in r.cells for r in found)):
                entries = ranked(found, column)
                best = entries[0] if entries else None
                sub = best if best and not best.exact else at_most(entries, best.state if best else None, False)
                lines.append(PointLine(column, f"{budget} budget, {device}" if len(groups) > 1 else "", best, sub))
    used = [e for line in lines for e in (line.best, line.best_sub) if e] + [
        e for _, *pair in budgets for e in pair if e]
    return Lead(figures, lines, state_point, budgets, kernel_table(runs), any(e.assumed for e in used))


@dataclass(frozen=True)
class KernelTable:
    """Per kernel time (and device, shape): where each method overtakes exact attention."""

    methods: list[str]
    rows: list[tuple[str, dict[str, str]]]  # (what was timed, where; per method its crossover in words)
    against: str  # what exact attention is: the faster of these at each length
    provenance: str


def kernel_table(runs: list[Run]) -> KernelTable | None:
    """Per device (and shape) and kernel time: where each method overtakes exact attention for
    good (suite.scaling's rule), and which records say it; None without kernel records."""
    kernel = [r for r in runs if r.kind == "kernel"]
    points = [p for run in kernel for p in sweep_points(run)]
    metrics = declared("kernel")
    rows, methods = [], {}
    for where, group in sweep_groups("kernel", points) if points else ():
        for name in KERNEL_TIMES:
            found = crossovers(group, name, metrics[name])
            if found:
                rows.append((f"{metrics[name].label}, {where}", {m: crossover_text(c) for m, c in found.items()}))
                methods.update(dict.fromkeys(found))
    if not rows:
        return None
    return KernelTable(sorted(methods, key=known.method_rank), rows, " / ".join(reference_names()),
                       provenance_text(kernel))


def crossover_text(found: dict) -> str:
    where, length = found["where"], found.get("length")
    if where == "within_grid":
        return f"from N≈{compact_count(round(length))}"
    if where == "below_grid":
        return f"faster at every N measured (from {compact_count(length)})"
    if where == "beyond_grid":
        return f"not faster up to N={compact_count(found['checked_up_to'])}"
    return "not measured beside it"


def provenance_text(runs: list[Run]) -> str:
    """Which commits the records come from, and how many ran on a checkout with uncommitted changes."""
    commits = sorted({r.model.env.git_commit[:7] if r.model.env.git_commit else "not recorded" for r in runs})
    dirty = sum(bool(r.model.env.git_dirty) for r in runs)
    text = f"From {len(runs)} kernel record(s), commit(s) {', '.join(commits)}"
    return text + (f"; {dirty} of them ran on a checkout with uncommitted changes (dirty tree)." if dirty else ".")
