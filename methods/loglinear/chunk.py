"""Log-linear attention in O(N log N): dense inside chunks, one float32 state per Fenwick level between them.

With a chunk size C = 2^c, a key s in an earlier chunk than query t has level
``l(t, s) = c + 1 + j`` with ``j + 1 = bit_length(chunk(t) XOR chunk(s))``, so earlier chunks fall
into whole-chunk Fenwick buckets: at chunk level j, the chunks of every odd aligned block of 2^j
chunks read the even block just before it (the bucket is absent in even blocks). The blocks of
every level are pairwise sums of the level below (a binary tree over the per-chunk states), so all
buckets cost O(N) to build and each query reads at most one state per level: O(N log N) in all,
batched over chunks, a Python loop over the log2(N / C) levels only. The denominator rides along
as an extra value column of ones.

The two products that touch every query (inside the chunks, and against the per-level states) are
``ChunkParts``: plain PyTorch here, Triton kernels in triton.py; the rest is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator
from methods.base import MethodError
from methods.loglinear.levels import level_matrix

@dataclass(frozen=True)
class FenwickTree:
    """Sums of aligned blocks of chunks: ``blocks[j]`` (B, H, chunks >> j, F, E + 1) sums 2^j chunks.

    With decay each block is decayed to its last key, whose cumulative gate is ``ends[j]``
    (B, H, chunks >> j); ``ends`` is None without decay.
    """

    blocks: list[torch.Tensor]
    ends: list[torch.Tensor] | None


# intra(phi_q, phi_k, v, level_weights (levels 0..c), cumulative gates or None, chunk_size) and
# inter(phi_q, tree, level_weights (chunk levels j = 0.., i.e. levels c+1..), cumulative gates or
# None, chunk_size) both return (B, H, N, E + 1): numerator columns then the denominator.
IntraPart = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", int], torch.Tensor]
InterPart = Callable[[torch.Tensor, FenwickTree, torch.Tensor, "torch.Tensor | None", int], torch.Tensor]


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


def _odd_halves(x: torch.Tensor, pairs: int, size: int) -> torch.Tensor:
    """Tokens of the odd blocks of ``pairs`` block pairs, as a (B, H, pairs, size, ...) view."""
    return x[:, :, : 2 * pairs * size].unflatten(2, (pairs, 2, size))[:, :, :, 1]


def _tail(x: torch.Tensor, start: int) -> torch.Tensor:
    """Tokens from ``start`` on, as a (B, H, 1, N - start, ...) view."""
    return x[:, :, start:].unsqueeze(2)


def torch_inter(phi_q, tree, level_weights, cumulative_gates, chunk_size):
    """Per chunk level j, the tokens of every odd block of 2^j chunks read the even block before it.

    Absent buckets are never touched: each level costs half the tokens, and the tokens sharing a
    bucket are strided views of the sequence, so no state is copied per chunk.
    """
    batch, heads, n, _ = phi_q.shape
    out = phi_q.new_zeros(batch, heads, n, tree.blocks[0].shape[-1])
    for j, blocks in enumerate(tree.blocks):
        size = chunk_size << j
        pairs, rest = divmod(n, 2 * size)
        # (token selector, the even blocks read): whole pairs of blocks, then a partial odd block
        # at the end that reads the whole even block before it.
        segments = []
        if pairs:
            segments.append((partial(_odd_halves, pairs=pairs, size=size), 0, 2 * pairs))
        if rest > size:
            segments.append((partial(_tail, start=2 * pairs * size + size), 2 * pairs, 2 * pairs + 1))
        for odd, first, stop in segments:
            scale = odd(level_weights[..., j])
            if cumulative_gates is not None:
                scale = scale * torch.exp(odd(cumulative_gates) - tree.ends[j][:, :, first:stop:2, None])
            odd(out).add_((odd(phi_q) * scale[..., None]) @ blocks[:, :, first:stop:2])
    return out


TORCH_PARTS = ChunkParts(intra=torch_intra, inter=torch_inter)


def fenwick_tree(phi_k: torch.Tensor, v: torch.Tensor, cumulative_gates: torch.Tensor | None, chunk_size: int) -> FenwickTree:
    """The block sums of every chunk level below the top: O(N) work by pairwise sums.

    A block's state is sum_s exp(G_end - G_s) phi_k(s) [v_s, 1]^T with G_end the cumulative gate
    at its last key; a query then applies exp(G_t - G_end), never a positive exponent.
    """
    batch, heads, n, features = phi_k.shape
    chunks = n // chunk_size
    values = F.pad(v, (0, 1), value=1.0).view(batch, heads, chunks, chunk_size, -1)
    k = phi_k.view(batch, heads, chunks, chunk_size, features)
    ends = None
    if cumulative_gates is not None:
        g = cumulative_gates.view(batch, heads, chunks, chunk_size)
        ends = g[..., -1]
        k = k * torch.exp(ends[..., None] - g)[..., None]
    blocks = [k.transpose(-1, -2) @ values]  # level 0: one chunk each
    all_ends = None if ends is None else [ends]
    for _ in range(1, (chunks - 1).bit_length()):
        # The next level pairs this one's blocks; an odd last block is never a whole bucket.
        below = blocks[-1]
        pairs = below.shape[2] // 2
        first, second = below[:, :, 0 : 2 * pairs : 2], below[:, :, 1 : 2 * pairs : 2]
        if all_ends is not None:
            first_end, second_end = all_ends[-1][:, :, 0 : 2 * pairs : 2], all_ends[-1][:, :, 1 : 2 * pairs : 2]
            first = first * torch.exp(second_end - first_end)[..., None, None]
            all_ends.append(second_end)
        blocks.append(first + second)
    return FenwickTree(blocks, all_ends)


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
    if n + pad > chunk_size:
        tree = fenwick_tree(phi_k, v, cumulative, chunk_size)
        between = level_weights[..., in_chunk_levels : in_chunk_levels + len(tree.blocks)]
        out = out + parts.inter(phi_q, tree, between, cumulative, chunk_size)
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
