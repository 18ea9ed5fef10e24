"""The FLOP model of the kernel benchmark (slopes and crossovers: suite.scaling).

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
