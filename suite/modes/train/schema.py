"""The metrics of a train record: the train mode's declared ones, and how they were measured."""

from typing import Optional

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, conlist, create_model

from suite.modes.train import RECORD_METRICS
from suite.schema import RecordObject, metric_fields

LengthAccuracy = create_model(
    "LengthAccuracy", __base__=RecordObject,
    __doc__="Test accuracy at a length longer than training's (task.test_lengths), evaluation only.",
    seq_len=(PositiveInt, ...),
    num_kv_pairs=(Optional[PositiveInt], Field(None, description="the pairs to bind at that length (recall)")),
    accuracy=(float, Field(..., ge=0, le=1)),
    baseline_accuracy=(Optional[float], Field(None, ge=0, le=1)),
)

Metrics = create_model(
    "TrainMetrics", __base__=RecordObject,
    __doc__="A train run's metrics: the train mode's declared ones, and how they were measured.",
    **metric_fields(RECORD_METRICS),
    baseline_name=(Optional[str], Field(None, description="what baseline_accuracy is (chance, majority class)")),
    peak_memory_source=(Optional[str], Field(None, description=(
        "cuda_allocator (the CUDA allocator's peak), or on the CPU rss_high_water_mark_above_built_run: the "
        "peak resident set above the resident set once the model, optimizer and data were built "
        "(process_peak_rss in records before it: the whole process's peak)"))),
    steps=(Optional[NonNegativeInt], None),
    val_curve=(Optional[list[conlist(NonNegativeFloat, min_length=2, max_length=2)]], Field(
        None, description="[step, validation accuracy] at every evaluation, in order")),
    best_step=(Optional[NonNegativeInt], None),
    length_accuracy=(Optional[list[LengthAccuracy]], Field(
        None, description="test accuracy of the best weights at each longer test length, with its baseline")),
)
