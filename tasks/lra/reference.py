"""Published Long Range Arena results: test accuracy (%) of each model on each task.

Source: Tay et al., "Long Range Arena: A Benchmark for Efficient Transformers", ICLR 2021,
Table 1, as listed on the benchmark's own leaderboard (google-research/long-range-arena README,
"as of 8th November 2020"). Path-X: every model "FAIL"s (does not beat chance); stored as None.
LRA's "Avg" is the mean of the other five tasks; :func:`average` recomputes it. It matches the
published value to 0.01 for every model but Sinkhorn, whose listed 51.29 disagrees with the
mean of its own row (51.48).
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "Tay et al. 2021 (ICLR), Long Range Arena, Table 1; google-research/long-range-arena README"
TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")

# model -> accuracy per task, in TASKS order; None = FAIL.
_TABLE: dict[str, tuple[float | None, ...]] = {
    "Transformer": (36.37, 64.27, 57.46, 42.44, 71.40, None),
    "Local Attention": (15.82, 52.98, 53.39, 41.46, 66.63, None),
    "Sparse Transformer": (17.07, 63.58, 59.59, 44.24, 71.71, None),
    "Longformer": (35.63, 62.85, 56.89, 42.22, 69.71, None),
    "Linformer": (35.70, 53.94, 52.27, 38.56, 76.34, None),
    "Reformer": (37.27, 56.10, 53.40, 38.07, 68.50, None),
    "Sinkhorn Transformer": (33.67, 61.20, 53.83, 41.23, 67.45, None),
    "Synthesizer": (36.99, 61.68, 54.67, 41.61, 69.45, None),
    "BigBird": (36.05, 64.02, 59.29, 40.83, 74.87, None),
    "Linear Transformer": (16.13, 65.90, 53.09, 42.34, 75.30, None),
    "Performer": (18.01, 65.40, 53.82, 42.77, 77.05, None),
}

# Our method names for the LRA models they reimplement (softmax attention, elu+1 linear
# attention of Katharopoulos et al., FAVOR+ of Choromanski et al.).
METHOD_MODELS = {"softmax": "Transformer", "linear": "Linear Transformer", "favor": "Performer"}


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
        raise KeyError(f"no LRA result for model {model!r} on task {task!r}; models: {', '.join(_TABLE)}; tasks: {', '.join(TASKS)}")
    return _TABLE[model][TASKS.index(task)]


def average(model: str) -> float:
    """LRA's "Avg" column: the mean accuracy over the five tasks other than Path-X."""
    return sum(accuracy(model, task) for task in TASKS[:5]) / 5
