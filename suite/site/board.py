"""The leaderboard's numbers: train runs grouped into rows (method, budget, device, dtype) and
columns (tasks), mean and spread over seeds, and LRA's average by its published rule."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from suite.metrics import BY_NAME
from suite.site.runs import Run, number
from tasks.lra import reference

ACCURACY = BY_NAME["test_accuracy"]
LRA_TASKS = reference.TASKS[:5]  # Path-X is excluded from LRA's average
LRA_RULE = (
    "LRA avg: the mean of the five LRA task means (" + ", ".join(LRA_TASKS) + "), Path-X excluded, "
    "as in Tay et al. 2021; shown only when a row has all five."
)


@dataclass
class Cell:
    """The runs of one row on one task."""

    runs: list[Run] = field(default_factory=list)

    def values(self, metric: str = ACCURACY.name) -> list[float]:
        """``metric`` of the runs that finished ok and hold a number for it."""
        values = (number(r.metrics.get(metric)) for r in self.runs if r.status == "ok")
        return [v for v in values if v is not None]

    def mean(self, metric: str = ACCURACY.name) -> float | None:
        values = self.values(metric)
        return statistics.fmean(values) if values else None

    def spread(self, metric: str = ACCURACY.name) -> float | None:
        """Sample standard deviation over seeds; None with fewer than two."""
        values = self.values(metric)
        return statistics.stdev(values) if len(values) >= 2 else None

    def failures(self) -> Counter:
        """How many runs ended in each status other than ok (diverged, oom, error, ...)."""
        return Counter(r.status for r in self.runs if r.status != "ok")


@dataclass
class Row:
    """One configuration of a method; its cells by task."""

    method: str
    budget: str
    device: str
    dtype: str
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.method} | {self.budget} | {self.device} | {self.dtype}"

    def lra_average(self) -> float | None:
        """LRA's average of this row, or None unless all five LRA tasks have a mean."""
        means = [self.cells[t].mean() if t in self.cells else None for t in LRA_TASKS]
        return None if None in means else statistics.fmean(means)


def board_rows(runs: list[Run]) -> list[Row]:
    """Train runs grouped into rows, sorted by method, budget, device, dtype."""
    rows: dict[tuple[str, str, str, str], Row] = {}
    for run in runs:
        if run.kind != "train":
            continue
        key = (run.method, run.budget, run.device, run.dtype)
        row = rows.setdefault(key, Row(*key))
        row.cells.setdefault(run.task, Cell()).runs.append(run)
    return [rows[k] for k in sorted(rows)]


def board_tasks(runs: list[Run]) -> list[str]:
    """The board's columns: LRA's five tasks when any LRA task ran (so the average's inputs show),
    Path-X if it ran, then every other task, by name."""
    ran = {r.task for r in runs if r.kind == "train"}
    lra = [t for t in reference.TASKS if t in ran or (t in LRA_TASKS and ran & set(reference.TASKS))]
    return lra + sorted(ran - set(lra))


@dataclass(frozen=True)
class ReferenceRow:
    """A published LRA row: accuracy in percent per task (None: failed), its average."""

    model: str
    ours: str | None  # our method reimplementing that model, if any
    accuracy: dict[str, float | None]
    average: float


def reference_rows() -> list[ReferenceRow]:
    """LRA Table 1 (Tay et al. 2021), one row per published model."""
    ours = {model: method for method, model in reference.METHOD_MODELS.items()}
    models = dict.fromkeys(r.model for r in reference.RESULTS)
    return [
        ReferenceRow(model, ours.get(model),
                     {t: reference.accuracy(model, t) for t in reference.TASKS}, reference.average(model))
        for model in models
    ]
