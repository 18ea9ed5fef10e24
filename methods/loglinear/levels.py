"""Fenwick levels: which bucket of the past each key falls into, as seen from each query.

Level of key s for query t: ``bit_length(t XOR s)`` for s < t, 0 for s = t. Keys sharing a level
form one contiguous bucket, and the buckets of query t are the binary-counter decomposition of
[0, t): one bucket per set bit of t, the bucket of bit b at level b + 1.
"""

from __future__ import annotations

import torch

from methods.base import MethodError


def bit_length(x: torch.Tensor) -> torch.Tensor:
    """Elementwise ``int.bit_length`` of a non-negative integer tensor."""
    bits = int(x.max()).bit_length() if x.numel() else 0
    out = torch.zeros_like(x)
    for b in range(bits):
        out += (x >> b) > 0
    return out


def level_matrix(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The (n, n) int64 matrix of levels l(t, s): query t on rows, key s on columns, -1 above the diagonal."""
    positions = torch.arange(n, device=device)
    levels = bit_length(positions[:, None] ^ positions[None, :])
    return levels.masked_fill(positions[None, :] > positions[:, None], -1)


def noncausal_level_matrix(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Levels of non-causal log-linear attention (a forward and a reversed pass): the causal levels
    for keys up to the query, those of the reversed sequence for keys after it; (n, n), no -1."""
    forward = level_matrix(n, device=device)
    return torch.where(forward >= 0, forward, forward.flip(0, 1))


def levels_used(n: int) -> int:
    """How many level weights n consecutive tokens read (a sequence, or one chunk inside itself):
    levels 0 .. bit_length(n - 1)."""
    return (n - 1).bit_length() + 1


def max_length(num_levels: int) -> int:
    """The longest sequence whose levels all fit in ``num_levels`` weights: 2^(num_levels - 1)."""
    return 1 << (num_levels - 1)


def check_length(n: int, num_levels: int) -> None:
    """A clear error when a sequence of length ``n`` needs more than ``num_levels`` levels."""
    if n > max_length(num_levels):
        raise MethodError(
            f"loglinear: sequence length {n} needs {levels_used(n)} levels but "
            f"num_levels={num_levels} covers at most {max_length(num_levels)} tokens; "
            f"raise num_levels"
        )
