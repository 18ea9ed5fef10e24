"""The rules the board's findings follow, each a named function over the records' cells: which cell
is exact attention at its point, which cells are one result, which lead clearly and which are
tied, which hold equal state, which ran at equal width. suite/site/lead.py turns their answers into
the first screen's sentences; tests/test_site_rules.py tests each on fixture records. Every rule
reads a cell at the point it ran, never a method's name or today's numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.site import known, stats
from suite.site.board import Cell, Column, Row

STATE_BAND = 0.10  # states within 10% of each other are equal state: a counter's 8 bytes never split them
WIDTH = "d_model"  # the model size that sets every method's state at equal options


def window_covers(cell: Cell, column: Column) -> bool:
    """Whether every run of the cell attends through a window (the method's resolved ``window``
    option) at least as long as the point's sequence: such a window sees every key."""
    if not cell.runs or not column.seq_len:
        return False
    windows = [(r.record["method"].get("resolved") or {}).get("window") or
               ((r.model.config.method.options if r.model.config.method else None) or {}).get("window")
               for r in cell.runs]
    return all(isinstance(w, int) and w >= column.seq_len for w in windows)


def exact_at(row: Row, cell: Cell, column: Column) -> tuple[bool, bool]:
    """EXACT_AT_POINT: (exact, assumed). A cell is exact attention at its point when its record says
    its time grows as N^2, or when its window covers the whole sequence there; ``assumed`` when no run
    recorded method.time_in_length (then known.is_exact's fallback decides)."""
    recorded = [r.model.method.time_in_length for r in cell.runs if r.model.method.time_in_length]
    time = recorded[0] if recorded else None
    return known.is_exact(row.method, time) or window_covers(cell, column), time is None


def fingerprint(cell: Cell) -> tuple:
    """What a cell's runs measured, seed by seed: the test accuracy, steps and final train loss. Two
    cells with the same fingerprint computed the same thing; accuracies alone, ratios of counts, can
    agree by chance, a float loss to its last bit cannot, so a run without one leaves it empty."""
    keys = ("test_accuracy", "steps", "final_train_loss")  # raw metrics: the final loss is not a declared one
    found = [(str(r.seed), *(r.metrics.get(k) for k in keys)) for r in cell.runs if r.status == "ok"]
    return () if any(f[-1] is None for f in found) else tuple(sorted(found))


def same_result(a: Cell, b: Cell) -> bool:
    """SAME_RESULT: two cells are one result when their runs' fingerprints are identical."""
    found = fingerprint(a)
    return bool(found) and found == fingerprint(b)


def clearly_ahead(a: Cell, b: Cell) -> bool:
    """CLEAR_LEAD: ``a`` leads ``b`` on accuracy when the comparison test (suite/site/stats.py, TEST)
    finds ``a``'s mean above ``b``'s."""
    return stats.clearly_ahead(a.estimate(), b.estimate())


def fewer_steps(a: Cell, b: Cell) -> bool:
    """``a`` reaches the target in fewer steps than ``b``, by the same test on the steps to target."""
    return stats.clearly_ahead(a.steps_estimate(), b.steps_estimate(), higher=False)


def top_group(items: list, key, ahead) -> list:
    """The head of ``items`` (by ``key``, best first) that the test cannot split: every item down to
    the last one the best does not lead (``ahead(best, item)`` false), and any level with it. Cut at
    the last such item, never at the first led one, so the relation is consistent: an item above or
    level with one in the group is in it."""
    ranked = sorted(items, key=key)
    last = max((i for i, item in enumerate(ranked) if not ahead(ranked[0], item)), default=None)
    return [] if last is None else [item for item in ranked if key(item) <= key(ranked[last])]


def leaders(cells: list[Cell]) -> list[Cell]:
    """TIES: the cells tied for best on accuracy, best mean first: the cell with the highest mean and
    every cell down to the last one it does not clearly lead (CLEAR_LEAD); every solved cell (SOLVED)
    too, since solved cells are tied on accuracy. One cell is the best; several are tied."""
    return top_group([c for c in cells if c.mean() is not None], lambda c: -c.mean(),
                     lambda top, c: clearly_ahead(top, c) and not c.solved())


def fastest(cells: list[Cell]) -> list[Cell]:
    """SOLVED: among solved cells, the one with the fewest mean steps to the target and every cell
    the test cannot place behind it on steps (consistent as top_group is), fewest first."""
    return top_group([c for c in cells if c.solved()], lambda c: c.steps_estimate().mean, fewer_steps)


def relation(a: Cell, b: Cell) -> str:
    """How ``a`` stands to ``b`` on accuracy by the comparison test: 'leads', 'trails' or 'ties'
    (two solved cells tie: SOLVED)."""
    if a.solved() and b.solved():
        return "ties"
    if clearly_ahead(a, b):
        return "leads"
    return "trails" if clearly_ahead(b, a) else "ties"


def optimisation_failed(rows: list[Row], row: Row, column: Column) -> str | None:
    """OPTIMISATION_FAILED: why a recall cell's runs say its optimisation failed, not the method's
    capacity, or None. Either every seed ended with a train loss above ln(pairs), worse than spreading
    its guess evenly over the context's values, which needs no binding at all; or it did not learn
    (DID_NOT_LEARN) at these pairs while the same configuration learned at more pairs on the same
    model and length (in any of ``rows`` of the same method, variant, budget and tier: a row holds one
    machine's runs): capacity falls with more pairs, so a curve that rises with them is the optimiser's."""
    cell = row.cells.get(column)
    if cell is None or not column.recall:
        return None
    losses = [r.metrics.get("final_train_loss") for r in cell.runs if r.status == "ok"]
    floor = math.log(column.num_kv_pairs)
    reasons = []
    if losses and all(isinstance(x, (int, float)) and x > floor for x in losses):
        reasons.append(f"train loss above ln({column.num_kv_pairs}) = {floor:.2f} on every seed")
    siblings = [r for r in rows if (r.method, r.variant, r.budget, r.dtype, r.tier, r.origin) ==
                (row.method, row.variant, row.budget, row.dtype, row.tier, row.origin)]
    harder = sorted({c.num_kv_pairs for r in siblings for c, other in r.cells.items()
                    if c.recall and (c.task, c.seq_len, c.model) == (column.task, column.seq_len, column.model)
                    and c.num_kv_pairs > column.num_kv_pairs and other.verdict() == "above"})
    if harder and cell.did_not_learn():
        reasons.append(f"did not learn at {column.num_kv_pairs} pairs, yet learned at {', '.join(map(str, harder))}")
    return "; ".join(reasons) or None


def equal_state_groups(states: list[float]) -> list[list[float]]:
    """EQUAL_STATE: the states, smallest first, in groups of equal state: a group starts at its
    smallest state and holds every state within STATE_BAND above it."""
    groups: list[list[float]] = []
    for state in sorted(states):
        if groups and state <= groups[-1][0] * (1 + STATE_BAND):
            groups[-1].append(state)
        else:
            groups.append([state])
    return groups


@dataclass(frozen=True)
class Knobs:
    """What sets a cell's state apart from its method's usual configuration: the row's variant
    sizes (model width, feature count, window, ...), by name."""

    sizes: dict[str, str]

    @classmethod
    def of(cls, row: Row) -> Knobs:
        parts = [p.split("=", 1) for p in row.variant.split(", ") if "=" in p]
        return cls({k: v for k, v in parts})

    @property
    def width_only(self) -> bool:
        """Whether only the model width (or nothing) differs from the usual configuration."""
        return set(self.sizes) <= {WIDTH}
