"""What mode=kernel reads of the config: its grid for the budget's name, nothing else (it runs from
a dict of a few keys on a GPU host)."""

from typing import Annotated

from pydantic import Field, Strict, with_config
from typing_extensions import TypedDict

from suite.config import (
    CLOSED,
    OPEN,
    BareCount,
    BudgetName,
    Count,
    CountOrNull,
    Counts,
    Positive,
    Threads,
    among,
    listed,
    rule,
)
from suite.hardware import DTYPES
from suite.modes.kernel.implementations import PEERS

IMPLS = ("naive", "chunk", "triton", "sdpa")  # what a grid may time of the method


@with_config(CLOSED)
class Grid(TypedDict):
    lengths: Counts
    batch: Count
    heads: Count
    head_dims: Counts
    value_dim: CountOrNull
    dtypes: listed("from", tuple(DTYPES))
    causal: Annotated[list[Annotated[bool, Strict()]], Field(min_length=1), rule("list true and/or false")]
    impls: listed("from", IMPLS)
    peers: listed("from", PEERS, empty=True)
    warmup: Count
    repeats: Count
    point_budget_s: Positive
    time_limit_s: Positive
    max_length: Annotated[dict[Annotated[str, Strict(), among(IMPLS)], BareCount],
                          rule(f"map implementations ({', '.join(IMPLS)}) to positive lengths")]
    matmul_size: Count
    cpu_threads: Threads


@with_config(CLOSED)
class KernelMode(TypedDict):
    name: str
    grids: dict[str, Grid]


@with_config(OPEN)
class Run(TypedDict):
    mode: KernelMode
    budget: BudgetName
