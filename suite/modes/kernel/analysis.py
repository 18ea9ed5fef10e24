"""Figures derived from measured kernel points: a FLOP model per method, scaling slopes, crossovers.

FLOP model (forward, per batch element and head; F = feature size, E = value dim, L = Fenwick levels):

- softmax: ``2 N^2 (D + E)`` (scores, then weights times values), halved when causal.
- linear, favor, taylor: ``4 N F (E + 1)`` (keys into a state, queries out of it; the ``+ 1`` is the
  denominator riding as a value column), plus the feature map: ``2 N F`` (an elementwise map of q
  and k) and, for favor, ``4 N D F`` more (projecting q and k onto F random directions).
- loglinear: ``2 N F (E + 1) (1 + ceil(log2 N))`` causal (one state built per token, read once per
  Fenwick level), doubled when not causal (a forward and a reversed pass), plus ``2 N F`` for the map
  and ``2 N D L`` for the level weights.

The model counts the method's useful work, whatever the implementation: a naive path that
builds the (N, N) matrix for a linear method does more work than the model credits, so its achieved
rate is low, which is the point. Forward+backward is counted as 3x forward (a matmul's backward is
two matmuls of the same size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FEATURE_METHODS = ("linear", "favor", "taylor")
FLOP_MODELS = ("softmax", *FEATURE_METHODS, "loglinear")
BACKWARD_FACTOR = 3.0
LEVEL_WEIGHTS = 21  # loglinear's default num_levels; the projection onto them is a small share


def forward_flops(
    model: str,
    n: int,
    *,
    batch: int,
    heads: int,
    head_dim: int,
    value_dim: int,
    causal: bool,
    num_features: int | None = None,
) -> float:
    """Floating-point operations of one forward pass under ``model``'s FLOP model (module docstring)."""
    if model not in FLOP_MODELS:
        raise ValueError(f"no FLOP model for {model!r}; valid: {', '.join(FLOP_MODELS)}")
    f = num_features or head_dim
    if model == "softmax":
        per_head = 2.0 * n * n * (head_dim + value_dim) * (0.5 if causal else 1.0)
    elif model in FEATURE_METHODS:
        per_head = 4.0 * n * f * (value_dim + 1) + 2.0 * n * f
        if model == "favor":
            per_head += 4.0 * n * head_dim * f
    else:  # loglinear
        levels = 1 + math.ceil(math.log2(max(n, 2)))
        passes = 1 if causal else 2
        per_head = passes * 2.0 * n * f * (value_dim + 1) * levels + 2.0 * n * f + 2.0 * n * head_dim * LEVEL_WEIGHTS
    return per_head * batch * heads


def loglog_slope(lengths: Sequence[float], times: Sequence[float]) -> float | None:
    """Least-squares slope of log(time) against log(length); None with fewer than two lengths."""
    if len(lengths) != len(times):
        raise ValueError(f"{len(lengths)} lengths but {len(times)} times")
    if len(set(lengths)) < 2:
        return None
    xs = [math.log(n) for n in lengths]
    ys = [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    covariance = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    variance = sum((x - mx) ** 2 for x in xs)
    return covariance / variance


def slope_between(lengths: Sequence[int], times: Sequence[float], low: int, high: int) -> float | None:
    """The log-log slope over the lengths in [low, high] only; None unless both ends were measured."""
    if low not in lengths or high not in lengths:
        return None
    kept = [(n, t) for n, t in zip(lengths, times) if low <= n <= high]
    return loglog_slope([n for n, _ in kept], [t for _, t in kept])


def crossover(lengths: Sequence[int], times: Sequence[float], reference: Sequence[float]) -> dict:
    """Where an implementation becomes faster than the reference for good, on common lengths.

    Returns ``{"length": float | None, "where": ...}``: ``within_grid`` with the length
    interpolated in log space between the last two grid points that bracket the change (ratio of
    times crossing 1); ``below_grid`` when already faster at the shortest length (``length`` is that
    length: the crossover is at most it); ``beyond_grid`` when not faster at the longest length
    (``length`` None); ``no_common_lengths`` when the two were never both measured.
    """
    if not lengths:
        return {"length": None, "where": "no_common_lengths"}
    ratios = [t / r for t, r in zip(times, reference)]
    if ratios[-1] >= 1.0:
        return {"length": None, "where": "beyond_grid", "checked_up_to": lengths[-1]}
    # The last point at which it was not faster; faster at every longer length.
    slower = [i for i, ratio in enumerate(ratios) if ratio >= 1.0]
    if not slower:
        return {"length": float(lengths[0]), "where": "below_grid"}
    i = slower[-1]
    x0, x1 = math.log(lengths[i]), math.log(lengths[i + 1])
    y0, y1 = math.log(ratios[i]), math.log(ratios[i + 1])
    # log ratio is linear in log length between the two points; find where it reaches 0.
    x = x0 + (x1 - x0) * (0.0 - y0) / (y1 - y0)
    return {"length": math.exp(x), "where": "within_grid"}
