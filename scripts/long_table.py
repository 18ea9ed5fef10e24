"""The long board's cells as Markdown (docs/long_board.md), read from the records by the site's own
code: per method at its default state, the chosen rate, test accuracy at the trained length (mean ±
sd over seeds), steps to the target where every seed reached it, the accuracy at each longer length
it was tested at, and, where its configuration has a cost record, inference time and peak memory
relative to exact attention's at each length (same host and commit; suite/site/costs.py). Then the
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
    for sentence in lead(rows, columns, runs).summary:
        if sentence.rule == "AT_LENGTH":
            print(f"\nAT_LENGTH: {sentence.text}")


if __name__ == "__main__":
    main()
