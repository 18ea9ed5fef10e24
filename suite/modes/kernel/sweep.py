"""The sweep: every (head dim, dtype, causal, implementation, length) point of a grid, measured.

A point that cannot run is recorded, never fatal: ``skipped`` with the reason (implementation
absent, dtype missing on the device, length over the grid's cap for that implementation, or past
a length where it ran out of memory or over the time limit), ``oom`` when it runs out of memory,
``error`` with the message for anything else. The forward pass is timed as in training (inputs
require gradients); forward+backward adds ``torch.autograd.grad`` of a fixed output gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

import methods
from methods.base import MethodError
from suite.hardware import DTYPES
from suite.metrics import format_bytes, format_seconds
from suite.modes import measure
from suite.modes.kernel import PHASES
from suite.modes.kernel.implementations import (
    SDPA,
    Implementation,
    method_implementations,
    peer_implementations,
    sdpa_backend,
)


@dataclass
class Sweep:
    """The measured points and the matmul rate per dtype they are compared with."""

    points: list[dict] = field(default_factory=list)
    matmul: dict[str, dict] = field(default_factory=dict)
    interrupted: bool = False
    resolved: dict[str, dict] = field(default_factory=dict)  # the method's resolved options per head dim


def dtype_unsupported(dtype: torch.dtype, device: torch.device) -> str | None:
    """Why ``dtype`` cannot be used on ``device`` (a matmul in it fails), or None."""
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(device)} has no bfloat16"
    try:
        a = torch.ones(8, 8, device=device, dtype=dtype)
        (a @ a).sum().item()
    except (RuntimeError, TypeError) as exc:
        return f"{dtype} is not supported on {device.type}: {str(exc).splitlines()[0]}"
    return None


def make_inputs(batch: int, heads: int, n: int, query_key_dim: int, value_dim: int, dtype: torch.dtype,
                device: torch.device, seed: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (leaves requiring grad) and the output gradient, seeded per length."""
    generator = torch.Generator(device=device).manual_seed(seed + n)
    shapes = ((batch, heads, n, query_key_dim),) * 2 + ((batch, heads, n, value_dim),) * 2
    q, k, v, grad_out = (torch.randn(s, generator=generator, device=device, dtype=dtype) for s in shapes)
    for t in (q, k, v):
        t.requires_grad_(True)
    return q, k, v, grad_out


def measure_point(impl: Implementation, inputs: tuple[torch.Tensor, ...], causal: bool,
                  device: torch.device, grid: Mapping) -> dict:
    """Forward, then forward+backward, timings and memory of one implementation on one input."""
    q, k, v, grad_out = inputs
    forward = lambda: impl.run(q, k, v, causal)  # noqa: E731

    def forward_backward():
        out = impl.run(q, k, v, causal)
        torch.autograd.grad(out, (q, k, v), grad_out, allow_unused=True)

    found = {}
    for phase, fn in zip(PHASES, (forward, forward_backward)):
        result = measure.measure_phase(fn, device, grid)
        found.update({f"{phase}_{key}": value for key, value in result.items() if key != "memory_source"})
        found["memory_source"] = result["memory_source"]
    if impl.name == SDPA:
        found["sdpa_backend"] = sdpa_backend(q, k, v, causal)
    return found


def derived_rates(point: dict, matmul_flops_per_s: float) -> dict:
    """The achieved FLOP/s of an ok point and their fraction of the matmul rate (none without FLOPs)."""
    found = {}
    if point["fwd_flops"] is None:
        return found
    for phase in PHASES:
        rate = point[f"{phase}_flops"] / point[f"{phase}_median_s"]
        found[f"{phase}_flops_per_s"] = rate
        found[f"{phase}_matmul_fraction"] = rate / matmul_flops_per_s
    return found


def describe(point: dict) -> str:
    """One progress line for a finished point."""
    head = (f"{point['impl']:<26} {point['dtype']:<8} D={point['head_dim']:<3} "
            f"{'causal' if point['causal'] else 'full  '} N={point['length']:>6}: ")
    if point["status"] != "ok":
        return head + f"{point['status']} ({point['reason']})"
    return head + (f"fwd {format_seconds(point['fwd_median_s'])}, fwd+bwd {format_seconds(point['fwdbwd_median_s'])}, "
                   f"peak {format_bytes(point['fwdbwd_peak_memory_bytes'])}")


def run_sweep(config: Mapping, grid: Mapping, device: torch.device, log: Callable[[str], None] = print) -> Sweep:
    """Measure every point of ``grid`` for ``config['method']`` on ``device``, then each point's
    FLOP rate against the best of the matmul rates measured before and after the points (other
    load on the machine lowers a single measurement)."""
    method = config["method"]
    sweep = Sweep()
    dtype_reasons = {name: dtype_unsupported(DTYPES[name], device) for name in grid["dtypes"]}
    rates: dict[str, list[dict]] = {name: [] for name, reason in dtype_reasons.items() if reason is None}

    def measure_matmul(when: str) -> None:
        for name, found in rates.items():
            found.append(measure.matmul_rate(grid["matmul_size"], DTYPES[name], device))
            log(f"matmul {grid['matmul_size']}^3 in {name} ({when}): {found[-1]['flops_per_s'] / 1e9:.1f} GFLOP/s")

    try:
        measure_matmul("before the points")
        for dtype_name in grid["dtypes"]:
            for head_dim in grid["head_dims"]:
                torch.manual_seed(config["seed"])
                module = methods.build(method["name"], head_dim=head_dim, impl="auto", **method["options"])
                module = module.to(device).eval()
                sweep.resolved[f"head_dim={head_dim}"] = module.resolved_options()
                candidates = (method_implementations(module, grid["impls"], device)
                              + peer_implementations(module, grid["peers"], device))
                for causal in grid["causal"]:
                    shape = {"batch": grid["batch"], "heads": grid["heads"], "head_dim": head_dim,
                             "query_key_dim": module.query_key_dim, "value_dim": grid["value_dim"] or head_dim,
                             "dtype": dtype_name, "causal": causal,
                             "num_features": module.resolved_options().get("num_features")}
                    for impl in candidates:
                        sweep.points.extend(measure_series(impl, shape, grid, device, config["seed"],
                                                           dtype_reasons[dtype_name], log))
        measure_matmul("after the points")
    except KeyboardInterrupt:
        sweep.interrupted = True
    for name, found in rates.items():
        if found:
            best = max(found, key=lambda r: r["flops_per_s"])
            sweep.matmul[name] = {**best, "measured_flops_per_s": [r["flops_per_s"] for r in found]}
    for point in sweep.points:
        if point["status"] == "ok" and point["dtype"] in sweep.matmul:
            point.update(derived_rates(point, sweep.matmul[point["dtype"]]["flops_per_s"]))
    return sweep


def measure_series(impl: Implementation, shape: Mapping, grid: Mapping, device: torch.device,
                   seed: int, dtype_reason: str | None, log: Callable[[str], None] = print) -> list[dict]:
    """One implementation over the grid's lengths; after an OOM or a call over the time limit,
    the longer lengths are skipped with that reason."""
    points, stop_reason = [], None
    cap = grid["max_length"].get(impl.name)
    for n in grid["lengths"]:
        fwd, bwd = impl.flops(shape["batch"], shape["heads"], n, shape["value_dim"], shape["causal"])
        point = {"impl": impl.name, "source": impl.source, "length": n, **shape, "status": "ok", "reason": None,
                 "fwd_flops": fwd, "fwdbwd_flops": None if fwd is None else fwd + bwd}
        reason = impl.unusable(shape["causal"]) or dtype_reason or stop_reason
        if reason is None and cap is not None and n > cap:
            reason = f"over max_length {cap} for {impl.name} in this grid (memory or time grows as N^2)"
        if reason:
            point.update(status="skipped", reason=reason)
        else:
            point.update(run_point(impl, shape, n, device, grid, seed))
        points.append(point)
        log(describe(point))
        if point["status"] == "oom":
            stop_reason = f"ran out of memory at N={n}"
        elif point["status"] == "ok" and point["fwdbwd_median_s"] > grid["time_limit_s"]:
            stop_reason = (f"fwd+bwd took {point['fwdbwd_median_s']:.2f} s at N={n}, over "
                           f"time_limit_s={grid['time_limit_s']}")
    return points


def run_point(impl: Implementation, shape: Mapping, n: int, device: torch.device, grid: Mapping, seed: int) -> dict:
    """Measure one point; an out-of-memory or a failure becomes the point's status, never a crash."""
    try:
        inputs = make_inputs(shape["batch"], shape["heads"], n, shape["query_key_dim"], shape["value_dim"],
                             DTYPES[shape["dtype"]], device, seed)
        return measure_point(impl, inputs, shape["causal"], device, grid)
    except MethodError as exc:  # the method refuses this input (e.g. longer than its levels cover)
        return {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - one point's failure must not end the sweep
        failed = measure.failure(exc)
    measure.release(device)
    return failed
