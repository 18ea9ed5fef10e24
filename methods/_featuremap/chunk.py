"""Attention from features in O(N) memory: dense inside chunks, float32 running sums between them.

Causal: the sequence is cut into chunks of ``chunk_size``. Inside a chunk the (L, L) score block is
dense and masked; keys of earlier chunks enter through the running sums kv = sum_j phi_k_j v_j^T
(F, E) and z = sum_j phi_k_j (F), cumulative sums over per-chunk states. The denominator rides
along as an extra value column of ones, so each product yields numerator and denominator together.
The products are batched over the chunks of one head's segment (about 2048 tokens) at a time.
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
        numerator, denominator = _causal_chunked(phi_q, phi_k, v_and_one, chunk_size)
    else:
        both = phi_q @ (phi_k.transpose(-1, -2) @ v_and_one)
        numerator, denominator = both[..., :-1], both[..., -1]
    return divide_by_denominator(numerator, denominator, eps)


def _causal_chunked(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """sum_{j <= i} (phi_q_i . phi_k_j) v_j for every i in float32, split into all but the last value
    column (the numerator) and the last one (the denominator)."""
    batch, heads, n, features = phi_q.shape
    length = min(chunk_size, n)
    # Zero rows past the end: padded keys add nothing, padded queries are cut off below.
    pad = -n % length
    if pad:
        phi_q, phi_k, v = (F.pad(t, (0, 0, 0, pad)) for t in (phi_q, phi_k, v))
    chunks = (n + pad) // length
    # Contiguous, so that each head's run of chunks is one contiguous block for the batched products.
    q, k, vc = (t.reshape(batch * heads, chunks, length, t.shape[-1]).contiguous() for t in (phi_q, phi_k, v))
    numerator, denominator = _CausalChunkProduct.apply(q, k, vc)
    numerator, denominator = numerator.reshape(batch, heads, n + pad, -1), denominator.reshape(batch, heads, n + pad)
    return (numerator[:, :, :n], denominator[:, :, :n]) if pad else (numerator, denominator)


# About 2048 tokens handled together: every tensor the products touch (about 4 MiB at 64
# features) stays in cache, so time grows linearly with N instead of slowing once the whole
# (B, H, N) tensors outgrow the cache, and short sequences still come in few, large products.
SEGMENT_TOKENS = 2048


def _blocks(heads: int, chunks: int, length: int) -> list[list[tuple[slice, slice]]]:
    """Groups of (heads, chunks) blocks of about SEGMENT_TOKENS tokens; a running state is carried
    through the blocks of a group, in order. A head longer than that is one group of runs of its
    chunks; shorter heads are grouped whole, several at a time."""
    per_head = chunks * length
    if per_head <= SEGMENT_TOKENS:
        group = max(1, SEGMENT_TOKENS // per_head)
        return [[(slice(h, min(h + group, heads)), slice(0, chunks))] for h in range(0, heads, group)]
    step = max(1, SEGMENT_TOKENS // length)
    return [[(slice(h, h + 1), slice(start, min(start + step, chunks))) for start in range(0, chunks, step)]
            for h in range(heads)]


class _CausalChunkProduct(torch.autograd.Function):
    """out_c = tril(q_c k_c^T) v_c + q_c S_c, S_c = sum_{c' < c} k_c'^T v_c'; tensors (G, C, L, X).

    Returns out[..., :-1] and out[..., -1] as two outputs, so that their gradients arrive apart and
    are joined once here, not each scattered into a zero tensor of the full size by autograd.
    Works on one block of heads and chunks at a time (``_blocks``), carrying the running state across.
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        heads, chunks, length, _ = q.shape
        out = torch.empty_like(v)
        scores = q.new_empty(heads, chunks, length, length)
        states_before = q.new_empty(heads, chunks, q.shape[-1], v.shape[-1])  # (G, C, F, E)
        for group in _blocks(heads, chunks, length):
            state = 0.0
            for hs, seg in group:
                qs, ks, vs = q[hs, seg].flatten(0, 1), k[hs, seg].flatten(0, 1), v[hs, seg].flatten(0, 1)
                before, block_scores = states_before[hs, seg], scores[hs, seg].flatten(0, 1)
                # tril_, not a 0/1 product: a huge later key may score inf, and inf * 0 is nan.
                torch.bmm(qs, ks.transpose(-1, -2), out=block_scores).tril_()
                chunk_states = (ks.transpose(-1, -2) @ vs).view(before.shape)
                # The state before a chunk sums all chunks before it, here and in earlier blocks.
                before[:, 0] = state
                torch.cumsum(chunk_states[:, :-1], 1, out=before[:, 1:])
                before[:, 1:] += state
                state = before[:, -1:] + chunk_states[:, -1:]
                torch.bmm(qs, before.flatten(0, 1), out=out[hs, seg].flatten(0, 1)).baddbmm_(block_scores, vs)
        ctx.save_for_backward(q, k, v, scores, states_before)
        return out[..., :-1], out[..., -1]

    @staticmethod
    def backward(
        ctx, grad_numerator: torch.Tensor, grad_denominator: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v, scores, states_before = ctx.saved_tensors
        grad = torch.cat([grad_numerator, grad_denominator.unsqueeze(-1)], dim=-1)
        grad_q, grad_k, grad_v = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        heads, chunks, length, _ = q.shape
        for group in _blocks(heads, chunks, length):
            # A chunk's state reaches the queries of every later chunk: sum their gradients backwards.
            after = 0.0
            for hs, seg in reversed(group):
                qs, ks, vs, gs = (t[hs, seg].flatten(0, 1) for t in (q, k, v, grad))
                grad_scores = (gs @ vs.transpose(-1, -2)).tril_()
                shape = states_before[hs, seg].shape
                # This chunk's and every later chunk's query gradients, summed from the end.
                reached = (qs.transpose(-1, -2) @ gs).view(shape).flip(1).cumsum(1).flip(1)
                grad_states = torch.empty_like(reached)
                grad_states[:, -1:] = after
                torch.add(reached[:, 1:], after, out=grad_states[:, :-1])
                after = reached[:, :1] + after
                grad_states = grad_states.flatten(0, 1)
                torch.bmm(gs, states_before[hs, seg].flatten(0, 1).transpose(-1, -2),
                          out=grad_q[hs, seg].flatten(0, 1)).baddbmm_(grad_scores, ks)
                torch.bmm(vs, grad_states.transpose(-1, -2), out=grad_k[hs, seg].flatten(0, 1)).baddbmm_(
                    grad_scores.transpose(-1, -2), qs)
                torch.bmm(ks, grad_states, out=grad_v[hs, seg].flatten(0, 1)).baddbmm_(
                    scores[hs, seg].flatten(0, 1).transpose(-1, -2), gs)
        return grad_q, grad_k, grad_v
