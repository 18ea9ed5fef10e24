"""mode=fidelity: how far a kernelized method is from exact softmax attention, the denominator
first (suite/modes/fidelity/job.py)."""

from suite.metrics import Metric
from suite.modes import Mode, Section

# Per (source, N, d_phi) point: errors against exact softmax attention (each a mean / median / p95 /
# max over queries; the denominator first, it rescales the whole output), then the cost of the
# linear form beside exact attention's at that N.
POINT_METRICS = (
    Metric("denominator_rel_error", "denominator err", "ratio", "lower"),
    Metric("numerator_rel_error", "numerator err", "ratio", "lower"),
    Metric("output_rel_error", "output err", "ratio", "lower"),
    Metric("attention_tv", "attention TV", "ratio", "lower"),
    Metric("output_rel_error_approx_numerator", "out err, approx num only", "ratio", "lower"),
    Metric("output_rel_error_approx_denominator", "out err, approx den only", "ratio", "lower"),
    Metric("feature_map_flops", "feature map FLOPs", "count", "lower"),  # in records before methods declared FLOPs
    Metric("kernelized_flops", "linear form FLOPs", "count", "lower"),
    Metric("exact_attention_flops", "exact FLOPs", "count", None),
    Metric("kernelized_memory_bytes", "linear form memory", "bytes", "lower"),
    Metric("exact_attention_memory_bytes", "exact memory", "bytes", None),
)

MODE = Mode(name="fidelity", order=2, job="suite.modes.fidelity.job", metrics={"points": POINT_METRICS},
            section=Section("Fidelity to softmax: denominator first", "fidelity"))
