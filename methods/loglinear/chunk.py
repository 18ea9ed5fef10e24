"""Log-linear attention in O(N log N): dense inside chunks, one float32 state per Fenwick level between them.

With a chunk size C = 2^c, a key s in an earlier chunk than query t has level
``l(t, s) = c + bit_length(chunk(t) XOR chunk(s))``, so earlier chunks fall into whole-chunk
Fenwick buckets: for chunk level j the bucket of chunk i is the aligned block of 2^j chunks just
before i's block, present when bit j of i is set. The blocks of every level are pairwise sums of
the level below (a binary tree over the per-chunk states), so all buckets cost O(N) to build and
each query reads one state per level: O(N log N) in all, batched over chunks, no Python loop over
them. The denominator rides along as an extra value column of ones.

The two products that touch every query (inside the chunks, and against the per-level states) are
``ChunkParts``: plain PyTorch here, Triton kernels in triton.py; the rest is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator
from methods.base import MethodError
from methods.loglinear.levels import level_matrix

# intra(phi_q, phi_k, v, level_weights (levels 0..c), cumulative gates or None, chunk_size) and
# inter(phi_q, states (B,H,chunks,J,F,E+1), scale (B,H,N,J)) both return (B, H, N, E + 1):
# numerator columns then the denominator.
IntraPart = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", int], torch.Tensor]
InterPart = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ChunkParts:
    """The two per-query products of the chunked form."""

    intra: IntraPart
    inter: InterPart


def check_chunk_size(chunk_size: int) -> None:
    """Chunks must be a power of two (so levels split into in-chunk and whole-chunk bits), at least 16."""
    if not isinstance(chunk_size, int) or chunk_size < 16 or chunk_size & (chunk_size - 1):
        raise MethodError(f"loglinear: chunk_size must be a power of two >= 16, got {chunk_size!r}")


def torch_intra(phi_q, phi_k, v, level_weights, cumulative_gates, chunk_size):
    """Dense level-weighted (and decayed) causal attention inside each chunk, batched over chunks."""
    batch, heads, n, features = phi_q.shape
    chunks = n // chunk_size
    q = phi_q.view(batch, heads, chunks, chunk_size, features)
    k = phi_k.view(batch, heads, chunks, chunk_size, features)
    values = F.pad(v, (0, 1), value=1.0).view(batch, heads, chunks, chunk_size, -1)
    lam = level_weights.reshape(batch, heads, chunks, chunk_size, -1)
    # one_hot[t, s, l] = [level(t, s) == l]; the -1 above the diagonal matches no level, so the
    # product with it is also the causal mask.
    levels = level_matrix(chunk_size, device=phi_q.device)
    one_hot = (levels[..., None] == torch.arange(lam.shape[-1], device=phi_q.device)).float()
    scores = (q @ k.transpose(-1, -2)) * torch.einsum("bhcti,tsi->bhcts", lam, one_hot)
    if cumulative_gates is not None:
        g = cumulative_gates.view(batch, heads, chunks, chunk_size)
        exponent = (g[..., :, None] - g[..., None, :]).masked_fill(levels < 0, float("-inf"))
        scores = scores * torch.exp(exponent)
    return (scores @ values).view(batch, heads, n, -1)


def torch_inter(phi_q, states, scale):
    """sum_j scale_j(t) * phi_q(t) . state_j(chunk(t)), as one product contracting levels and features."""
    batch, heads, chunks, levels, features, width = states.shape
    chunk_size = phi_q.shape[2] // chunks
    q = phi_q.view(batch, heads, chunks, chunk_size, 1, features) * scale.view(batch, heads, chunks, chunk_size, levels, 1)
    out = q.flatten(-2) @ states.flatten(-3, -2)
    return out.view(batch, heads, chunks * chunk_size, width)


TORCH_PARTS = ChunkParts(intra=torch_intra, inter=torch_inter)


def level_states(
    phi_k: torch.Tensor, v: torch.Tensor, cumulative_gates: torch.Tensor | None, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per chunk and chunk level j: the bucket's state (B,H,chunks,J,F,E+1), whether it exists and its end gate.

    A bucket's state is sum_s exp(G_end - G_s) phi_k(s) [v_s, 1]^T with G_end the cumulative gate
    at the bucket's last key; the query then applies exp(G_t - G_end), never a positive exponent.
    """
    batch, heads, n, features = phi_k.shape
    chunks = n // chunk_size
    values = F.pad(v, (0, 1), value=1.0).view(batch, heads, chunks, chunk_size, -1)
    k = phi_k.view(batch, heads, chunks, chunk_size, features)
    if cumulative_gates is None:
        ends = torch.zeros(batch, heads, chunks, device=phi_k.device)
    else:
        g = cumulative_gates.view(batch, heads, chunks, chunk_size)
        ends = g[..., -1]
        k = k * torch.exp(ends[..., None] - g)[..., None]
    blocks = k.transpose(-1, -2) @ values  # level-0 blocks: one chunk each

    index = torch.arange(chunks, device=phi_k.device)
    states, present, bucket_ends = [], [], []
    for j in range((chunks - 1).bit_length()):
        block = index >> j
        exists = (block & 1) == 1
        before = (block - 1).clamp_min(0)
        states.append(blocks[:, :, before] * exists.view(-1, 1, 1))
        present.append(exists)
        bucket_ends.append(ends[:, :, before])
        # The next level's blocks pair this level's; an odd last block is never a whole bucket.
        pairs = blocks.shape[2] // 2
        first, second = blocks[:, :, 0 : 2 * pairs : 2], blocks[:, :, 1 : 2 * pairs : 2]
        first_end, second_end = ends[:, :, 0 : 2 * pairs : 2], ends[:, :, 1 : 2 * pairs : 2]
        if cumulative_gates is not None:
            first = first * torch.exp(second_end - first_end)[..., None, None]
        blocks, ends = first + second, second_end
    return torch.stack(states, 3), torch.stack(present, 1), torch.stack(bucket_ends, 3)


def causal_parts(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    level_weights: torch.Tensor,
    log_gates: torch.Tensor | None,
    chunk_size: int,
    parts: ChunkParts,
) -> torch.Tensor:
    """Causal numerator and denominator (B, H, N, E + 1) in float32."""
    n = phi_q.shape[2]
    pad = -n % chunk_size
    # Zero rows past the end: padded keys add nothing, padded queries are cut off below.
    phi_q, phi_k, v, level_weights = (F.pad(t.float(), (0, 0, 0, pad)) for t in (phi_q, phi_k, v, level_weights))
    in_chunk_levels = chunk_size.bit_length()  # levels 0..c
    needed = max(in_chunk_levels, (n + pad - 1).bit_length() + 1)
    # Levels beyond the given ones only ever pair padding with padding: weight them 0.
    level_weights = F.pad(level_weights, (0, max(0, needed - level_weights.shape[-1])))
    cumulative = None if log_gates is None else F.pad(log_gates.float(), (0, pad)).cumsum(-1)

    out = parts.intra(phi_q, phi_k, v, level_weights[..., :in_chunk_levels].contiguous(), cumulative, chunk_size)
    chunks = (n + pad) // chunk_size
    if chunks > 1:
        states, present, ends = level_states(phi_k, v, cumulative, chunk_size)
        levels = states.shape[3]
        batch, heads = phi_q.shape[:2]
        scale = level_weights[..., in_chunk_levels : in_chunk_levels + levels].view(batch, heads, chunks, chunk_size, levels)
        scale = scale * present.view(1, 1, chunks, 1, levels)
        if cumulative is not None:
            gates = cumulative.view(batch, heads, chunks, chunk_size, 1)
            # Gates are <= 0, so G_t <= G_end for every present bucket; the clamp only keeps absent
            # buckets (scale already 0, end taken from an unrelated block) from overflowing to inf.
            scale = scale * torch.exp((gates - ends[:, :, :, None, :]).clamp_max(0))
        out = out + parts.inter(phi_q, states, scale.view(batch, heads, n + pad, levels))
    return out[:, :, :n]


def loglinear_attention_chunk(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    level_weights: torch.Tensor,
    log_gates: torch.Tensor | None = None,
    causal: bool = True,
    eps: float = DENOMINATOR_EPS,
    chunk_size: int = 64,
    parts: ChunkParts = TORCH_PARTS,
) -> torch.Tensor:
    """Same result as ``naive.loglinear_attention`` in O(N log N) time; returns float32."""
    check_chunk_size(chunk_size)
    both = causal_parts(phi_q, phi_k, v, level_weights, log_gates, chunk_size, parts)
    if not causal:
        flip = lambda t: None if t is None else t.flip(2)  # noqa: E731
        reversed_pass = causal_parts(flip(phi_q), flip(phi_k), flip(v), flip(level_weights), flip(log_gates), chunk_size, parts)
        # The diagonal is in both passes; count it once (its decay factor is exp(0) = 1).
        diagonal = level_weights[..., 0].float() * (phi_q.float() * phi_k.float()).sum(-1)
        both = both + reversed_pass.flip(2) - diagonal[..., None] * F.pad(v.float(), (0, 1), value=1.0)
    return divide_by_denominator(both[..., :-1], both[..., -1], eps)
