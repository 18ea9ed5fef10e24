"""The metrics of a cost record: its points (the training step at the trained length, inference at
every length the run is tested at), and how and where they were measured."""

from typing import Literal, Optional

from pydantic import Field, NonNegativeFloat, PositiveInt, create_model

from suite.modes.cost import PHASES, POINT_METRICS
from suite.schema import POINT_STATUSES, RecordObject, SweepLayout, described, metric_fields

IDENTITY = ("length", "batch")  # with the phase, what a point is, so required
POINT_METRICS_BY_NAME = {m.name: m for m in POINT_METRICS}

CostPoint = create_model(
    "CostPoint", __base__=RecordObject,
    __doc__="One phase (the training step, or inference) at one length: its times and peak memory.",
    phase=(Literal[PHASES], Field(..., description="train_step (forward, backward, optimizer step) or inference "
                                                   "(forward only, no gradients, eval mode)")),
    task=(Optional[str], Field(None, description="the task whose examples were timed (the site draws tasks apart)")),
    **{name: (PositiveInt, Field(..., description=described(POINT_METRICS_BY_NAME[name]))) for name in IDENTITY},
    status=(Literal[POINT_STATUSES], "ok"), reason=(Optional[str], None),
    p10_s=(Optional[NonNegativeFloat], Field(None, description="10th percentile of the repeats' times")),
    p90_s=(Optional[NonNegativeFloat], Field(None, description="90th percentile of the repeats' times")),
    repeats=(Optional[PositiveInt], None),
    memory_source=(Optional[str], None),
    num_kv_pairs=(Optional[PositiveInt], Field(None, description="the pairs to bind at that length (recall)")),
    **metric_fields(POINT_METRICS, skip=IDENTITY),
)

Metrics = create_model(
    "CostMetrics", __base__=RecordObject,
    __doc__="A cost run's points and the conditions they were measured in (ratios to softmax are not "
            "stored: they come from the softmax record of the same host and commit).",
    points=(list[CostPoint], Field([], description="the training step, then inference at each length")),
    trained_length=(Optional[PositiveInt], Field(None, description="task.seq_len")),
    test_lengths=(Optional[list[PositiveInt]], Field(None, description="task.test_lengths, as the task built them")),
    train_batch=(Optional[PositiveInt], Field(None, description="budget.batch_size")),
    eval_batch=(Optional[PositiveInt], Field(None, description="the grid's eval_batch")),
    param_count=(Optional[PositiveInt], None),
    timing=(Optional[str], Field(None, description="perf_counter, or cuda_events")),
    memory=(Optional[str], Field(None, description="how peak memory was measured")),
    load_average_before=(Optional[list[NonNegativeFloat]], None),
    load_average_after=(Optional[list[NonNegativeFloat]], None),
    cpu_threads=(Optional[PositiveInt], None),
)

# Time and memory against length, per phase and batch (and task: records of several tasks differ).
SWEEP = SweepLayout("length", ("phase", "batch", "task"), {"median_s": ("p10_s", "p90_s")})
