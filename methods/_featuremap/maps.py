"""Parameter-free feature maps shared by several methods."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """Katharopoulos et al. 2020: phi(x) = elu(x) + 1, positive so the denominator is too."""
    return F.elu(x) + 1.0


def second_order_taylor(x: torch.Tensor, symmetric_half: bool = False) -> torch.Tensor:
    """Based (Arora et al. 2024): [1, x/D^(1/4), vec(x x^T)/(sqrt(2) sqrt(D))], so that
    phi(q).phi(k) = 1 + s + s^2/2 with s = q.k/sqrt(D). ``symmetric_half`` keeps the i <= j
    entries of x x^T only, the off-diagonal ones times sqrt(2): same inner product, 1 + D + D(D+1)/2 features."""
    d = x.shape[-1]
    quadratic = (x.unsqueeze(-1) * x.unsqueeze(-2)) / math.sqrt(2 * d)
    if symmetric_half:
        rows, cols = torch.triu_indices(d, d, device=x.device)
        weight = torch.where(rows == cols, 1.0, math.sqrt(2.0)).to(x.dtype)
        quadratic = quadratic[..., rows, cols] * weight
    else:
        quadratic = quadratic.flatten(-2)
    return torch.cat([torch.ones_like(x[..., :1]), x / d**0.25, quadratic], dim=-1)


def positive_random_feature_logits(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """FAVOR+ (Choromanski et al. 2021) before the exp: w_r.x - |x|^2/2 for each row w_r of
    ``projection`` (m, D), with x already scaled by D^(-1/4)."""
    return x @ projection.transpose(-1, -2) - 0.5 * x.square().sum(-1, keepdim=True)
