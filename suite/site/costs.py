"""What a board cell costs at the lengths it was trained and tested at (mode=cost records), as a
ratio to exact attention's cost measured on the same host at the same commit (rules COST and AT_LENGTH).

A cost record is one method's configuration: it is joined to the board's cell of the same
configuration by ``records.measured_key`` (the cell key without the mode's block), and to exact
attention's record of the same point (the same key but for the method) from the same host and
commit. A ratio is never taken between two hosts, two commits, or a timing and a record that lacks
the reference's, and every figure and column that shows one names its host.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from suite import records
from suite.site import known
from suite.site.runs import Run

TRAIN_STEP, INFERENCE = "train_step", "inference"  # suite/modes/cost: the phases of a record's points
COST_RULE = (
    "A cell's cost comes from its configuration's mode=cost record (the training step at the trained length; "
    "inference per sequence, and its peak memory, at the trained length and every longer length it was tested "
    "at), measured one run at a time on an idle host (`attention-suite board <name> --cost`). Ratios are to exact "
    "attention's record of the same point from the same host and commit; none is taken across hosts or commits. "
    "Where a configuration has cost records from several hosts, the host with the most of them is shown, and "
    "named beside every figure and column."
)


@dataclass(frozen=True)
class Cost:
    """One cost record: per phase and length, the time (per sequence for inference; the whole step
    for training) and peak memory of its ok points."""

    run: Run
    times: dict[tuple[str, int], float] = field(default_factory=dict)
    memory: dict[tuple[str, int], float] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.run.hardware

    @property
    def commit(self) -> str:
        return self.run.model.env.git_commit or "not recorded"

    @property
    def trained_length(self) -> int | None:
        return next((length for phase, length in self.times if phase == TRAIN_STEP), None)

    def lengths(self) -> list[int]:
        """The lengths inference was measured at, shortest first."""
        return sorted(length for phase, length in self.times if phase == INFERENCE)

    def value(self, phase: str, length: int, what: str = "time") -> float | None:
        """The time (``what``: time) or peak memory (memory) of ``phase`` at ``length``, if measured."""
        return (self.times if what == "time" else self.memory).get((phase, length))


def cost_of(run: Run) -> Cost:
    times, memory = {}, {}
    for point in run.model.metrics.points:
        if point.status != "ok":
            continue
        key = (point.phase, point.length)
        times[key] = point.median_s if point.phase == TRAIN_STEP else point.per_sequence_s
        if point.peak_memory_bytes is not None:
            memory[key] = point.peak_memory_bytes
    return Cost(run, times, memory)


def point_key(config: dict) -> str:
    """What a configuration measures but for its method: the cells of one board point share it."""
    return records.measured_key({k: v for k, v in config.items() if k != "method"})


@dataclass(frozen=True)
class CellCost:
    """A configuration's cost on one host, with exact attention's from the same host and commit."""

    cost: Cost
    reference: Cost | None  # None where the host and commit have no exact attention record of the point

    @property
    def host(self) -> str:
        return self.cost.host

    def value(self, phase: str, length: int, what: str = "time") -> float | None:
        return self.cost.value(phase, length, what)

    def ratio(self, phase: str, length: int, what: str = "time") -> float | None:
        """This cost over exact attention's at ``phase`` and ``length`` (``what``: time or memory)."""
        if self.reference is None:
            return None
        mine, theirs = self.value(phase, length, what), self.reference.value(phase, length, what)
        return mine / theirs if mine is not None and theirs else None


def cell_costs(runs: list[Run]) -> dict[str, CellCost]:
    """Per measured configuration (records.measured_key), its cost on the host with most cost records
    of it (ties: the host with most cost records in all, then by name), the latest ok record there,
    paired with exact attention's of the same point, host and commit."""
    reference = known.reference_method()
    found = [cost_of(r) for r in sorted(runs, key=lambda r: r.created) if r.kind == "cost" and r.status == "ok"]
    every_host = Counter(c.host for c in found)
    by_key: dict[str, list[Cost]] = {}
    for cost in found:
        by_key.setdefault(records.measured_key(cost.run.record["config"]), []).append(cost)
    exact: dict[tuple[str, str, str], Cost] = {}  # (point key, host, commit) -> the latest reference record
    for cost in found:
        if cost.run.method == reference:
            exact[(point_key(cost.run.record["config"]), cost.host, cost.commit)] = cost
    chosen = {}
    for key, costs in by_key.items():
        hosts = Counter(c.host for c in costs)
        host = min(hosts, key=lambda h: (-hosts[h], -every_host[h], h))
        latest = [c for c in costs if c.host == host][-1]
        chosen[key] = CellCost(latest, exact.get((point_key(latest.run.record["config"]), host, latest.commit)))
    return chosen


def cost_for(cell_runs: list[Run], costs: dict[str, CellCost]) -> CellCost | None:
    """The cost of the configuration a cell's runs share, if it was measured."""
    for run in cell_runs:
        found = costs.get(records.measured_key(run.record["config"]))
        if found is not None:
            return found
    return None


def cost_columns(costs: list[CellCost]) -> list[str]:
    """cells.csv's cost columns: the host, the training step (seconds, ratio), then per length
    inference per sequence and its peak memory (each with its ratio)."""
    lengths = sorted({n for c in costs for n in c.cost.lengths()})
    per_length = [f"{name}_at_{n}" for n in lengths for name in
                  ("inference_s", "inference_vs_exact", "inference_memory_bytes", "inference_memory_vs_exact")]
    return ["cost_host", "cost_commit", "train_step_s", "train_step_vs_exact", *per_length] if costs else []


def cost_values(cost: CellCost | None) -> dict[str, Any]:
    """A cell's values of ``cost_columns`` (none where its configuration has no cost record)."""
    if cost is None:
        return {}
    trained = cost.cost.trained_length
    values: dict[str, Any] = {"cost_host": cost.host, "cost_commit": cost.cost.commit}
    if trained is not None:
        values |= {"train_step_s": cost.value(TRAIN_STEP, trained),
                   "train_step_vs_exact": cost.ratio(TRAIN_STEP, trained)}
    for n in cost.cost.lengths():
        values |= {f"inference_s_at_{n}": cost.value(INFERENCE, n),
                   f"inference_vs_exact_at_{n}": cost.ratio(INFERENCE, n),
                   f"inference_memory_bytes_at_{n}": cost.value(INFERENCE, n, "memory"),
                   f"inference_memory_vs_exact_at_{n}": cost.ratio(INFERENCE, n, "memory")}
    return values
