"""The schema of a result record: one pydantic model per record kind (DESIGN.md, "The record"),
used by the writer and the reader (suite/record_store.py) and by the site, and published with the site
as JSON Schema so that others can check a record before submitting it.

This module holds what every kind shares: the record's fields, the blocks of its config, method,
task and env, and the base of every object in it (``RecordObject``). The model of a kind's
``metrics`` is its mode's (suite/modes/<mode>/schema.py, ``Metrics``, which the modes' registry
hands in: ``suite.modes.record_model``; this module imports no mode), built from the metrics the
mode declares (``Mode.metrics``), typed by their unit (``metric_fields``); what a mode's model adds
is where they sit in a record (a train record's ``metrics`` holds them directly, a sweep's hold them
per point) and the fields that say what a point is (its length, implementation, status). Every
object allows more keys than it names, so a record written before a field was added, or with more
than the site reads, still validates; what an object names must have the named type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt, create_model

from suite.metrics import Metric

SCHEMA = 1
# not_applicable: the mode needs a capability the method lacks (a decode of a method without a
# recurrent form); the record's error says which, and it has no metrics.
STATUSES = ("ok", "diverged", "oom", "error", "skipped", "interrupted", "not_applicable")
POINT_STATUSES = ("ok", "oom", "error", "skipped")  # of one point of a sweep
# Every integer of a record fits a signed 64-bit integer (a size, a count, a seed): a bigger one is
# a forged or broken record, and would overflow the float that tables and charts turn it into.
INT_LIMIT = 2**63 - 1
Fraction = Annotated[float, Field(ge=0, le=1)]  # an accuracy, a share: a value above 1 is not one
Bytes = Annotated[int, Field(ge=0, le=INT_LIMIT)]
# A metric's JSON type, by its declared unit; every metric is optional (an older record, or a
# failed run, lacks it) and may be null (not measured). A length in tokens may be interpolated
# (a crossover), so it is a number, not an integer.
UNIT_TYPES: dict[str, Any] = {
    "fraction": Fraction, "tokens/s": NonNegativeFloat, "s": NonNegativeFloat, "bytes": Bytes,
    "count": Bytes, "ratio": float, "tokens": NonNegativeFloat, "flop/s": NonNegativeFloat,
}
# A commit as git names it: hex digits (abbreviated or whole, SHA-1 or SHA-256). The run page prints
# it into a shell command, so nothing else may stand there.
COMMIT = r"^[0-9a-f]{4,64}$"
# A class by its import path, ``my_pkg.attn:MyAttention``: the run page prints it into a command too.
IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


class RecordObject(BaseModel):
    """A JSON object of a record: named keys typed (strictly: no text for numbers, no true for 1,
    finite numbers only), other keys kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def described(metric: Metric) -> str:
    better = f"; {metric.better} is better" if metric.better else ""
    return f"{metric.label} ({metric.unit}{better})"


def metric_field(metric: Metric, types: dict[str, Any] = UNIT_TYPES) -> tuple:
    """One declared metric as an optional field typed by its unit."""
    return Optional[types[metric.unit]], Field(None, description=described(metric))


def metric_fields(metrics: tuple[Metric, ...], types: dict[str, Any] = UNIT_TYPES, skip: tuple[str, ...] = ()) -> dict:
    """Fields for a table of metrics a mode declares (but those in ``skip``), typed by unit."""
    return {m.name: metric_field(m, types) for m in metrics if m.name not in skip}


# -- the blocks every kind shares -------------------------------------------------------------------

class Distribution(RecordObject):
    """The installed package a method's code came from (attention-suite for the suite's own), and
    the commit of that code where it is known (suite.env.distribution_of); records written before
    the commit was recorded have name and version only."""

    name: Optional[str] = None
    version: Optional[str] = None
    url: Optional[str] = Field(None, description="the VCS URL pip installed it from")
    commit: Optional[str] = Field(None, pattern=COMMIT, description="the commit of the method's code (hex)")
    dirty: Optional[bool] = Field(None, description="the checkout it was imported from had uncommitted changes")
    source: Optional[Literal["index", "git", "local", "url"]] = Field(
        None, description="how it was installed: from a package index, a git URL at a commit, a folder or file on "
        "the machine that ran it (not reproducible elsewhere), or an archive's URL")


class Method(RecordObject):
    name: str
    import_path: Optional[str] = Field(None, pattern=IMPORT_PATH,
                                       description="the method's class as method= names it: module:Class")
    version: Optional[int] = Field(None, description="the method's code version (part of the config hash)")
    distribution: Optional[Distribution] = Field(None, description="the package that ships the method")
    impl: Optional[str] = None
    params: Optional[dict] = Field(None, description="the options as requested")
    resolved: Optional[dict] = Field(None, description="the options as used")
    time_in_length: Optional[str] = Field(None, description="the parallel form's time against N: N^2, N log N, N")
    capabilities: Optional[list[str]] = Field(None, description="what the method implements beyond the core: "
                                              "recurrent, flops, weights (methods/base.py)")


class Task(RecordObject):
    name: str
    seq_len: Optional[PositiveInt] = None
    num_kv_pairs: Optional[PositiveInt] = Field(None, description="recall tasks: key-value pairs per example")
    loader: Optional[str] = Field(None, pattern=IMPORT_PATH, description="a task from outside the suite: its load "
                                  "function as module:function")
    distribution: Optional[Distribution] = Field(None, description="a task from outside the suite: the package "
                                                 "that ships it")


class Group(RecordObject):
    """A config group (task, mode, ...): the name of its choice, and its options."""

    name: Optional[str] = None


class Budget(Group):
    lr: Optional[NonNegativeFloat] = None
    max_steps: Optional[NonNegativeInt] = None
    batch_size: Optional[PositiveInt] = None
    num_train: Optional[NonNegativeInt] = None
    num_val: Optional[NonNegativeInt] = None
    num_test: Optional[NonNegativeInt] = None
    target_val_accuracy: Optional[Fraction] = None


class ModelConfig(Group):
    d_model: Optional[PositiveInt] = None
    num_layers: Optional[PositiveInt] = None
    num_heads: Optional[PositiveInt] = None
    d_ff: Optional[PositiveInt] = None
    mixers: Optional[list[str]] = None
    position: Optional[str] = None
    mlp: Optional[bool] = None


class MethodConfig(Group):
    impl: Optional[str] = None
    options: Optional[dict] = None


class Protocol(Group):
    lrs: Optional[list[NonNegativeFloat]] = None
    seeds: Optional[list[int]] = None


class Config(RecordObject):
    """The whole resolved config; the groups the site reads are typed."""

    method: Optional[MethodConfig] = None
    task: Optional[Group] = None
    budget: Optional[Budget] = None
    model: Optional[ModelConfig] = None
    protocol: Optional[Protocol] = None
    mode: Optional[Group] = None
    seed: Optional[int] = None
    device: Optional[str] = None
    dtype: Optional[str] = None


class Hardware(RecordObject):
    """The machine a record was measured on (suite/env.py ``hardware``); records before it lack it."""

    device_model: Optional[str] = Field(None, description="the GPU's name, or the CPU's model")
    device_memory_bytes: Optional[NonNegativeInt] = Field(None, description="the GPU's memory, or the machine's")
    driver: Optional[str] = Field(None, description="the NVIDIA driver's version (null on a CPU)")
    cuda: Optional[str] = Field(None, description="the CUDA version torch was built with (null on a CPU build)")
    torch: Optional[str] = None
    triton: Optional[str] = Field(None, description="null: not installed")
    fla: Optional[str] = Field(None, description="flash-linear-attention's version; null: not installed")


class Env(RecordObject):
    device: Optional[str] = Field(None, description="cpu or cuda")
    device_name: Optional[str] = None
    torch: Optional[str] = None
    triton: Optional[str] = None
    python: Optional[str] = None
    cuda: Optional[str] = None
    git_commit: Optional[str] = Field(None, pattern=COMMIT, description="the commit the run ran at (hex)")
    git_dirty: Optional[bool] = None
    cpu: Optional[str] = None
    seed: Optional[int] = None
    suite_version: Optional[str] = Field(None, description="the attention-suite package's version")
    hardware: Optional[Hardware] = None


class Statistics(RecordObject):
    """A metric's statistics over queries (fidelity); the site plots the mean."""

    mean: Optional[float] = None
    median: Optional[float] = None
    p95: Optional[float] = None
    max: Optional[float] = None


@dataclass(frozen=True)
class SweepLayout:
    """How the points of a sweep record read: which field is swept, which fields set the shape
    (points that differ in one are on separate plots), and the spread measured around a metric."""

    x: str
    shape: tuple[str, ...]
    bands: dict[str, tuple[str, str]] = field(default_factory=dict)  # metric -> (low, high) fields


# -- the record -------------------------------------------------------------------------------------

class Record(BaseModel):
    """The fields every record has (DESIGN.md); ``metrics`` is typed per kind."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    schema_: Literal[SCHEMA] = Field(alias="schema", description="the record format's version")
    kind: str
    run_id: str
    created: str = Field(description="ISO 8601 UTC time the record was written")
    status: Literal[STATUSES]
    error: Optional[str]
    method: Method
    task: Task
    config: Config
    config_hash: str = Field(description="a stable hash of what defines the run")
    metrics: RecordObject
    env: Env


@cache
def record_model(kind: str, metrics: type[RecordObject]) -> type[Record]:
    """The model of a record of ``kind`` whose ``metrics`` is ``metrics`` (its mode's model:
    ``suite.modes.record_model`` composes the two)."""
    return create_model(f"{kind.capitalize()}Record", __base__=Record,
                        __doc__=f"A record of kind {kind} (mode={kind}).",
                        kind=(Literal[kind], ...), metrics=(metrics, ...))


def json_schema(kind: str, metrics: type[RecordObject]) -> dict:
    """The JSON Schema of a record of ``kind`` (its mode's ``metrics``), as published with the site."""
    schema = record_model(kind, metrics).model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"record-{kind}.json", **schema}


JSON_TYPES = {"string": str, "integer": int, "object": dict, "null": type(None)}


def top_level_types() -> dict[str, type | tuple[type, ...]]:
    """Each top-level field (by its name in JSON) and the Python type(s) of its JSON value, read
    from the published schema."""
    found: dict[str, type | tuple[type, ...]] = {}
    for name, prop in Record.model_json_schema()["properties"].items():
        types = tuple(dict if "$ref" in option else JSON_TYPES[option["type"]] for option in prop.get("anyOf", [prop]))
        found[name] = types[0] if len(types) == 1 else types
    return found
