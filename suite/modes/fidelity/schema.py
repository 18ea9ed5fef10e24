"""The metrics of a fidelity record: one point per (input source, length, feature size) cell."""

from typing import Optional

from pydantic import Field, PositiveInt, create_model

from suite.modes.fidelity import POINT_METRICS
from suite.schema import UNIT_TYPES, RecordObject, Statistics, metric_fields

# Fidelity errors are statistics over queries; its counts and bytes are plain numbers.
FIDELITY_TYPES = {**UNIT_TYPES, "ratio": Statistics}

FidelityPoint = create_model(
    "FidelityPoint", __base__=RecordObject, __doc__="One (input source, length, feature size) cell of a fidelity grid.",
    method=(str, ...), source=(str, ...), source_kind=(Optional[str], None),
    seq_len=(PositiveInt, Field(..., description="sequence length N")),
    d_phi=(Optional[PositiveInt], Field(..., description="feature size of the map; null for exact softmax (no map)")),
    variant=(Optional[dict], None), draws=(Optional[PositiveInt], None),
    **metric_fields(POINT_METRICS, types=FIDELITY_TYPES),
)

Metrics = create_model(
    "FidelityMetrics", __base__=RecordObject,
    points=(list[FidelityPoint], []),
    causal=(Optional[bool], None), note=(Optional[str], None),
    plots=(list[str], Field([], description="image files the job saved beside the record")),
)
