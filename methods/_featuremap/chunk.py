"""Attention from features in O(N) memory: dense inside chunks, float32 running sums between them.

Causal: the sequence is cut into chunks of ``chunk_size``. Inside a chunk the (L, L) score block is
dense and masked; keys of earlier chunks enter through the running sums kv = sum_j phi_k_j v_j^T
(F, E) and z = sum_j phi_k_j (F), taken for all chunks at once by an exclusive cumulative sum over
per-chunk states. The denominator rides along as an extra value column of ones, so each product
yields numerator and denominator together. Everything is batched: no Python loop over chunks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator


def feature_attention_chunk(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    eps: float | torch.Tensor = DENOMINATOR_EPS,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Same result as ``naive.feature_attention`` in O(N) memory; inputs of any float dtype, returns float32."""
    # One extra value column of ones turns every numerator product into a denominator product too.
    v_and_one = F.pad(v.float(), (0, 1), value=1.0)
    phi_q, phi_k = phi_q.float(), phi_k.float()
    if causal:
        both = _causal_chunked(phi_q, phi_k, v_and_one, chunk_size)
    else:
        both = phi_q @ (phi_k.transpose(-1, -2) @ v_and_one)
    return divide_by_denominator(both[..., :-1], both[..., -1], eps)


def _causal_chunked(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """sum_{j <= i} (phi_q_i . phi_k_j) v_j for every i, all in float32."""
    batch, heads, n, features = phi_q.shape
    length = min(chunk_size, n)
    # Zero rows past the end: padded keys add nothing, padded queries are cut off below.
    pad = -n % length
    if pad:
        phi_q, phi_k, v = (F.pad(t, (0, 0, 0, pad)) for t in (phi_q, phi_k, v))
    chunks = (n + pad) // length
    q = phi_q.reshape(batch, heads, chunks, length, features)
    k = phi_k.reshape(batch, heads, chunks, length, features)
    vc = v.reshape(batch, heads, chunks, length, v.shape[-1])

    # masked_fill, not a product: a huge later key may score inf, and inf * 0 is nan.
    future = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)
    inside = (q @ k.transpose(-1, -2)).masked_fill(future, 0.0) @ vc

    chunk_states = k.transpose(-1, -2) @ vc  # (B, H, C, F, E+1)
    # The state before chunk c sums chunks 0..c-1: shift by one chunk, then a cumulative sum.
    states_before = F.pad(chunk_states[:, :, :-1], (0, 0, 0, 0, 1, 0)).cumsum(2)
    before = q @ states_before
    return (inside + before).reshape(batch, heads, n + pad, -1)[:, :, :n]
