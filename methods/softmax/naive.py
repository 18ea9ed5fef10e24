"""The definition: softmax(q k^T / sqrt(D)) v, materialising the (N, N) matrix, in float32."""

from __future__ import annotations

import math

import torch


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      scale: float | None = None) -> torch.Tensor:
    """Exact attention in float32; returns the dtype of q."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.einsum("bhnd,bhmd->bhnm", q.float(), k.float()) * scale
    if causal:
        n, m = scores.shape[-2:]
        mask = torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return torch.einsum("bhnm,bhme->bhne", weights, v.float()).to(q.dtype)
