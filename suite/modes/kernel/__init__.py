"""mode=kernel: speed and memory of the attention op alone across sequence lengths
(suite/modes/kernel/job.py)."""

from suite.metrics import Metric
from suite.modes import Mode, Section

# One row per implementation series (report.py). Times and memory are at the series' longest
# measured length; slopes are of log time against log length; a crossover is the length from
# which the implementation is faster than PyTorch's SDPA softmax.
SERIES_METRICS = (
    Metric("longest_length", "N", "tokens", "higher"),
    Metric("fwd_median_s", "fwd", "s", "lower"),
    Metric("fwdbwd_median_s", "fwd+bwd", "s", "lower"),
    Metric("fwdbwd_peak_memory_bytes", "peak mem f+b", "bytes", "lower"),
    Metric("slope_fwdbwd", "slope", "ratio", "lower"),
    Metric("slope_fwdbwd_2k_8k", "slope 2K-8K", "ratio", "lower"),
    Metric("crossover_fwd_length", "x-over fwd", "tokens", "lower"),
    Metric("crossover_fwdbwd_length", "x-over f+b", "tokens", "lower"),
    Metric("fwdbwd_flops_per_s", "f+b FLOP/s", "flop/s", "higher"),
    Metric("fwdbwd_matmul_fraction", "of matmul", "fraction", "higher"),
)

MODE = Mode(name="kernel", order=1, job="suite.modes.kernel.job", metrics={"series": SERIES_METRICS},
            section=Section("Kernel: time and memory against N", "sweep", "N (sequence length)"))
