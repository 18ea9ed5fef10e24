"""The metrics of a kernel record: every point of the sweep, and the summary of each
implementation series (report.py)."""

from typing import Literal, Optional

from pydantic import Field, NonNegativeFloat, PositiveInt, create_model

from suite.modes.kernel import MODE, PHASES, SERIES_METRICS
from suite.schema import POINT_STATUSES, UNIT_TYPES, RecordObject, SweepLayout, metric_field, metric_fields

# Per phase: the fields of its timing and memory, and their unit.
PHASE_FIELDS = {"median_s": "s", "p10_s": "s", "p90_s": "s", "repeats": "count", "peak_memory_bytes": "bytes",
                "flops": "flop/s", "flops_per_s": "flop/s", "matmul_fraction": "fraction"}
# A rate over one matmul timed in the same run, not a share of a whole: a kernel may pass it.
RATE_TYPES = {**UNIT_TYPES, "fraction": NonNegativeFloat}


def phase_fields() -> dict:
    """The timing fields of both phases; a name the kernel mode declares takes its declaration."""
    declared = {m.name: m for m in MODE.all_metrics()}
    fields = {}
    for phase in PHASES:
        for suffix, unit in PHASE_FIELDS.items():
            name = f"{phase}_{suffix}"
            own = metric_field(declared[name], RATE_TYPES) if name in declared else None
            fields[name] = own or (Optional[RATE_TYPES[unit]], None)
    return fields


KernelPoint = create_model(
    "KernelPoint", __base__=RecordObject, __doc__="One implementation at one length and shape: its times and memory.",
    impl=(str, ...),
    source=(Optional[str], Field(None, description="method (the method's own) or peer (e.g. sdpa, fla)")),
    length=(PositiveInt, Field(..., description="sequence length N")),
    batch=(Optional[PositiveInt], None), heads=(Optional[PositiveInt], None),
    head_dim=(Optional[PositiveInt], None), value_dim=(Optional[PositiveInt], None),
    query_key_dim=(Optional[PositiveInt], Field(None, description="width of q and k (the method's; head_dim "
                                                                  "unless it reads narrower ones)")),
    num_features=(Optional[PositiveInt], None), dtype=(Optional[str], None), causal=(Optional[bool], None),
    flop_model=(Optional[str], None),
    status=(Literal[POINT_STATUSES], "ok"), reason=(Optional[str], None),
    memory_source=(Optional[str], None),
    **phase_fields(),
)

KernelSeries = create_model(
    "KernelSeries", __base__=RecordObject, __doc__="One implementation series: the kernel mode's declared summary.",
    impl=(str, ...), **metric_fields(SERIES_METRICS, RATE_TYPES),
)

Metrics = create_model(
    "KernelMetrics", __base__=RecordObject,
    points=(list[KernelPoint], Field([], description="every (implementation, length, shape) measured")),
    summary=(list[KernelSeries], Field([], description="one row per implementation series")),
)

# Time against length per shape; the spread of a median time over its repeats: p10 to p90.
SWEEP = SweepLayout("length", ("causal", "dtype", "head_dim", "value_dim", "batch", "heads"),
                    {f"{phase}_median_s": (f"{phase}_p10_s", f"{phase}_p90_s") for phase in PHASES})
