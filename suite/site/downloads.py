"""What a reader can take away as data: the columns that define a run's cell (for records.csv), and
the board's aggregated cells (cells.csv, cells.json), one row per cell as the board shows it."""

from __future__ import annotations

import json
from typing import Any

from suite.site.board import Row
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


CELL_COLUMNS = ("method", "variant", "budget", "device", "dtype", "task", "seq_len", "num_kv_pairs", "model", "lr",
                "n", "mean", "std", "baseline", "verdict", "curves", "state_bytes", "train_tokens_per_s",
                "peak_memory_bytes", "run_ids")


def cells(rows: list[Row]) -> list[dict[str, Any]]:
    """Every cell of the board as its table shows it: its configuration, mean and spread over seeds,
    baseline and verdict, what its curves say, its median costs, and the runs it averages."""
    found = []
    for row in rows:
        for column, cell in row.cells.items():
            found.append(dict(zip(CELL_COLUMNS, (
                row.method, row.variant, row.budget, row.device, row.dtype, column.task, column.seq_len,
                column.num_kv_pairs, column.model, cell.lr, len(cell.values()), cell.mean(), cell.spread(),
                cell.baseline(), cell.verdict(), cell.curve_mark(), cell.median("state_bytes"),
                cell.median("train_tokens_per_s"), cell.memory()[0], " ".join(r.run_id for r in cell.runs)))))
    return found


def cells_json(rows: list[Row]) -> str:
    return json.dumps(cells(rows), indent=1) + "\n"
