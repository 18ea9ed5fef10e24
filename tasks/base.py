"""What a task is, as the harness sees it: a self-description plus three splits of examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: the task registry (tasks/__init__.py) loads without torch
    from torch.utils.data import Dataset

SPLITS = ("train", "val", "test")
IGNORE_LABEL = -100  # a token target's label where no prediction is scored


class TaskError(ValueError):
    """A user mistake or missing data for a task: one clear line, exit code 2 at the CLI."""


@dataclass(frozen=True)
class TaskInfo:
    """The task's self-description, shown in the summary and stored in the record."""

    name: str
    family: str  # "lra", "recall" or "genomics"
    seq_len: int  # longest input the task feeds the model (longer examples are truncated)
    vocab_size: int  # token ids are in [0, vocab_size); id 0 is padding
    num_classes: int
    target: Literal["sequence", "token"] = "sequence"  # one label per example, or per position
    metric: str = "accuracy"
    baseline_name: str = "majority class"  # what ``TaskData.baseline`` means
    extra: dict = field(default_factory=dict)  # task-specific facts worth recording


@dataclass
class LengthTest:
    """A test split longer than the task's, for evaluation only (a recall task scored where a fixed
    state must hold more bindings than it trained on)."""

    seq_len: int
    split: Dataset
    baseline: float
    extra: dict = field(default_factory=dict)  # what else sets the split apart (e.g. its pairs)


@dataclass
class TaskData:
    """Three splits whose items are dicts: ``input_ids`` (int64, length <= seq_len) and ``label``.

    ``label`` is an int64 scalar for sequence targets, or int64 of the input's length with
    IGNORE_LABEL (-100) where no prediction is scored, for token targets. ``baseline`` is the
    accuracy of the task's trivial predictor on the test split (majority class or chance, per
    ``info.baseline_name``).
    """

    info: TaskInfo
    train: Dataset
    val: Dataset
    test: Dataset
    baseline: float
    length_tests: list[LengthTest] = field(default_factory=list)  # longer test splits (``task.test_lengths``)
