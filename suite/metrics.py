"""Metrics declared once: name, label, unit and which direction is better.

The summary table, the record and the site all read these declarations, so a metric is named and
formatted the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str  # the key in a record's ``metrics``
    label: str  # column header
    unit: Literal["fraction", "tokens/s", "s", "bytes", "count", "ratio", "tokens", "flop/s"]
    better: Literal["higher", "lower"] | None


TRAIN_METRICS = (
    Metric("test_accuracy", "test acc", "fraction", "higher"),
    Metric("baseline_accuracy", "baseline acc", "fraction", None),
    Metric("val_accuracy", "best val acc", "fraction", "higher"),
    Metric("train_tokens_per_s", "train tok/s", "tokens/s", "higher"),
    Metric("median_step_time_s", "median step", "s", "lower"),
    Metric("peak_memory_bytes", "peak memory", "bytes", "lower"),
    Metric("param_count", "params", "count", None),
    Metric("wall_time_s", "wall time", "s", "lower"),
)

# mode=kernel: one row per implementation series (suite/kernel/report.py). Times and memory are at
# the series' longest measured length; slopes are of log time against log length; a crossover is
# the length from which the implementation is faster than PyTorch's SDPA softmax.
KERNEL_METRICS = (
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

# mode=decode, per (batch size, context length) point of the sweep.
DECODE_METRICS = (
    Metric("batch_size", "batch", "count", None),
    Metric("context_length", "context", "count", None),
    Metric("prefill_s", "prefill", "s", "lower"),
    Metric("prefill_tokens_per_s", "prefill tok/s", "tokens/s", "higher"),
    Metric("decode_latency_median_s", "median/token", "s", "lower"),
    Metric("decode_latency_p99_s", "p99/token", "s", "lower"),
    Metric("decode_tokens_per_s", "decode tok/s", "tokens/s", "higher"),
    Metric("state_bytes", "state", "bytes", "lower"),
    Metric("live_states", "live states", "count", None),
)

# mode=decode, per batch size: the shortest context from which on the method beats the reference.
DECODE_CROSSOVER_METRICS = (
    Metric("latency_crossover_context", "faster per token from context", "count", "lower"),
    Metric("memory_crossover_context", "smaller state from context", "count", "lower"),
)

# mode=fidelity, per (source, N, d_phi) point: errors against exact softmax attention (each a
# mean / median / p95 / max over queries; the denominator first, it rescales the whole output),
# then the cost of the linear form beside exact attention's at that N.
FIDELITY_METRICS = (
    Metric("denominator_rel_error", "denominator err", "ratio", "lower"),
    Metric("numerator_rel_error", "numerator err", "ratio", "lower"),
    Metric("output_rel_error", "output err", "ratio", "lower"),
    Metric("attention_tv", "attention TV", "ratio", "lower"),
    Metric("output_rel_error_approx_numerator", "out err, approx num only", "ratio", "lower"),
    Metric("output_rel_error_approx_denominator", "out err, approx den only", "ratio", "lower"),
    Metric("feature_map_flops", "feature map FLOPs", "count", "lower"),
    Metric("kernelized_flops", "linear form FLOPs", "count", "lower"),
    Metric("exact_attention_flops", "exact FLOPs", "count", None),
    Metric("kernelized_memory_bytes", "linear form memory", "bytes", "lower"),
    Metric("exact_attention_memory_bytes", "exact memory", "bytes", None),
)

BY_NAME = {m.name: m for m in (*TRAIN_METRICS, *DECODE_METRICS, *DECODE_CROSSOVER_METRICS)}


def format_bytes(value: float) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_seconds(value: float) -> str:
    """Seconds as ms below one second (to 0.01 ms below 10 ms), else s."""
    if value < 0.01:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def format_value(metric: Metric, value: float | int | None) -> str:
    """Humanise a raw value (stored in bytes, seconds, fractions) for display."""
    if value is None:
        return "-"
    if metric.unit == "fraction":
        return f"{100 * value:.1f}%"
    if metric.unit == "bytes":
        return format_bytes(value)
    if metric.unit == "s":
        if value < 1e-3:  # decode steps take microseconds
            return f"{value * 1e6:.0f} us"
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.1f} s"
    if metric.unit == "tokens":
        return f"{value:,.0f}"
    if metric.unit == "flop/s":
        return f"{value / 1e9:,.1f} G"
    if metric.unit == "tokens/s":
        return f"{value:,.0f}"
    if metric.unit == "count":
        return f"{value:,}"
    return f"{value:.3g}"
