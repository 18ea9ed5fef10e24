"""Timing and peak memory of one call, done the same way for every implementation and by every mode
that times calls (kernel: the attention op; cost: a model's training step and inference).

Time: warm-up calls first (lazy initialisation, Triton compilation, caches), then repeated calls,
each timed alone: CUDA events on a GPU with the L2 cache flushed before each call (as
``triton.testing.do_bench``), ``time.perf_counter`` on the CPU. A point reports the
median and the 10th/90th percentiles.

Peak memory, measured in one extra untimed call, as the growth above what was live before it
(inputs excluded): on a GPU the CUDA allocator's peak (``reset_peak_memory_stats`` first). On a
Linux CPU the process's peak resident set: freed heap pages are first handed back to the system
(glibc ``malloc_trim``), so what the call touches is counted, then the kernel's high-water mark is
reset (``/proc/self/clear_refs`` with 5) and read back after the call (``VmHWM``), minus the resident
set before. Elsewhere a background thread samples the resident set every millisecond, which can
miss peaks shorter than that.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Mapping

import torch

from suite.hardware import ResidentGrowth
from suite.job import is_out_of_memory

SAMPLE_INTERVAL_S = 1e-3
MIN_REPEATS = 3  # fewest timed calls that give a median and a spread


# Bytes written before each timed call on a GPU so that the call finds nothing of its inputs in L2
# (an H100's or H200's L2 is 50-60 MB), as triton.testing.do_bench does with its 256 MB buffer.
L2_FLUSH_BYTES = 256 * 2**20


def time_calls(fn: Callable[[], object], device: torch.device, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``, each timed alone. On a GPU: CUDA events
    around the call only, the L2 cache flushed before it (triton.testing.do_bench's method: a
    kernel that reruns on inputs still in L2 looks faster than it is in a model)."""
    times = []
    if device.type == "cuda":
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return times
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def spread(times: list[float]) -> dict:
    """Median and 10th/90th percentiles (seconds) of the repeats, and how many there were."""
    ordered = sorted(times)
    if len(ordered) == 1:
        p10 = p90 = ordered[0]
    else:
        deciles = statistics.quantiles(ordered, n=10, method="inclusive")
        p10, p90 = deciles[0], deciles[-1]
    return {"median_s": statistics.median(ordered), "p10_s": p10, "p90_s": p90, "repeats": len(ordered)}


def measure_phase(fn: Callable[[], object], device: torch.device, grid: Mapping) -> dict:
    """Warm up, measure the peak memory of one call, then time the repeats. A slow call (over
    ``point_budget_s``) gets one warm-up call only and fewer repeats, never under MIN_REPEATS."""
    for _ in range(grid["warmup"]):
        last = time_calls(fn, device, 1)[0]
        if last > grid["point_budget_s"]:  # a slow call is warm after one run; spare the rest
            break
    memory, memory_source = call_peak_memory(fn, device)
    affordable = int(grid["point_budget_s"] / max(last, 1e-9))
    repeats = min(grid["repeats"], max(MIN_REPEATS, affordable))
    timing = spread(time_calls(fn, device, repeats))
    return {**timing, "peak_memory_bytes": memory, "memory_source": memory_source}


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: how busy the machine was (None where unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- CPU memory -------------------------------------------------------------------------------------
def cpu_peak_memory(fn: Callable[[], object]) -> tuple[int, str]:
    """Peak resident memory growth (bytes) during one call of ``fn``, and how it was measured."""
    growth = ResidentGrowth(sample_interval=SAMPLE_INTERVAL_S)
    try:
        fn()
    finally:
        peak = growth.stop()
    return peak, f"process_{growth.source}"


def call_peak_memory(fn: Callable[[], object], device: torch.device) -> tuple[int, str]:
    """Peak memory growth (bytes) of one call of ``fn`` above what was live before, and its source."""
    if device.type != "cuda":
        return cpu_peak_memory(fn)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before, "cuda_allocator"


def matmul_rate(size: int, dtype: torch.dtype, device: torch.device, repeats: int = 5) -> dict:
    """FLOP/s of a square (size x size) matmul in ``dtype``: the machine's practical limit here."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    run = lambda: torch.matmul(a, b)  # noqa: E731
    time_calls(run, device, 2)
    timing = spread(time_calls(run, device, repeats))
    return {"size": size, "dtype": str(dtype).removeprefix("torch."), **timing,
            "flops_per_s": 2.0 * size**3 / timing["median_s"]}


def failure(exc: BaseException) -> dict:
    """The status and reason of a point that a failure ended: oom (the error's first line) or error
    (its type and first line); one point's failure must not end the run."""
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    status = "oom" if is_out_of_memory(exc) else "error"
    return {"status": status, "reason": first_line if status == "oom" else f"{type(exc).__name__}: {first_line}"}


def release(device: torch.device) -> None:
    """Free what a failed call left. Called outside the except block, so that its traceback no
    longer holds the failed call's tensors."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
