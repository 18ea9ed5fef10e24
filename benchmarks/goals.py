"""The kernel goals, as ratios of medians measured in one benchmark run (CPU, D = 64, causal
forward+backward): linear chunk vs SDPA softmax at N = 8192 (goal >= 10x), the 2K..8K scaling slope
of linear, favor, taylor (goal <= 1.1) and loglinear (<= 1.25), loglinear vs linear at 8192 (<= 2.5x),
and each method's FLOP rate as a fraction of a same-run matmul (linear chunk: goal >= 50%), with the
FLOPs each method declares for what its implementation computes (``forward_flops`` +
``backward_flops``, methods/_featuremap/flops.py). Then the batched products the chunked path is
made of, and the board's training shapes (MQAR, one head of 64, batch 64)."""

from __future__ import annotations

import methods
from suite import scaling

GOAL_LENGTH = 8192
LENGTHS = (2048, 4096, 8192)
SLOPE_GOALS = {"linear": 1.1, "favor": 1.1, "taylor": 1.1, "loglinear": 1.25}
SHAPE = {"batch": 1, "heads": 4, "head_dim": 64, "value_dim": 64}
# The CPU board's MQAR points: sequences of 64..256, d_model 64 in one head (model=hybrid), batch 64.
BOARD_SHAPE = {"batch": 64, "heads": 1, "head_dim": 64, "value_dim": 64}
BOARD_LENGTHS = (64, 128, 256)
FAST_PATH = {"softmax": "sdpa", "linear": "chunk", "favor": "chunk", "taylor": "chunk", "loglinear": "chunk"}
MATMUL_GOAL = 0.5
# The long board's training step (suite/boards/long.yaml, issue 43): its MQAR model at the lengths it
# is trained and scored at, the same tokens per step at each (batch 64 at 256 tokens). Goal: each
# method's step time over softmax's (SDPA) within 1.25x of the ratio its FLOP count allows, at 1,024
# and 4,096 tokens.
LONG_LENGTHS = (256, 1024, 4096)
LONG_TOKENS = 64 * 256
LONG_GOAL_LENGTHS = (1024, 4096)
FLOP_RATIO_GOAL = 1.25


def method_options(name: str) -> dict:
    """The options the suite runs ``name`` with (its config, made from its class), e.g. taylor's feature_dim 16."""
    from suite.groups import method_config

    return method_config(methods.get(name))["options"]


def build(name: str, head_dim: int, impl: str | None = None):
    """The method as configured, in eval mode (no FAVOR+ redraws while timing)."""
    return methods.build(name, head_dim=head_dim, impl=impl or FAST_PATH[name], **method_options(name)).eval()


def step_flops(name: str, n: int, shape: dict) -> float:
    """FLOPs of one causal forward+backward of the method's fast path, as it declares them."""
    module = build(name, shape["head_dim"])
    args = (shape["batch"], shape["heads"], n, shape["value_dim"], True)
    return module.forward_flops(*args) + module.backward_flops(*args)


def whole_step_flops(model, step, attention_calls: list[tuple]) -> float:
    """FLOPs of one training step ``step()`` of ``model``: torch's counter for all of it but the
    attention, whose counted FLOPs are replaced by what the method declares for its implementation
    (the counter sees no SDPA on the CPU, and a chunked path's products only in part).
    ``attention_calls``: per attention layer, the (module, batch, heads, n, value_dim) of its call."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    counts = counter.get_flop_counts()  # per module path, its forward and backward together
    counted_attention = sum(sum(ops.values()) for path, ops in counts.items() if path.endswith(".attention"))
    declared = sum(module.forward_flops(b, h, n, e, True) + module.backward_flops(b, h, n, e, True)
                   for module, b, h, n, e in attention_calls)
    return counter.get_total_flops() - counted_attention + declared


def long_step_lines(steps: dict[tuple[str, int], float], flops: dict[tuple[str, int], float]) -> list[str]:
    """Each method's long-board training step over softmax's at each length, beside the ratio of
    their whole-step FLOPs, and at LONG_GOAL_LENGTHS whether it is within FLOP_RATIO_GOAL of it."""
    lines = []
    for (method, n), seconds in sorted(steps.items(), key=lambda x: (x[0][1], x[0][0])):
        softmax = steps.get(("softmax", n))
        if method == "softmax" or softmax is None or (method, n) not in flops or ("softmax", n) not in flops:
            continue
        measured, allowed = seconds / softmax, flops[(method, n)] / flops[("softmax", n)]
        goal = ""
        if n in LONG_GOAL_LENGTHS:
            met = measured <= FLOP_RATIO_GOAL * allowed
            goal = f" ({'within' if met else 'NOT within'} {FLOP_RATIO_GOAL}x of it: goal)"
        lines.append(f"long step {method} N={n}: {measured:.2f}x softmax (SDPA), its FLOPs allow {allowed:.2f}x{goal}")
    return lines


def goal_lines(medians: dict[tuple, float]) -> list[str]:
    """One line per goal that this run measured. Keys: ("module", method, N), ("matmul", size),
    ("product", label, flops), ("board", method, N), ("train", method, N) and ("long", method, N,
    whole-step FLOPs)."""
    lines = long_step_lines({(m, n): t for (_, m, n, _), t in _kind(medians, "long")},
                            {(m, n): f for (_, m, n, f), _ in _kind(medians, "long")})
    module = {(m, n): t for (kind, m, n), t in _kind(medians, "module")}
    linear, sdpa = module.get(("linear", GOAL_LENGTH)), module.get(("softmax", GOAL_LENGTH))
    if linear and sdpa:
        lines.append(f"SDPA softmax / linear chunk at N={GOAL_LENGTH}: {sdpa / linear:.1f}x (goal >= 10x)")
    for method, goal in SLOPE_GOALS.items():
        points = sorted((n, t) for (m, n), t in module.items() if m == method)
        value = scaling.slope_between([n for n, _ in points], [t for _, t in points], LENGTHS[0], LENGTHS[-1])
        if value is not None:
            lines.append(f"{method} chunk slope {LENGTHS[0] // 1024}K..{LENGTHS[-1] // 1024}K: {value:.2f} "
                         f"(goal <= {goal})")
    loglinear = module.get(("loglinear", GOAL_LENGTH))
    if linear and loglinear:
        lines.append(f"loglinear / linear chunk at N={GOAL_LENGTH}: {loglinear / linear:.2f}x (goal <= 2.5x)")
    matmul = next(((key[1], t) for key, t in medians.items() if key[0] == "matmul"), None)
    if matmul is None:
        return lines
    size, seconds = matmul
    rate = 2.0 * size**3 / seconds
    lines.append(f"matmul {size}^3: {rate / 1e9:.1f} GFLOP/s (the reference rate of this run)")
    for (method, n), t in sorted(module.items()):
        achieved = step_flops(method, n, SHAPE) / t
        goal = f" (goal >= {MATMUL_GOAL:.0%})" if method == "linear" else ""
        lines.append(f"{method} {FAST_PATH[method]} N={n}: {t * 1e3:.1f} ms, {achieved / 1e9:.1f} GFLOP/s = "
                     f"{achieved / rate:.0%} of the matmul{goal}")
    for (_, label, flops), t in sorted(_kind(medians, "product")):
        lines.append(f"product {label}: {flops / t / 1e9:.1f} GFLOP/s = {flops / t / rate:.0%} of the matmul")
    trains = {(m, n): t for (_, m, n), t in _kind(medians, "train")}
    for (_, method, n), t in sorted(_kind(medians, "board"), key=lambda x: (x[0][2], list(FAST_PATH).index(x[0][1]))):
        achieved = step_flops(method, n, BOARD_SHAPE) / t
        train = trains.get((method, n))
        step = f"; model training step {train * 1e3:.1f} ms" if train else ""
        lines.append(f"board {method} N={n} B=64 H=1: attention fwd+bwd {t * 1e3:.2f} ms, "
                     f"{achieved / 1e9:.1f} GFLOP/s = {achieved / rate:.0%} of the matmul{step}")
    return lines


def _kind(medians: dict[tuple, float], kind: str):
    return [(key, t) for key, t in medians.items() if key[0] == kind]
