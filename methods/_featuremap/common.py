"""What every path of the feature-map attention core shares: the denominator epsilon and the ratio."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Added (in float32) to every denominator phi(q_i) . sum_j phi(k_j). The features are non-negative,
# so the denominator is too, but it reaches 0 when every product underflows (large-norm queries or
# keys) or when a feature map has zeros (elu+1 of very negative inputs); without it the output
# would be 0/0. 1e-6 is far below a typical denominator (about the number of keys seen) yet
# large enough that float32 keeps it next to a denominator of order one.
DENOMINATOR_EPS = 1e-6
TINY = torch.finfo(torch.float32).tiny

# Keys per block when a decoding state is summed from a prompt: the features of one block at a time.
STATE_BLOCK = 4096


def key_sums(phi: Callable[[torch.Tensor], torch.Tensor], k: torch.Tensor, v: torch.Tensor,
             weight: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum_s w_s phi(k_s) v_s^T (B,H,F,E), sum_s w_s phi(k_s) (B,H,F)) in float32 over the tokens of
    k (B,H,N,D), v (B,H,N,E), weights w (B,H,N) or 1; block by block, so phi is never held whole."""
    kv = z = 0.0
    for start in range(0, k.shape[2], STATE_BLOCK):
        block = slice(start, start + STATE_BLOCK)
        phi_k = phi(k[:, :, block]).float()
        if weight is not None:
            phi_k = phi_k * weight[:, :, block, None]
        kv = kv + torch.einsum("bhnf,bhne->bhfe", phi_k, v[:, :, block].float())
        z = z + phi_k.sum(2)
    return kv, z


def scaled_eps(log_factor: torch.Tensor, eps: float | torch.Tensor = DENOMINATOR_EPS) -> torch.Tensor:
    """eps exp(-log_factor): the epsilon of a denominator whose features had exp(log_factor) pulled
    out, so that it scales as the rest of the denominator does and the attention is unchanged. Kept
    at least float32's tiny, so that a fully underflowed denominator gives 0, never 0/0."""
    return torch.exp(-log_factor).mul_(eps).clamp_min_(TINY)


def divide_by_denominator(
    numerator: torch.Tensor, denominator: torch.Tensor, eps: float | torch.Tensor
) -> torch.Tensor:
    """numerator (B,H,N,E) / (denominator (B,H,N) + eps); eps a float or broadcastable to (B,H,N)."""
    return numerator / (denominator + eps).unsqueeze(-1)
