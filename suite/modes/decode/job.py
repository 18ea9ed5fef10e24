"""mode=decode: each method's recurrent form as a decoder, against context length.

For every (batch size, context length) of the budget's grid: prefill a random prompt with the causal
parallel form (timed), build the decoding state the prompt leaves, then time decode steps: per-token
latency (median and p99 after warm-up), generated tokens/s, and the state's bytes. Softmax with its
KV cache is measured in the same run as the reference, and the record says from which context length
on the method is faster per token, and its state smaller. A point beyond memory is recorded as
``oom`` and the sweep goes on.

Imports nothing from hydra, wandb or datasets, so it runs from a plain dict on a bare GPU host.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

import methods
from methods.base import AttentionMethod
from suite.errors import ConfigError
from suite.hardware import DTYPES, cpu_threads, synchronize
from suite.job import JobResult, Outcome, is_out_of_memory
from suite.metrics import format_value
from suite.model import state_bytes
from suite.modes.common import error_lines, heading, select_grid, text_table
from suite.modes.decode import CROSSOVER_METRICS, POINT_METRICS
from suite.scaling import better_from


@dataclass(frozen=True)
class Grid:
    """What one decode run sweeps (conf/mode/decode.yaml, one grid per budget)."""

    context_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    warmup_steps: int  # untimed decode steps after prefill (the KV cache's first doubling falls here)
    timed_steps: int
    prefill_repeats: int  # timed prefills after one untimed one; the median is recorded
    dtype: str


def read_grid(config: Mapping) -> Grid:
    """The grid of ``config['budget']['name']`` (suite.config checks every grid)."""
    raw = select_grid(config)
    return Grid(tuple(sorted(set(raw["context_lengths"]))), tuple(sorted(set(raw["batch_sizes"]))),
                raw["warmup_steps"], raw["timed_steps"], raw["prefill_repeats"], raw["dtype"])


# -- the state a prompt leaves, built in parallel --------------------------------------------------
def prompt_state(module: AttentionMethod, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict:
    """The decoding state after the prompt q, k, v (B,H,N,.), built in parallel by the method: the
    state that N calls of ``module.step`` reach, up to float rounding (tests/test_decode.py checks it).
    A method without a recurrent form never gets here (the mode needs it: suite/run.py)."""
    return module.prefill_state(k, v)


# -- one point of the grid -------------------------------------------------------------------------
def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``fraction`` of values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on ``device`` (CUDA: the driver; CPU: MemAvailable), None if unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def measure_point(module: AttentionMethod, batch: int, context: int, heads: int, head_dim: int,
                  grid: Grid, device: torch.device, generator: torch.Generator) -> dict:
    """Prefill ``context`` random tokens, build the state, time the decode steps: one point's metrics."""
    dtype = DTYPES[grid.dtype]
    point = {"context_length": context, "batch_size": batch, "status": "ok", "error": None}
    # The prompt's q, k, v and the prefill output, before any method-specific workspace.
    qk_dim = module.query_key_dim  # q and k at the width the method reads, v at the head's
    needed = (2 * qk_dim + 2 * head_dim) * batch * heads * context * dtype.itemsize
    free = free_memory_bytes(device)
    if free is not None and needed > free:
        point.update(status="oom", error=f"the prompt alone needs {needed:,} bytes, {free:,} free")
        return point

    def random(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, device=device, dtype=dtype)

    try:
        q, k, v = (random(batch, heads, context, width) for width in (qk_dim, qk_dim, head_dim))
        prefill_times = []
        for _ in range(1 + grid.prefill_repeats):  # the first call compiles, allocates, warms caches
            synchronize(device)
            started = time.perf_counter()
            module(q, k, v, causal=True)
            synchronize(device)
            prefill_times.append(time.perf_counter() - started)
        prefill_s = statistics.median(prefill_times[1:])
        state = prompt_state(module, q, k, v)
        point.update(prefill_s=prefill_s, prefill_tokens_per_s=batch * context / prefill_s,
                     state_bytes=state_bytes(state))
        live = module.live_states(state)  # e.g. how many Fenwick levels hold a sum; None: no such parts
        if live is not None:
            point["live_states"] = live
        del q, k, v
        steps = grid.warmup_steps + grid.timed_steps
        tokens = zip(*(random(steps, batch, heads, width) for width in (qk_dim, qk_dim, head_dim)))
        step_times = []
        for i, (q_t, k_t, v_t) in enumerate(tokens):
            synchronize(device)
            started = time.perf_counter()
            _, state = module.step(q_t, k_t, v_t, state)
            synchronize(device)
            if i >= grid.warmup_steps:
                step_times.append(time.perf_counter() - started)
        point.update(decode_latency_median_s=statistics.median(step_times),
                     decode_latency_p99_s=percentile(step_times, 0.99),
                     decode_tokens_per_s=batch * len(step_times) / sum(step_times))
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        point.update(status="oom", error=str(exc).splitlines()[0])
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the next point starts from the same free memory
    return point


def point_line(label: str, point: Mapping) -> str:
    """One progress line for a finished point."""
    where = f"{label} batch {point['batch_size']} context {point['context_length']:,}"
    if point["status"] != "ok":
        return f"{where}: {point['status']} ({point['error']})"
    metrics = {m.name: m for m in POINT_METRICS}
    shown = ("decode_latency_median_s", "state_bytes", "prefill_s")
    return f"{where}: " + ", ".join(f"{metrics[n].label} {format_value(metrics[n], point[n])}" for n in shown)


def sweep(module: AttentionMethod, grid: Grid, heads: int, head_dim: int, device: torch.device,
          seed: int) -> tuple[list[dict], bool]:
    """Every point of ``grid`` for ``module`` (same seed, same prompts); (points, interrupted)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    points: list[dict] = []
    bar = tqdm(total=len(grid.batch_sizes) * len(grid.context_lengths), desc=f"decode {module.name}",
               unit="point", dynamic_ncols=True, mininterval=0.5)
    try:
        with torch.inference_mode():
            for batch in grid.batch_sizes:
                for context in grid.context_lengths:
                    points.append(measure_point(module, batch, context, heads, head_dim, grid, device, generator))
                    bar.update(1)
                    bar.write(point_line(module.name, points[-1]))
    except KeyboardInterrupt:
        return points, True
    finally:
        bar.close()
    return points, False


# -- against the reference ---------------------------------------------------------------------------
def beats(ours: Mapping, theirs: Mapping | None, key: str) -> bool:
    """Ours is lower on ``key``, or only the reference ran out of memory."""
    if ours["status"] != "ok" or theirs is None:
        return False
    return theirs["status"] == "oom" or ours[key] < theirs[key]


def beats_from(points: list[dict], reference: list[dict], batch: int, key: str) -> int | None:
    """The shortest context from which on (there and at every longer one measured) the method's
    ``key`` is below the reference's, at ``batch``; None when the longest context is not. A context
    of the grid, not one between two (suite.scaling.crossover's): the reference may have no value
    to interpolate from, having run out of memory."""
    ours = {p["context_length"]: p for p in points if p["batch_size"] == batch}
    theirs = {p["context_length"]: p for p in reference if p["batch_size"] == batch}
    contexts = sorted(ours)
    start = better_from([beats(ours[c], theirs.get(c), key) for c in contexts])
    return None if start is None else contexts[start]


def crossover_rows(points: list[dict], reference: list[dict]) -> list[dict]:
    """The record's crossovers: per batch size, from which context on the method is faster per
    token, and its state smaller."""
    return [
        {"batch_size": batch,
         "latency_crossover_context": beats_from(points, reference, batch, "decode_latency_median_s"),
         "memory_crossover_context": beats_from(points, reference, batch, "state_bytes")}
        for batch in sorted({p["batch_size"] for p in points})
    ]


# -- the job -------------------------------------------------------------------------------------------
def head_sizes(model: Mapping) -> tuple[int, int]:
    """(heads, head_dim) of the budget's model: the attention layer a decoder of that size runs."""
    return model["num_heads"], model["d_model"] // model["num_heads"]


def build(method: Mapping, head_dim: int, grid: Grid, device: torch.device) -> AttentionMethod:
    """The method in eval mode on ``device``; a clear error when the grid outgrows it."""
    module = methods.build(method["name"], head_dim=head_dim, impl=method["impl"], **method["options"])
    longest = max(grid.context_lengths) + grid.warmup_steps + grid.timed_steps
    limit = getattr(module, "max_length", None)
    if limit is not None and longest > limit:
        raise ConfigError(f"mode=decode reaches {longest:,} tokens but {method['name']} with these options "
                          f"takes at most {limit:,}; shorten the grid's context_lengths or raise its limit")
    return module.to(device).eval()


def record_task(config: Mapping) -> str:
    """The task a decode record is filed under, ok or not applicable: the mode's own (it times
    synthetic prompts, not the command's task)."""
    return "decode"


def job(config: Mapping, device: torch.device, config_hash: str) -> JobResult:
    """mode=decode: sweep the method, then the reference (softmax), and compare them."""
    grid = read_grid(config)
    heads, head_dim = head_sizes(config["model"])
    reference_name = config["mode"]["reference"]
    if reference_name is not None:
        methods.get(reference_name)  # unknown reference: fail before any work
    module = build(config["method"], head_dim, grid, device)

    with cpu_threads(config["mode"]["cpu_threads"], device) as threads:
        points, interrupted = sweep(module, grid, heads, head_dim, device, config["seed"])
        metrics: dict = {"impl": module.resolve_impl(device), "cpu_threads": threads, "points": points}
        if reference_name not in (None, module.name) and not interrupted:
            reference = build({"name": reference_name, "impl": "auto", "options": {}}, head_dim, grid, device)
            reference_points, interrupted = sweep(reference, grid, heads, head_dim, device, config["seed"])
            metrics["reference"] = {"method": reference_name, "impl": reference.resolve_impl(device),
                                    "points": reference_points}
            metrics["crossovers"] = crossover_rows(points, reference_points)

    outcome = Outcome(metrics=metrics)
    if interrupted:
        outcome.status, outcome.error = "interrupted", f"interrupted after {len(points)} points"
    elif all(p["status"] == "oom" for p in points):
        outcome.status, outcome.error = "oom", "every point ran out of memory"
    task = {"name": record_task(config), "seq_len": max(grid.context_lengths),
            "context_lengths": list(grid.context_lengths),
            "batch_sizes": list(grid.batch_sizes), "heads": heads, "head_dim": head_dim,
            "value_dim": head_dim, "dtype": grid.dtype, "warmup_steps": grid.warmup_steps,
            "timed_steps": grid.timed_steps}
    return JobResult(kind=config["mode"]["name"], outcome=outcome, task=task, resolved=module.resolved_options())


def summary(record: Mapping) -> str:
    """Per point: the method's prefill, per-token latency, tokens/s and state bytes beside the
    reference's latency and state; then the crossover context lengths."""
    m, task = record["metrics"], record["task"]
    lines = heading(record, f"decode {record['method']['name']}",
                    f"{m.get('impl')}; {task['heads']} heads of dim {task['head_dim']}, {task['dtype']}")
    reference = m.get("reference")
    columns = [metric for metric in POINT_METRICS if any(metric.name in p for p in m["points"])]
    compared = [metric for metric in POINT_METRICS if metric.name in ("decode_latency_median_s", "state_bytes")]
    header = [c.label for c in columns] + ([f"{reference['method']} {c.label}" for c in compared] if reference else [])
    theirs = {(p["batch_size"], p["context_length"]): p for p in (reference or {}).get("points", [])}
    rows = []
    for point in m["points"]:
        row = [format_value(c, point.get(c.name))
               if point["status"] == "ok" or c.name in ("context_length", "batch_size")
               else point["status"] for c in columns]
        if reference:
            other = theirs.get((point["batch_size"], point["context_length"]), {"status": "-"})
            row += [format_value(c, other.get(c.name)) if other["status"] == "ok" else other["status"]
                    for c in compared]
        rows.append(row)
    lines += text_table(header, rows, right=True)
    for entry in m.get("crossovers", []):
        lines.append(f"batch {entry['batch_size']} against {reference['method']}: " + "; ".join(
            f"{metric.label} {format_value(metric, entry[metric.name]) if entry[metric.name] else 'none in this grid'}"
            for metric in CROSSOVER_METRICS))
    return "\n".join(lines + error_lines(record))
