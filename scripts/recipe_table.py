"""The recipe board's tables as Markdown (docs/recipe_board.md), read from the records by the
site's own code: each state-axis configuration at the state-bound point under the suite's recipe
and under Zoology's (mean ± sd over seeds at the chosen rate), then the equal-state bands with
their comparison under each recipe and the RECIPE mark.

    python scripts/recipe_table.py [--results results]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from suite.recipe import one_switch
from suite.site.board import SUITE_RECIPE, board_columns, board_rows, format_lr
from suite.site.lead import lead
from suite.site.runs import load_runs


def cell_text(cell) -> str:
    spread = cell.spread()
    return (f"{100 * cell.mean():.1f} ± {100 * spread:.1f}" if spread is not None else f"{100 * cell.mean():.1f}") + \
        f" ({format_lr(cell.lr)}, n={len(cell.values())})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args()
    runs, _ = load_runs(args.results)
    rows = board_rows(runs)
    first = lead(rows, board_columns(rows), runs)
    point = first.state_point
    recipes = sorted({r.recipe for r in rows if point in r.cells and r.recipe != SUITE_RECIPE})
    print(f"Test accuracy (%) on {point.label}, mean ± sd over seeds at the chosen rate:\n")
    print("| configuration | state | recipe=suite | " + " | ".join(f"recipe={r}" for r in recipes) + " |")
    print("|---|---|---|" + "---|" * len(recipes))
    by = {(r.method, r.variant, r.recipe): r.cells[point] for r in rows if point in r.cells}
    for (method, variant, recipe), cell in by.items():
        others = [by.get((method, variant, r)) for r in recipes]
        if recipe != SUITE_RECIPE or not any(others):
            continue
        label = f"{method} ({variant})" if variant else method
        state = cell.median("state_bytes")
        print(f"| {label} | {state / 1024:.1f} KiB | {cell_text(cell)} | "
              + " | ".join(cell_text(c) if c else "–" for c in others) + " |")
    switch = {row.recipe: one_switch(row.example.record["config"]) for row in rows}
    recipes = [r for r in recipes if switch[r] is None]  # a one-switch recipe names what moves a comparison
    print("\nEqual-state comparisons (EQUAL_STATE, asked again under each recipe: RECIPE):\n")
    print("| state | comparison (recipe=suite) | " + " | ".join(f"recipe={r}" for r in recipes) + " | mark |")
    print("|---|---|" + "---|" * len(recipes) + "---|")
    for g in first.states:
        if g.compared is None:
            print(f"| {g.size} | no exact-attention cell | " + " | ".join("–" for _ in recipes) + " | – |")
            continue
        c = g.compared
        under = [next((o.relation or "not run for both" for o in g.recipes if o.recipe == r), "–") for r in recipes]
        mark = {True: "holds under both", False: f"depends on the recipe ({g.moved_by})", None: "not asked"}[g.holds]
        print(f"| {g.size} | {c.sub.row.label} {c.relation} {c.exact.row.label} | " + " | ".join(under)
              + f" | {mark} |")


if __name__ == "__main__":
    main()
