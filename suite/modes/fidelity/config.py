"""What mode=fidelity reads of the config: the blocks of training (it trains a softmax model on the
task to capture q, k, v from) and its own block, a grid per budget."""

import typing
from typing import Annotated

from pydantic import AfterValidator, Field, with_config
from typing_extensions import NotRequired, TypedDict

from suite.config import (
    CLOSED,
    OPEN,
    BareNumber,
    Bool,
    Budget,
    Count,
    CountOrZero,
    Counts,
    Line,
    Positive,
    Training,
    rule,
)

PartialBudget = with_config(CLOSED)(
    TypedDict("PartialBudget", typing.get_type_hints(Budget, include_extras=True), total=False))


@with_config(OPEN)
class CaptureTask(TypedDict, total=False):
    seq_len: Count  # the task checks the rest when the capture model's data loads


@with_config(CLOSED)
class Capture(TypedDict, total=False):
    task: CaptureTask  # written over the run's task and budget for the softmax model captured from
    budget: PartialBudget


@with_config(CLOSED)
class Fit(TypedDict):  # captured queries split in halves: methods with parameters to fit (Hedgehog) fit on one
    steps: CountOrZero  # Adam steps; 0 = no fitting (every method is still measured on the held-out half)
    lr: Positive
    queries: Count  # fitting queries drawn per step (of each sequence and head; every key is used)


def some_input(grid: dict) -> dict:
    if not grid["score_stds"] and not grid["captured"]:
        raise Line("no input source: score_stds is empty and captured is false", located=True)
    return grid


@with_config(CLOSED)
class _Grid(TypedDict):
    d_phi: Counts
    seq_lens: Counts
    score_stds: Annotated[list[Annotated[BareNumber, Field(gt=0)]],
                          rule("be a list of positive numbers (may be empty)")]
    sequences: Count
    queries: Count
    feature_draws: Count
    captured: Bool
    capture: NotRequired[Capture]
    fit: NotRequired[Fit]


Grid = Annotated[_Grid, AfterValidator(some_input)]


@with_config(CLOSED)
class FidelityMode(TypedDict):
    name: str
    grids: dict[str, Grid]


class Run(Training):
    mode: FidelityMode
