"""What mode=cost reads of the config: the blocks a train run reads (its model, task, budget and
recipe, so that it builds the same model), and its own block: a grid per budget name."""

from pydantic import with_config
from typing_extensions import TypedDict

from suite.config import CLOSED, Count, Positive, Training


@with_config(CLOSED)
class Grid(TypedDict):
    warmup: Count
    repeats: Count
    point_budget_s: Positive
    time_limit_s: Positive
    eval_batch: Count


@with_config(CLOSED)
class CostMode(TypedDict):
    name: str
    grids: dict[str, Grid]


class Run(Training):
    mode: CostMode
