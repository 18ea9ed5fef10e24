"""What a reader can take away as data: the columns that define a run's cell (for records.csv), and
the board's aggregated cells (cells.csv, cells.json), one row per cell as the board shows it."""

from __future__ import annotations

import json
import statistics
from typing import Any

from suite.site.board import Row, reached_target
from suite.site.costs import CellCost, cost_columns, cost_for, cost_values
from suite.site.runs import Run

# What places a run in its cell beside method, task and budget: the model, its width, the learning
# rate, the point (length, key-value pairs); then every method option (window, feature counts, ...).
CELL_FIELDS = ("model", "d_model", "lr", "seq_len", "num_kv_pairs")


def method_options(run: Run) -> dict[str, Any]:
    """The options the method ran with: as resolved (defaults filled in), else as requested."""
    resolved = run.record["method"].get("resolved") or {}
    config = run.model.config.method
    return {**((config.options if config else None) or {}), **{k: v for k, v in resolved.items() if k != "variants"}}


def option_names(runs: list[Run]) -> list[str]:
    return sorted({k for r in runs if r.kind == "train" for k, v in method_options(r).items()
                   if isinstance(v, (str, int, float, bool)) or v is None})


def cell_values(run: Run, options: list[str]) -> list[Any]:
    """The run's CELL_FIELDS, then its value of each of ``options`` (empty where it has none)."""
    model, task = run.model.config.model, run.model.task
    own = method_options(run) if run.kind == "train" else {}
    return [model.name if model else None, model.d_model if model else None, run.lr, task.seq_len,
            task.num_kv_pairs, *(own.get(name) for name in options)]


CELL_COLUMNS = ("method", "variant", "budget", "device", "dtype", "host", "task", "seq_len", "num_kv_pairs", "model",
                "lr", "n", "mean", "std", "baseline", "verdict", "did_not_learn", "solved", "stopped_early",
                "steps_to_target", "steps_to_target_std", "curves", "state_bytes", "train_tokens_per_s",
                "peak_memory_bytes", "run_ids")


def accuracy_column(length: int) -> str:
    """The column of the test accuracy at a longer evaluated length (metrics.length_accuracy)."""
    return f"accuracy_at_{length}"


def length_columns(lengths) -> list[str]:
    return [accuracy_column(n) for n in sorted(set(lengths))]


def cell_columns(rows: list[Row], costs: dict[str, CellCost] | None = None) -> list[str]:
    """cells.csv's columns: CELL_COLUMNS, then the mean accuracy at each longer length any cell was
    scored at, then the cost columns (costs.cost_columns) of the cells whose configuration has a cost record."""
    joined = [c for c in (cost_for(cell.runs, costs or {}) for row in rows for cell in row.cells.values()) if c]
    return [*CELL_COLUMNS, *length_columns(n for row in rows for cell in row.cells.values()
                                           for n in cell.length_points()), *cost_columns(joined)]


def cells(rows: list[Row], costs: dict[str, CellCost] | None = None) -> list[dict[str, Any]]:
    """Every cell of the board as its table shows it: its configuration and host, mean and spread over
    seeds, baseline and verdicts, how many seeds stopped early at the target and their steps to it
    (where every seed did: solved), what its curves say, its median costs, the mean accuracy at each
    longer evaluated length, the runs it averages, and what its configuration's cost record measured
    (``costs``: costs.cell_costs; its own host, with ratios to exact attention's)."""
    found = []
    for row in rows:
        for column, cell in row.cells.items():
            solved = cell.solved()
            steps = cell.values("steps") if solved else []
            ok = [r for r in cell.runs if r.status == "ok"]
            found.append(dict(zip(CELL_COLUMNS, (
                row.method, row.variant, row.budget, row.device, row.dtype, row.hardware, column.task, column.seq_len,
                column.num_kv_pairs, column.model, cell.lr, len(cell.values()), cell.mean(), cell.spread(),
                cell.baseline(), cell.verdict(), cell.did_not_learn(), solved,
                f"{sum(map(reached_target, ok))}/{len(ok)}", statistics.fmean(steps) if steps else None,
                statistics.stdev(steps) if len(steps) >= 2 else None, cell.curve_mark(),
                cell.median("state_bytes"), cell.median("train_tokens_per_s"), cell.memory()[0],
                " ".join(r.run_id for r in cell.runs)))) | {
                accuracy_column(n): statistics.fmean(p["accuracy"] for p in points)
                for n, points in cell.length_points().items()} | cost_values(cost_for(cell.runs, costs or {})))
    return found


def run_columns(runs: list[Run]) -> list[str]:
    """What records.csv adds to a run's own fields: its steps to the target (where it stopped early at
    it) and its test accuracy at each longer evaluated length."""
    return ["steps_to_target", *length_columns(p["seq_len"] for r in runs if r.kind == "train"
                                               for p in r.metrics.get("length_accuracy") or [])]


def run_values(run: Run, columns: list[str]) -> list[Any]:
    """The run's values of ``run_columns``."""
    steps = run.metric("steps") if run.kind == "train" and reached_target(run) else None
    lengths = {accuracy_column(p["seq_len"]): p["accuracy"] for p in run.metrics.get("length_accuracy") or []}
    return [steps, *(lengths.get(c) for c in columns[1:])]


def cells_json(rows: list[Row], costs: dict[str, CellCost] | None = None) -> str:
    return json.dumps(cells(rows, costs), indent=1) + "\n"
