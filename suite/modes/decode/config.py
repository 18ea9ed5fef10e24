"""What mode=decode reads of the config: its own block (the reference, threads, a grid per budget)
and the model's heads and width."""

from typing import Annotated

from pydantic import Strict, with_config
from typing_extensions import TypedDict

from suite.config import CLOSED, OPEN, BudgetName, Count, CountOrZero, Counts, Model, Threads, choice, rule
from suite.hardware import DTYPES


@with_config(CLOSED)
class Grid(TypedDict):
    context_lengths: Counts
    batch_sizes: Counts
    warmup_steps: CountOrZero
    timed_steps: Count
    prefill_repeats: Count
    dtype: choice(tuple(DTYPES))


@with_config(CLOSED)
class DecodeMode(TypedDict):
    name: str
    reference: Annotated[str | None, Strict(), rule("name a method or be null")]  # the method registry checks it
    cpu_threads: Threads
    grids: dict[str, Grid]


@with_config(OPEN)
class Run(TypedDict):
    mode: DecodeMode
    budget: BudgetName
    model: Model  # its heads and width
