"""mode=kernel: speed and memory of one method's attention op across sequence lengths, beside
PyTorch's SDPA softmax and flash-linear-attention's kernels, with FLOP rates against a matmul
measured in the same run, scaling slopes and crossover lengths.

The grid comes from conf/mode/kernel.yaml, chosen by the budget's name. Imports neither Hydra nor
wandb nor datasets, so that it runs on a GPU host with only torch (scripts/gpu_kernel_bench.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from suite.hardware import cpu_threads, high_water_mark_usable
from suite.job import JobResult, Outcome
from suite.modes.common import error_lines, heading, select_grid
from suite.modes.kernel import report
from suite.modes.kernel.sweep import run_sweep
from suite.modes.measure import load_average

TASK_NAME = "attention_op"


def device_properties(device: torch.device) -> dict | None:
    """What bounds a GPU kernel: memory, compute capability, multiprocessors (None on the CPU)."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    return {"name": props.name, "total_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count}


def record_task(config: Mapping) -> str:
    """The task a kernel record is filed under, ok or not applicable: the attention op alone."""
    return TASK_NAME


def job(config: Mapping, device: torch.device, config_hash: str) -> JobResult:
    """mode=kernel: sweep the grid, derive slopes and crossovers, return the points and summary."""
    grid = select_grid(config)
    load_before = load_average()
    with cpu_threads(grid["cpu_threads"], device):
        sweep = run_sweep(config, grid, device)
        used_threads = torch.get_num_threads()
    statuses = {p["status"] for p in sweep.points}
    if sweep.interrupted:
        status, error = "interrupted", f"interrupted after {len(sweep.points)} points"
    elif "ok" in statuses:
        status, error = "ok", None
    else:
        status = "oom" if "oom" in statuses else "error" if "error" in statuses else "skipped"
        error = next((p["reason"] for p in sweep.points if p["reason"]), "no point to measure")
    metrics = {
        "points": sweep.points,
        "summary": report.summarize(sweep.points),
        "matmul_reference": sweep.matmul,
        "timing": "cuda_events" if device.type == "cuda" else "perf_counter",
        "memory": "cuda_allocator" if device.type == "cuda" else (
            "process_rss_high_water_mark" if high_water_mark_usable() else "process_rss_sampled_1ms"),
        "flop_model": "each method's forward_flops/backward_flops: the matrix products its implementation runs",
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "cpu_threads": used_threads,
        "device_properties": device_properties(device),
    }
    task = {"name": record_task(config), "seq_len": max(grid["lengths"]), "lengths": grid["lengths"],
            "batch": grid["batch"],
            "heads": grid["heads"], "head_dims": grid["head_dims"], "value_dim": grid["value_dim"],
            "dtypes": grid["dtypes"], "causal": grid["causal"]}
    return JobResult(kind=config["mode"]["name"], outcome=Outcome(status=status, error=error, metrics=metrics),
                     task=task, resolved=sweep.resolved)


def summary(record: Mapping) -> str:
    """The closing table: per implementation series, time, memory, slope, crossover, matmul share."""
    m = record["metrics"]
    lines = heading(record, f"{record['method']['name']} attention op", device=record["env"]["device_name"])
    for dtype, rate in m["matmul_reference"].items():
        measured = ", ".join(f"{r / 1e9:,.1f}" for r in rate["measured_flops_per_s"])
        lines.append(f"matmul {rate['size']}^3 {dtype}: {rate['flops_per_s'] / 1e9:,.1f} GFLOP/s, the best of "
                     f"{measured} before and after the points (the base of 'of matmul')")
    lines.append(f"load average before/after: {m['load_average_before']} / {m['load_average_after']}")
    lines.append(report.table(m["summary"]))
    return "\n".join(lines + error_lines(record))
