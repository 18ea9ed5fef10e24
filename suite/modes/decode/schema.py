"""The metrics of a decode record: the method's points, the reference's beside them, and the
crossovers per batch size."""

from typing import Literal, Optional

from pydantic import Field, PositiveInt, create_model

from suite.modes.decode import CROSSOVER_METRICS, POINT_METRICS
from suite.schema import POINT_STATUSES, RecordObject, SweepLayout, described, metric_fields

IDENTITY = ("batch_size", "context_length")  # what a point is, so required (declared beside its metrics)
POINT_METRICS_BY_NAME = {m.name: m for m in POINT_METRICS}

DecodePoint = create_model(
    "DecodePoint", __base__=RecordObject, __doc__="One (batch size, context length) of a decode sweep.",
    **{name: (PositiveInt, Field(..., description=described(POINT_METRICS_BY_NAME[name]))) for name in IDENTITY},
    status=(Literal[POINT_STATUSES], "ok"), error=(Optional[str], None),
    **metric_fields(POINT_METRICS, skip=IDENTITY),
)

DecodeReference = create_model(
    "DecodeReference", __base__=RecordObject, __doc__="The reference method (softmax) swept beside the method.",
    method=(str, ...), impl=(Optional[str], None), points=(list[DecodePoint], []),
)

DecodeCrossover = create_model(
    "DecodeCrossover", __base__=RecordObject, batch_size=(PositiveInt, ...),
    **metric_fields(CROSSOVER_METRICS),
)

Metrics = create_model(
    "DecodeMetrics", __base__=RecordObject,
    impl=(Optional[str], None), cpu_threads=(Optional[PositiveInt], None),
    points=(list[DecodePoint], []), reference=(Optional[DecodeReference], None),
    crossovers=(list[DecodeCrossover], []),
)

SWEEP = SweepLayout("context_length", ("batch_size",))  # latency and state against context, per batch size
