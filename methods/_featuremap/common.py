"""What every path of the feature-map attention core shares: the denominator epsilon and the ratio."""

from __future__ import annotations

import torch

# Added (in float32) to every denominator phi(q_i) . sum_j phi(k_j). The features are non-negative,
# so the denominator is too, but it reaches 0 when every product underflows (large-norm queries or
# keys) or when a feature map has zeros (elu+1 of very negative inputs); without it the output
# would be 0/0. 1e-6 is far below a typical denominator (about the number of keys seen) yet
# large enough that float32 keeps it next to a denominator of order one.
DENOMINATOR_EPS = 1e-6


def divide_by_denominator(
    numerator: torch.Tensor, denominator: torch.Tensor, eps: float | torch.Tensor
) -> torch.Tensor:
    """numerator (B,H,N,E) / (denominator (B,H,N) + eps); eps a float or broadcastable to (B,H,N)."""
    return numerator / (denominator + eps).unsqueeze(-1)
