"""The long board's cells as Markdown (docs/long_board.md), read from the records by the site's own
code: per method at its default state, the chosen rate, test accuracy at the trained length (mean ±
sd over seeds), steps to the target where every seed reached it, the accuracy at each longer length
it was tested at, and, where its configuration has a cost record, inference time and peak memory
relative to exact attention's at each length (same host and commit; suite/site/costs.py). Then the
wall time its training runs took (issue 43, item 6: every ok run of the sweeps, the rates the protocol
tried and the seeds; their sum, and half of it, the wall time of two jobs that never wait), and the
lead's AT_LENGTH sentence as the site states it.

    python scripts/long_table.py [--results results]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from suite.site.board import board_columns, board_rows, format_lr
from suite.site.costs import INFERENCE, TRAIN_STEP, cell_costs, cost_for
from suite.site.lead import lead
from suite.site.runs import load_runs


def spread_text(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    mean = statistics.fmean(values)
    spread = f" ± {scale * statistics.stdev(values):.{digits}f}" if len(values) >= 2 else ""
    return f"{scale * mean:.{digits}f}{spread}"


def wall_time_text(runs) -> str:
    """The board's training time from its ok train records, per method and in all (hours). A run's
    ``wall_time_s`` is its last process's (a run resumed from a checkpoint counts from the resume), its
    ``train_wall_time_s`` the training loop's across resumes: the larger of the two, so a resumed run
    misses only its setup and the evaluations before the stop."""
    hours: dict[str, list[float]] = {}
    for run in runs:
        record = run.record
        if run.tier == "verified" and record["kind"] == "train" and record["status"] == "ok":
            metrics = record["metrics"]
            seconds = max(metrics.get("wall_time_s", 0.0), metrics.get("train_wall_time_s", 0.0))
            hours.setdefault(record["method"]["name"], []).append(seconds / 3600)
    if not hours:
        return "No training records yet."
    total = sum(sum(h) for h in hours.values())
    each = ", ".join(f"{name} {len(h)} runs {sum(h):.1f} h" for name, h in sorted(hours.items()))
    return (f"Wall time of the training runs ({sum(len(h) for h in hours.values())} ok runs, every rate tried "
            f"and every seed): {total:.1f} h in all, {total / 2:.1f} h as two one-thread jobs; {each}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args()
    runs, _ = load_runs(args.results / "long")
    rows = [r for r in board_rows(runs) if not r.variant]
    columns = board_columns(rows)
    costs = cell_costs(runs)
    for column in columns:
        cells = [(row, row.cells[column]) for row in rows if column in row.cells and row.cells[column].values()]
        lengths = sorted({n for _, cell in cells for n in cell.length_points()})
        print(f"\n{column.label}: test accuracy (%) at {column.seq_len} tokens and at each longer test length, "
              "mean ± sd over seeds at the chosen rate\n")
        print("| method | rate | n | accuracy | steps to target | "
              + " | ".join(f"{n:,}" for n in lengths) + " |")
        print("|---|---|---|---|---|" + "---|" * len(lengths))
        for row, cell in cells:
            steps = spread_text(cell.values("steps"), 1, 0) if cell.solved() else "not all reached"
            at = cell.length_points()
            print(f"| {row.method} | {format_lr(cell.lr) if cell.lr else '–'} | {len(cell.values())} | "
                  f"{spread_text(cell.values())} | {steps} | "
                  + " | ".join(spread_text([p['accuracy'] for p in at[n]]) if n in at else "–" for n in lengths)
                  + " |")
        measured = [(row, cost_for(cell.runs, costs)) for row, cell in cells]
        measured = [(row, c) for row, c in measured if c is not None]
        if not measured:
            print("\nNo cost records yet (`attention-suite board long --cost`, on an idle host after the board).")
            continue
        every = sorted({n for _, c in measured for n in c.cost.lengths()})
        hosts = sorted({c.host for _, c in measured})
        print(f"\nCost relative to exact attention (inference time per sequence / its peak memory; training step "
              f"at {column.seq_len}), on {', '.join(hosts)}:\n")
        print("| method | train step | " + " | ".join(f"{n:,}" for n in every) + " |")
        print("|---|---|" + "---|" * len(every))

        def ratio(cost, phase, n, what="time"):
            found = cost.ratio(phase, n, what)
            return "–" if found is None else f"{found:.2f}×"

        for row, c in measured:
            trained = c.cost.trained_length
            print(f"| {row.method} | {ratio(c, TRAIN_STEP, trained) if trained else '–'} | "
                  + " | ".join(f"{ratio(c, INFERENCE, n)} / {ratio(c, INFERENCE, n, 'memory')}" for n in every)
                  + " |")
    print(f"\n{wall_time_text(runs)}")
    for sentence in lead(rows, columns, runs).summary:
        if sentence.rule == "AT_LENGTH":
            print(f"\nAT_LENGTH: {sentence.text}")


if __name__ == "__main__":
    main()
