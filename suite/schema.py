"""The schema of a result record: one pydantic model per record kind (DESIGN.md, "The record"),
used by the writer and the reader (suite/records.py) and by the site, and published with the site
as JSON Schema so that others can check a record before submitting it.

The metrics of each kind are the ones its mode declares (suite/modes/<mode>/__init__.py,
``Mode.metrics``), typed by their unit; what the schema adds is where they sit in a record (a
train record's ``metrics`` holds them directly, a sweep's hold them per point) and the fields that
say what a point is (its length, implementation, status). Every block allows more keys than it
names, so a record written before a field was added, or with more than the site reads, still
validates; what a block names must have the named type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt, conlist, create_model

from suite import modes
from suite.metrics import Metric

SCHEMA = 1
STATUSES = ("ok", "diverged", "oom", "error", "skipped", "interrupted")
POINT_STATUSES = ("ok", "oom", "error", "skipped")  # of one point of a sweep
# A metric's JSON type, by its declared unit; every metric is optional (an older record, or a
# failed run, lacks it) and may be null (not measured). A length in tokens may be interpolated
# (a crossover), so it is a number, not an integer.
UNIT_TYPES: dict[str, Any] = {
    "fraction": NonNegativeFloat, "tokens/s": NonNegativeFloat, "s": NonNegativeFloat, "bytes": NonNegativeInt,
    "count": NonNegativeInt, "ratio": float, "tokens": NonNegativeFloat, "flop/s": NonNegativeFloat,
}


class Block(BaseModel):
    """A JSON object of a record: named keys typed (strictly: no text for numbers, no true for 1,
    finite numbers only), other keys kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def described(metric: Metric) -> str:
    better = f"; {metric.better} is better" if metric.better else ""
    return f"{metric.label} ({metric.unit}{better})"


def metric_fields(kind: str, table: str, types: dict[str, Any] = UNIT_TYPES, skip: tuple[str, ...] = ()) -> dict:
    """Fields for the metrics mode ``kind`` declares in its table ``table``, typed by unit."""
    return {m.name: (Optional[types[m.unit]], Field(None, description=described(m)))
            for m in modes.get(kind).metrics[table] if m.name not in skip}


def declaration(kind: str, name: str) -> Metric:
    return next(m for m in modes.get(kind).all_metrics() if m.name == name)


def declared_field(kind: str, name: str) -> tuple:
    """One declared metric of ``kind`` as a field (a sweep point carries some of its series' metrics)."""
    metric = declaration(kind, name)
    return Optional[UNIT_TYPES[metric.unit]], Field(None, description=described(metric))


# -- the blocks every kind shares -------------------------------------------------------------------

class Method(Block):
    name: str
    impl: Optional[str] = None
    params: Optional[dict] = Field(None, description="the options as requested")
    resolved: Optional[dict] = Field(None, description="the options as used")
    time_in_length: Optional[str] = Field(None, description="the parallel form's time against N: N^2, N log N, N")


class Task(Block):
    name: str
    seq_len: Optional[PositiveInt] = None
    num_kv_pairs: Optional[PositiveInt] = Field(None, description="recall tasks: key-value pairs per example")


class Group(Block):
    """A config group (task, mode, ...): the name of its choice, and its options."""

    name: Optional[str] = None


class Budget(Group):
    lr: Optional[NonNegativeFloat] = None
    max_steps: Optional[NonNegativeInt] = None
    batch_size: Optional[PositiveInt] = None
    num_train: Optional[NonNegativeInt] = None
    num_val: Optional[NonNegativeInt] = None
    num_test: Optional[NonNegativeInt] = None
    target_val_accuracy: Optional[NonNegativeFloat] = None


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


class Config(Block):
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


class Env(Block):
    device: Optional[str] = Field(None, description="cpu or cuda")
    device_name: Optional[str] = None
    torch: Optional[str] = None
    triton: Optional[str] = None
    python: Optional[str] = None
    cuda: Optional[str] = None
    git_commit: Optional[str] = None
    git_dirty: Optional[bool] = None
    cpu: Optional[str] = None
    seed: Optional[int] = None


class Statistics(Block):
    """A metric's statistics over queries (fidelity); the site plots the mean."""

    mean: Optional[float] = None
    median: Optional[float] = None
    p95: Optional[float] = None
    max: Optional[float] = None


# -- the metrics of each kind -----------------------------------------------------------------------

TrainMetrics = create_model(
    "TrainMetrics", __base__=Block,
    __doc__="A train run's metrics: the train mode's declared ones, and how they were measured.",
    **metric_fields("train", "record"),
    baseline_name=(Optional[str], Field(None, description="what baseline_accuracy is (chance, majority class)")),
    peak_memory_source=(Optional[str], Field(None, description=(
        "cuda_allocator (the CUDA allocator's peak), or on the CPU rss_high_water_mark_above_built_run: the "
        "peak resident set above the resident set once the model, optimizer and data were built "
        "(process_peak_rss in records before it: the whole process's peak)"))),
    steps=(Optional[NonNegativeInt], None),
    val_curve=(Optional[list[conlist(NonNegativeFloat, min_length=2, max_length=2)]], Field(
        None, description="[step, validation accuracy] at every evaluation, in order")),
    best_step=(Optional[NonNegativeInt], None),
)

PHASES = ("fwd", "fwdbwd")  # a kernel point times the forward, then forward and backward
# Per phase: the fields of its timing and memory, and their unit.
PHASE_FIELDS = {"median_s": "s", "p10_s": "s", "p90_s": "s", "repeats": "count", "peak_memory_bytes": "bytes",
                "flops": "flop/s", "flops_per_s": "flop/s", "matmul_fraction": "fraction"}


def phase_fields() -> dict:
    """The timing fields of both phases; a name the kernel mode declares takes its declaration."""
    declared = {m.name for m in modes.get("kernel").all_metrics()}
    fields = {}
    for phase in PHASES:
        for suffix, unit in PHASE_FIELDS.items():
            name = f"{phase}_{suffix}"
            fields[name] = declared_field("kernel", name) if name in declared else (Optional[UNIT_TYPES[unit]], None)
    return fields


KernelPoint = create_model(
    "KernelPoint", __base__=Block, __doc__="One implementation at one length and shape: its times and memory.",
    impl=(str, ...),
    source=(Optional[str], Field(None, description="method (the method's own) or peer (e.g. sdpa, fla)")),
    length=(PositiveInt, Field(..., description="sequence length N")),
    batch=(Optional[PositiveInt], None), heads=(Optional[PositiveInt], None),
    head_dim=(Optional[PositiveInt], None), value_dim=(Optional[PositiveInt], None),
    num_features=(Optional[PositiveInt], None), dtype=(Optional[str], None), causal=(Optional[bool], None),
    flop_model=(Optional[str], None),
    status=(Literal[POINT_STATUSES], "ok"), reason=(Optional[str], None),
    memory_source=(Optional[str], None),
    **phase_fields(),
)

KernelSeries = create_model(
    "KernelSeries", __base__=Block, __doc__="One implementation series: the kernel mode's declared summary.",
    impl=(str, ...), **metric_fields("kernel", "series"),
)

KernelMetrics = create_model(
    "KernelMetrics", __base__=Block,
    points=(list[KernelPoint], Field([], description="every (implementation, length, shape) measured")),
    summary=(list[KernelSeries], Field([], description="one row per implementation series")),
)

DecodePoint = create_model(
    "DecodePoint", __base__=Block, __doc__="One (batch size, context length) of a decode sweep.",
    # What a point is, so required (the mode declares them beside its metrics).
    batch_size=(PositiveInt, Field(..., description=described(declaration("decode", "batch_size")))),
    context_length=(PositiveInt, Field(..., description=described(declaration("decode", "context_length")))),
    status=(Literal[POINT_STATUSES], "ok"), error=(Optional[str], None),
    **metric_fields("decode", "points", skip=("batch_size", "context_length")),
)

DecodeReference = create_model(
    "DecodeReference", __base__=Block, __doc__="The reference method (softmax) swept beside the method.",
    method=(str, ...), impl=(Optional[str], None), points=(list[DecodePoint], []),
)

DecodeCrossover = create_model(
    "DecodeCrossover", __base__=Block, batch_size=(PositiveInt, ...),
    **metric_fields("decode", "crossovers"),
)

DecodeMetrics = create_model(
    "DecodeMetrics", __base__=Block,
    impl=(Optional[str], None), cpu_threads=(Optional[PositiveInt], None),
    points=(list[DecodePoint], []), reference=(Optional[DecodeReference], None),
    crossovers=(list[DecodeCrossover], []),
)

# Fidelity errors are statistics over queries; its counts and bytes are plain numbers.
FIDELITY_TYPES = {**UNIT_TYPES, "ratio": Statistics}

FidelityPoint = create_model(
    "FidelityPoint", __base__=Block, __doc__="One (input source, length, feature size) cell of a fidelity grid.",
    method=(str, ...), source=(str, ...), source_kind=(Optional[str], None),
    seq_len=(PositiveInt, Field(..., description="sequence length N")),
    d_phi=(PositiveInt, Field(..., description="feature size of the map")),
    variant=(Optional[dict], None), draws=(Optional[PositiveInt], None),
    **metric_fields("fidelity", "points", types=FIDELITY_TYPES),
)

FidelityMetrics = create_model(
    "FidelityMetrics", __base__=Block,
    points=(list[FidelityPoint], []),
    causal=(Optional[bool], None), note=(Optional[str], None),
    plots=(list[str], Field([], description="image files the job saved beside the record")),
)



@dataclass(frozen=True)
class SweepLayout:
    """How the points of a sweep record read: which field is swept, which fields set the shape
    (points that differ in one are on separate plots), and the spread measured around a metric."""

    x: str
    shape: tuple[str, ...]
    bands: dict[str, tuple[str, str]] = field(default_factory=dict)  # metric -> (low, high) fields


SWEEPS = {
    # The spread of a median time over its repeats: p10 to p90.
    "kernel": SweepLayout("length", ("causal", "dtype", "head_dim", "value_dim", "batch", "heads"),
                          {f"{phase}_median_s": (f"{phase}_p10_s", f"{phase}_p90_s") for phase in PHASES}),
    "decode": SweepLayout("context_length", ("batch_size",)),
}

METRICS: dict[str, type[Block]] = {"train": TrainMetrics, "kernel": KernelMetrics, "decode": DecodeMetrics,
                                   "fidelity": FidelityMetrics}


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
    metrics: Block
    env: Env


@cache
def record_model(kind: str) -> type[Record]:
    """The model of a record of ``kind``; KeyError for a kind no mode declares."""
    if kind not in modes.registry():
        raise KeyError(kind)
    if kind not in METRICS:
        raise TypeError(f"mode {kind!r} has no record schema; add its metrics model to suite/schema.py METRICS")
    return create_model(f"{kind.capitalize()}Record", __base__=Record,
                        __doc__=f"A record of kind {kind} (mode={kind}).",
                        kind=(Literal[kind], ...), metrics=(METRICS[kind], ...))


def json_schema(kind: str) -> dict:
    """The JSON Schema of a record of ``kind``, as published with the site."""
    schema = record_model(kind).model_json_schema()
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
