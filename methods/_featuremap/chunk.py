"""Attention from features in O(N) memory: dense inside chunks, float32 running sums between them.

Causal: the sequence is cut into chunks of ``chunk_size``. Inside a chunk the (L, L) score block is
dense and masked; keys of earlier chunks enter through the running sums kv = sum_j phi_k_j v_j^T
(F, E) and z = sum_j phi_k_j (F), taken for all chunks at once by an exclusive cumulative sum over
per-chunk states. The denominator rides along as an extra value column of ones, so each product
yields numerator and denominator together. Everything is batched: no Python loop over chunks.
The causal product has a hand-written backward: autograd's would add a pass over every (L, L)
block for each add and mask, where here the adds ride in the matrix products (baddbmm) and the masks
are applied in place.
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
    # Contiguous, so that (G, C) flattens to a view for the batched products.
    q, k, vc = (t.reshape(batch * heads, chunks, length, t.shape[-1]).contiguous() for t in (phi_q, phi_k, v))
    out = _CausalChunkProduct.apply(q, k, vc)
    return out.reshape(batch, heads, n + pad, -1)[:, :, :n]


def _exclusive_cumsum(states: torch.Tensor) -> torch.Tensor:
    """sum of states over the chunks before each chunk (dim 1), written into one new tensor."""
    before = torch.empty_like(states)
    before[:, 0] = 0.0
    torch.cumsum(states[:, :-1], dim=1, out=before[:, 1:])
    return before


def _reverse_exclusive_cumsum(states: torch.Tensor) -> torch.Tensor:
    """sum of states over the chunks after each chunk (dim 1); flips of the small per-chunk states only."""
    after = torch.empty_like(states)
    after[:, -1] = 0.0
    after[:, :-1] = states[:, 1:].flip(1).cumsum(1).flip(1)
    return after


def _flat(t: torch.Tensor) -> torch.Tensor:
    """(G, C, L, X) -> (G * C, L, X) as a view (in-place products write through it)."""
    return t.view(-1, *t.shape[2:])


class _CausalChunkProduct(torch.autograd.Function):
    """out_c = tril(q_c k_c^T) v_c + q_c S_c, S_c = sum_{c' < c} k_c'^T v_c'; tensors (G, C, L, X)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # tril_, not a 0/1 product: a huge later key may score inf, and inf * 0 is nan.
        scores = (q @ k.transpose(-1, -2)).tril_()
        states_before = _exclusive_cumsum(k.transpose(-1, -2) @ v)  # (G, C, F, E)
        out = q @ states_before
        _flat(out).baddbmm_(_flat(scores), _flat(v))
        ctx.save_for_backward(q, k, v, scores, states_before)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v, scores, states_before = ctx.saved_tensors
        grad = grad.contiguous()
        grad_scores = (grad @ v.transpose(-1, -2)).tril_()
        # A chunk's state reaches the queries of every later chunk.
        grad_states = _reverse_exclusive_cumsum(q.transpose(-1, -2) @ grad)  # (G, C, F, E)
        grad_q = grad @ states_before.transpose(-1, -2)
        _flat(grad_q).baddbmm_(_flat(grad_scores), _flat(k))
        grad_k = v @ grad_states.transpose(-1, -2)
        _flat(grad_k).baddbmm_(_flat(grad_scores).transpose(-1, -2), _flat(q))
        grad_v = k @ grad_states
        _flat(grad_v).baddbmm_(_flat(scores).transpose(-1, -2), _flat(grad))
        return grad_q, grad_k, grad_v
