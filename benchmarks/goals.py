"""The kernel goals, as ratios of medians measured in one benchmark run (CPU, D = 64, causal
forward+backward): linear chunk vs SDPA softmax at N = 8192 (goal >= 10x), the 2K..8K scaling slope
of linear, favor, taylor (goal <= 1.1) and loglinear (<= 1.25), loglinear vs linear at 8192 (<= 2.5x),
and linear chunk's FLOP rate as a fraction of a same-run matmul at N >= 4096."""

from __future__ import annotations

from suite import scaling
from suite.modes.kernel import analysis

GOAL_LENGTH = 8192
SLOPE_GOALS = {"linear": 1.1, "favor": 1.1, "taylor": 1.1, "loglinear": 1.25}
SHAPE = {"batch": 1, "heads": 4, "head_dim": 64, "value_dim": 64}


def goal_lines(medians: dict[tuple, float]) -> list[str]:
    """One line per goal that this run measured; medians are keyed (method, impl, N) or ("matmul", size)."""
    lines = []
    linear, sdpa = medians.get(("linear", "chunk", GOAL_LENGTH)), medians.get(("softmax", "sdpa", GOAL_LENGTH))
    if linear and sdpa:
        lines.append(f"SDPA softmax / linear chunk at N={GOAL_LENGTH}: {sdpa / linear:.1f}x (goal >= 10x)")
    for method, goal in SLOPE_GOALS.items():
        points = sorted((n, t) for (m, impl, n), t in _timed(medians) if m == method and impl == "chunk")
        slope = scaling.slope_between([n for n, _ in points], [t for _, t in points], 2048, 8192)
        if slope is not None:
            lines.append(f"{method} chunk slope 2K..8K: {slope:.2f} (goal <= {goal})")
    loglinear = medians.get(("loglinear", "chunk", GOAL_LENGTH))
    if linear and loglinear:
        lines.append(f"loglinear / linear chunk at N={GOAL_LENGTH}: {loglinear / linear:.2f}x (goal <= 2.5x)")
    matmul = next(((size, t) for key, t in medians.items() if key[0] == "matmul" for size in key[1:]), None)
    if matmul:
        size, seconds = matmul
        rate = 2.0 * size**3 / seconds
        for (m, impl, n), t in _timed(medians):
            if m == "linear" and impl == "chunk" and n >= 4096:
                flops = analysis.BACKWARD_FACTOR * analysis.forward_flops("linear", n, causal=True, **SHAPE)
                lines.append(f"linear chunk at N={n}: {flops / t / 1e9:.1f} GFLOP/s = "
                             f"{100 * flops / t / rate:.1f}% of a {size}^3 matmul ({rate / 1e9:.1f} GFLOP/s)")
    return lines


def _timed(medians: dict[tuple, float]):
    return [(key, t) for key, t in medians.items() if len(key) == 3]
