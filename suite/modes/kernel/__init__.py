"""mode=kernel: speed and memory of the attention op alone across sequence lengths
(suite/modes/kernel/job.py)."""

from suite.metrics import metric_table
from suite.modes.declare import Mode, Section

PHASES = ("fwd", "fwdbwd")  # a point times the forward, then forward and backward
# One row per implementation series (report.py). Times and memory are at the series' longest
# measured length; slopes are of log time against log length; a crossover is the length from
# which the implementation is faster than PyTorch's SDPA softmax.
SERIES_METRICS = metric_table("""
    longest_length           | N            | tokens   | higher
    fwd_median_s             | fwd          | s        | lower
    fwdbwd_median_s          | fwd+bwd      | s        | lower
    fwdbwd_peak_memory_bytes | peak mem f+b | bytes    | lower
    slope_fwdbwd             | slope        | ratio    | lower
    slope_fwdbwd_2k_8k       | slope 2K-8K  | ratio    | lower
    crossover_fwd_length     | x-over fwd   | tokens   | lower
    crossover_fwdbwd_length  | x-over f+b   | tokens   | lower
    fwdbwd_flops_per_s       | f+b FLOP/s   | flop/s   | higher
    fwdbwd_matmul_fraction   | of matmul    | fraction | higher
""")

MODE = Mode(name="kernel", order=1, package=__name__, metrics={"series": SERIES_METRICS},
            section=Section("Kernel: time and memory against N", "sweep", "N (sequence length)"),
            needs=frozenset())  # timing needs no FLOP count: without one the rates are left empty
