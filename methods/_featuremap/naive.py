"""The definition of attention from features, quadratic in N and in float32: the reference.

A = phi_q phi_k^T (lower triangular, diagonal included, when causal), o = (A v) / (A 1 + eps).
"""

from __future__ import annotations

import torch

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator


def feature_attention_parts(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """The numerator A v (B,H,N,E) and the denominator A 1 = phi_q . sum_j phi_k_j (B,H,N), float32."""
    scores = torch.einsum("bhnf,bhmf->bhnm", phi_q.float(), phi_k.float())
    if causal:
        n = scores.shape[-1]
        # masked_fill, not a product: a huge future key may score inf, and inf * 0 is nan.
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1), 0.0)
    return scores @ v.float(), scores.sum(-1)


def feature_attention(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    eps: float | torch.Tensor = DENOMINATOR_EPS,
) -> torch.Tensor:
    """o = (A v) / (A 1 + eps) with A = phi_q phi_k^T; phi (B,H,N,F), v (B,H,N,E); returns float32."""
    numerator, denominator = feature_attention_parts(phi_q, phi_k, v, causal)
    return divide_by_denominator(numerator, denominator, eps)
