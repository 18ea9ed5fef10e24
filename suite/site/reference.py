"""Published Long Range Arena results, read from the site's own data (suite/site/data/lra_table1.json):
test accuracy (%) of each model on each task, Table 1 of Tay et al. 2021. The site reads records and
its own data only; this table is data, not task code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TABLE_FILE = Path(__file__).resolve().parent / "data" / "lra_table1.json"
_DATA = json.loads(TABLE_FILE.read_text())
SOURCE: str = _DATA["source"]
TASKS: tuple[str, ...] = tuple(_DATA["tasks"])
AVERAGE_OVER: tuple[str, ...] = tuple(_DATA["average_over"])  # Path-X is excluded from LRA's average
_TABLE: dict[str, tuple[float | None, ...]] = {model: tuple(row) for model, row in _DATA["models"].items()}
# Our method names for the LRA models they reimplement (softmax attention, elu+1 linear attention
# of Katharopoulos et al., FAVOR+ of Choromanski et al.).
METHOD_MODELS: dict[str, str] = dict(_DATA["our_methods"])


@dataclass(frozen=True)
class Result:
    """One published number: accuracy in percent, or None where the model failed the task."""

    model: str
    task: str
    accuracy: float | None
    source: str = SOURCE


RESULTS: tuple[Result, ...] = tuple(
    Result(model, task, accuracy) for model, row in _TABLE.items() for task, accuracy in zip(TASKS, row)
)


def accuracy(model: str, task: str) -> float | None:
    """The published accuracy (%) of an LRA model (or one of our method names) on a task."""
    model = METHOD_MODELS.get(model, model)
    if model not in _TABLE or task not in TASKS:
        raise KeyError(f"no LRA result for model {model!r} on task {task!r}; models: {', '.join(_TABLE)}; "
                       f"tasks: {', '.join(TASKS)}")
    return _TABLE[model][TASKS.index(task)]


def average(model: str) -> float:
    """LRA's "Avg" column: the mean accuracy over the five tasks other than Path-X."""
    return sum(accuracy(model, task) for task in AVERAGE_OVER) / len(AVERAGE_OVER)
