"""Validation curves: per board point, a page (curves/<point>.html) with a figure per cell, the
validation accuracy of every run behind the cell (its seeds at the chosen rate and the rates of its
learning-rate sweep) against the training step, from the records' ``metrics.val_curve``, with the
cell's baseline; beside it the steps each run took and the step of its best validation accuracy."""

from __future__ import annotations

from dataclasses import dataclass

from suite.site.board import Cell, Column, Row, board_baseline, format_lr
from suite.site.charts import Axis, Layout, chart
from suite.site.figures import Figure
from suite.site.runs import Run, safe_name


@dataclass(frozen=True)
class CurveCell:
    """One cell of a point's curves page."""

    row: Row
    cell: Cell
    anchor: str  # the cell's element id on the page
    figure: Figure | None  # None when no run of the cell recorded its curve


def page_path(column: Column) -> str:
    return f"curves/{column.slug}.html"


def anchor(row: Row) -> str:
    return "cell-" + safe_name(row.key)


def cell_href(row: Row, column: Column) -> str:
    """Where a board cell's validation curves are, from the site root."""
    return f"{page_path(column)}#{anchor(row)}"


def run_label(run: Run, cell: Cell) -> str:
    lr = "" if run.lr is None else f" · lr {format_lr(run.lr)}"
    return f"seed {run.seed}{lr}" + ("" if run in cell.runs else " (sweep)")


def curve_figure(row: Row, column: Column, cell: Cell) -> Figure | None:
    """Validation accuracy against step for each run of the cell that recorded its curve."""
    data = []
    for run in sorted(cell.every_run(), key=lambda r: (r not in cell.runs, str(r.seed), r.lr or 0.0)):
        best = run.metric("best_step")
        for step, accuracy in run.metric("val_curve") or []:
            data.append({"series": run_label(run, cell), "x": step, "y": accuracy, "hollow": False,
                         "x_text": f"{step:,.0f}", "y_text": f"{100 * accuracy:.1f}%",
                         "tip": f"{run.status}, {run.metric('steps') or '?'} steps"
                                + ("" if best is None else f", best validation at step {best:,}")})
    if not data:
        return None
    baselines = [b for b in map(board_baseline, cell.runs) if b is not None]
    levels = [{"y": baselines[0].accuracy, "label": f"baseline: {baselines[0].name}"}] if baselines else []
    title = f"{row.label} on {column.label}: validation accuracy vs step"
    caption = ("Validation accuracy at every evaluation of each run behind the cell: its seeds at the chosen "
               "rate, and the other rates of its learning-rate sweep (marked sweep). Dashed grey line: the "
               "cell's baseline. Hover a point for its values; click a legend entry to show that run alone.")
    spec = chart(title, data, Axis("training step"), Axis("validation accuracy", "fraction"), Layout(levels=levels))
    return Figure("curves", title, spec, caption)


def curve_pages(rows: list[Row], columns: list[Column]) -> dict[Column, list[CurveCell]]:
    """Per board point with cells: its cells in board order, each with its curve figure."""
    pages = {}
    for column in columns:
        cells = [CurveCell(r, r.cells[column], anchor(r), curve_figure(r, column, r.cells[column]))
                 for r in rows if column in r.cells]
        if cells:
            pages[column] = cells
    return pages
