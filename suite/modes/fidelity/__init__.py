"""mode=fidelity: how far a kernelized method is from exact softmax attention, the denominator
first (suite/modes/fidelity/job.py)."""

from suite.metrics import metric_table
from suite.modes.declare import Mode, Section

# Per (source, N, d_phi) point: errors against exact softmax attention (each a mean / median / p95 /
# max over queries; the denominator first, it rescales the whole output), then the cost of the
# linear form beside exact attention's at that N (feature_map_flops: in records from before the
# methods declared their FLOPs).
POINT_METRICS = metric_table("""
    denominator_rel_error               | denominator err          | ratio | lower
    numerator_rel_error                 | numerator err            | ratio | lower
    output_rel_error                    | output err               | ratio | lower
    attention_tv                        | attention TV             | ratio | lower
    output_rel_error_approx_numerator   | out err, approx num only | ratio | lower
    output_rel_error_approx_denominator | out err, approx den only | ratio | lower
    feature_map_flops                   | feature map FLOPs        | count | lower
    kernelized_flops                    | linear form FLOPs        | count | lower
    exact_attention_flops               | exact FLOPs              | count |
    kernelized_memory_bytes             | linear form memory       | bytes | lower
    exact_attention_memory_bytes        | exact memory             | bytes |
""")

MODE = Mode(name="fidelity", order=2, package=__name__, metrics={"points": POINT_METRICS},
            section=Section("Fidelity to softmax: denominator first", "fidelity"), needs=frozenset({"weights"}))
