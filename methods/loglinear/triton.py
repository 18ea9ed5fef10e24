"""Triton kernels for the two per-query products of the chunked form, forward and backward.

The PyTorch around the kernels (bottom of this file) pads the inputs to whole chunks, builds the
per-level bucket states and the per-query level scales (O(N) work, differentiated by autograd);
the kernels do what touches every query pair or every (query, level) pair: one program per (chunk,
batch x head), which reads features and values in tiles (``launch_options``) so that any head size
fits its registers and shared memory. ``intra`` recomputes the level weights of a chunk from the bit
pattern of positions, so no (C, C) tensor is ever stored; ``inter`` reads one state per chunk level. All arithmetic is
float32 (products in IEEE precision, not TF32), so the kernels match the naive reference to float32
rounding.

Import this module only after deciding TRITON_INTERPRET: triton reads it when the kernels are defined.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from methods._featuremap.common import DENOMINATOR_EPS, divide_by_denominator
from methods.base import MethodError
from methods.loglinear.chunk import check_chunk_size
from methods.loglinear.inputs import LogLinearInputs


@dataclass(frozen=True)
class FenwickTree:
    """Sums of aligned blocks of chunks: ``blocks[j]`` (B, H, chunks >> j, F, E + 1) sums 2^j chunks.

    With decay each block is decayed to its last key, whose cumulative gate is ``ends[j]``
    (B, H, chunks >> j); ``ends`` is None without decay.
    """

    blocks: list[torch.Tensor]
    ends: list[torch.Tensor] | None


# Every product here is float32 in IEEE precision, which Triton runs on the FMA units, not on tensor
# cores: an FMA product's operands and result sit in registers, as do a chunk's (C, C) matrices (scores,
# weights, their gradients). So features and values are read in tiles, _intra_backward keeps at most
# three (C, C) matrices alive, and each chunk size has the largest tile, warps and stages that compile
# without spilling on sm_80, sm_90 and sm_100 (scripts/triton_compile.py checks them;
# docs/triton_compile.md has the table, docs/measurements.md the wider choices that spilled). Other
# chunk sizes are refused: no launch of theirs is known to fit.
LAUNCH_TABLE = {16: (32, 4, 1), 64: (16, 8, 2)}  # chunk size: (largest tile, warps, stages)
# Option values scripts/triton_compile.py compiles beside the configs' own, so that every entry of the
# table is checked.
CHECKED_OPTIONS = {"chunk_size": tuple(LAUNCH_TABLE)}


def launch_options(chunk_size: int, dim: int, value_dim: int) -> dict:
    """The tiles, warps and stages every kernel here is launched with, for chunks of ``chunk_size`` rows,
    ``dim`` features and ``value_dim`` values; tl.dot needs tiles of at least 16."""
    if chunk_size not in LAUNCH_TABLE:
        raise MethodError(f"loglinear (triton): chunk_size {chunk_size} has no checked launch configuration; "
                          f"valid: {', '.join(map(str, LAUNCH_TABLE))} (or impl=chunk)")
    largest, warps, stages = LAUNCH_TABLE[chunk_size]
    return {"BD": _tile(dim, largest), "BE": _tile(value_dim, largest), "num_warps": warps, "num_stages": stages}


def _tile(size: int, largest: int) -> int:
    return min(largest, max(16, triton.next_power_of_2(size)))


@triton.jit
def _level_mask(t, LEVEL: tl.constexpr):
    """(C, C) whether key s is at LEVEL of query t inside a chunk (whose start is a multiple of C):
    bit_length(t XOR s) == LEVEL. Made from the position vector each time it is needed, so that no
    (C, C) matrix of levels holds registers across a kernel."""
    if LEVEL == 0:
        mask = t[:, None] == t[None, :]
    else:
        mask = ((t[:, None] >> (LEVEL - 1)) ^ (t[None, :] >> (LEVEL - 1))) == 1
    return mask


@triton.jit
def _chunk_weights(LAM, G, rows, HAS_GATES: tl.constexpr, C: tl.constexpr, NUM_LEVELS: tl.constexpr):
    """(C, C) causal weights lambda_t[level(t, s)] * exp(G_t - G_s), zero above the diagonal."""
    t = tl.arange(0, C)
    causal = t[None, :] <= t[:, None]
    weights = tl.zeros((C, C), dtype=tl.float32)
    for level in tl.static_range(NUM_LEVELS):
        lam = tl.load(LAM + rows * NUM_LEVELS + level)
        weights = tl.where(_level_mask(t, level), lam[:, None], weights)
    if HAS_GATES:
        g = tl.load(G + rows)
        weights = weights * tl.exp(tl.where(causal, g[:, None] - g[None, :], float("-inf")))
    return tl.where(causal, weights, 0.0)


@triton.jit
def _chunk_scores(Q, K, rows, D, C: tl.constexpr, BD: tl.constexpr):
    """(C, C) q k^T of a chunk's rows, summed over the features in tiles of BD."""
    scores = tl.zeros((C, C), dtype=tl.float32)
    for d0 in range(0, D, BD):
        d = d0 + tl.arange(0, BD)
        q = tl.load(Q + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
        k = tl.load(K + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
        scores += tl.dot(q, tl.trans(k), input_precision="ieee")
    return scores


@triton.jit
def _intra_forward(
    Q, K, V, LAM, G, NUM, DEN, N, D, E,
    HAS_GATES: tl.constexpr, C: tl.constexpr, NUM_LEVELS: tl.constexpr, BD: tl.constexpr, BE: tl.constexpr,
):
    chunk, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    rows = bh * N + chunk * C + tl.arange(0, C)
    a = _chunk_scores(Q, K, rows, D, C, BD) * _chunk_weights(LAM, G, rows, HAS_GATES, C, NUM_LEVELS)
    for e0 in range(0, E, BE):
        e = e0 + tl.arange(0, BE)
        v = tl.load(V + rows[:, None] * E + e[None, :], mask=e[None, :] < E, other=0.0)
        tl.store(NUM + rows[:, None] * E + e[None, :], tl.dot(a, v, input_precision="ieee"), mask=e[None, :] < E)
    tl.store(DEN + rows, tl.sum(a, 1))


@triton.jit
def _intra_backward(
    Q, K, V, LAM, G, DNUM, DDEN, DQ, DK, DV, DLAM, DG, N, D, E,
    HAS_GATES: tl.constexpr, C: tl.constexpr, NUM_LEVELS: tl.constexpr, BD: tl.constexpr, BE: tl.constexpr,
):
    # a = scores * weights; num = a v; den = a 1. In the order that keeps at most three (C, C)
    # matrices alive, so that a chunk of 64 fits the registers of 8 warps: dnum is read twice.
    chunk, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    rows = bh * N + chunk * C + tl.arange(0, C)
    scores = _chunk_scores(Q, K, rows, D, C, BD)
    da = tl.zeros((C, C), dtype=tl.float32) + tl.load(DDEN + rows)[:, None]
    for e0 in range(0, E, BE):
        e = e0 + tl.arange(0, BE)
        v = tl.load(V + rows[:, None] * E + e[None, :], mask=e[None, :] < E, other=0.0)
        dnum = tl.load(DNUM + rows[:, None] * E + e[None, :], mask=e[None, :] < E, other=0.0)
        da += tl.dot(dnum, tl.trans(v), input_precision="ieee")
    weights = _chunk_weights(LAM, G, rows, HAS_GATES, C, NUM_LEVELS)
    # weights = lambda_t[level] * decay (0 above the diagonal): d lambda_t[l] sums da * scores *
    # decay over the keys at level l.
    t = tl.arange(0, C)
    causal = t[None, :] <= t[:, None]
    da_scores = tl.where(causal, da * scores, 0.0)
    if HAS_GATES:
        g = tl.load(G + rows)
        da_scores = da_scores * tl.exp(tl.where(causal, g[:, None] - g[None, :], float("-inf")))
        # d/dG_t of exp(G_t - G_s) is +a, d/dG_s is -a.
        da_a = da * scores * weights
        tl.store(DG + rows, tl.sum(da_a, 1) - tl.sum(da_a, 0))
    for level in tl.static_range(NUM_LEVELS):
        tl.store(DLAM + rows * NUM_LEVELS + level, tl.sum(tl.where(_level_mask(t, level), da_scores, 0.0), 1))
    a = scores * weights
    for e0 in range(0, E, BE):
        e = e0 + tl.arange(0, BE)
        dnum = tl.load(DNUM + rows[:, None] * E + e[None, :], mask=e[None, :] < E, other=0.0)
        tl.store(DV + rows[:, None] * E + e[None, :], tl.dot(tl.trans(a), dnum, input_precision="ieee"),
                 mask=e[None, :] < E)
    dscores = da * weights
    for d0 in range(0, D, BD):
        d = d0 + tl.arange(0, BD)
        q = tl.load(Q + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
        k = tl.load(K + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
        tl.store(DQ + rows[:, None] * D + d[None, :], tl.dot(dscores, k, input_precision="ieee"),
                 mask=d[None, :] < D)
        tl.store(DK + rows[:, None] * D + d[None, :], tl.dot(tl.trans(dscores), q, input_precision="ieee"),
                 mask=d[None, :] < D)


@triton.jit
def _inter_forward(
    Q, S, Z, SCALE, NUM, DEN, N, D, E, J,
    C: tl.constexpr, BD: tl.constexpr, BE: tl.constexpr,
):
    chunk, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    rows = bh * N + chunk * C + tl.arange(0, C)
    state = (bh * (N // C) + chunk) * J
    for e0 in range(0, E, BE):
        e = e0 + tl.arange(0, BE)
        num = tl.zeros((C, BE), dtype=tl.float32)
        for j in range(J):
            scale = tl.load(SCALE + rows * J + j)
            for d0 in range(0, D, BD):
                d = d0 + tl.arange(0, BD)
                q = tl.load(Q + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
                s = tl.load(S + ((state + j) * D + d[:, None]) * E + e[None, :],
                            mask=(d[:, None] < D) & (e[None, :] < E), other=0.0)
                num += tl.dot(q * scale[:, None], s, input_precision="ieee")
        tl.store(NUM + rows[:, None] * E + e[None, :], num, mask=e[None, :] < E)
    den = tl.zeros((C,), dtype=tl.float32)
    for j in range(J):
        scale = tl.load(SCALE + rows * J + j)
        for d0 in range(0, D, BD):
            d = d0 + tl.arange(0, BD)
            q = tl.load(Q + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
            z = tl.load(Z + (state + j) * D + d, mask=d < D, other=0.0)
            den += tl.sum(q * scale[:, None] * z[None, :], 1)
    tl.store(DEN + rows, den)


@triton.jit
def _inter_backward(
    Q, S, Z, SCALE, DNUM, DDEN, DQ, DS, DZ, DSCALE, N, D, E, J,
    C: tl.constexpr, BD: tl.constexpr, BE: tl.constexpr, BJ: tl.constexpr,
):
    chunk, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    rows = bh * N + chunk * C + tl.arange(0, C)
    dden = tl.load(DDEN + rows)
    state = (bh * (N // C) + chunk) * J
    levels = tl.arange(0, BJ)
    # d scale_j sums over every feature tile: kept for all levels at once, stored at the end.
    dscale = tl.zeros((C, BJ), dtype=tl.float32)
    for d0 in range(0, D, BD):
        d = d0 + tl.arange(0, BD)
        q = tl.load(Q + rows[:, None] * D + d[None, :], mask=d[None, :] < D, other=0.0)
        dq = tl.zeros((C, BD), dtype=tl.float32)
        for j in range(J):
            scale = tl.load(SCALE + rows * J + j)
            scaled_q = q * scale[:, None]
            z = tl.load(Z + (state + j) * D + d, mask=d < D, other=0.0)
            tl.store(DZ + (state + j) * D + d, tl.sum(scaled_q * dden[:, None], 0), mask=d < D)
            # d(scaled_q): what the numerator and denominator send back to each query's features.
            dscaled = dden[:, None] * z[None, :]
            for e0 in range(0, E, BE):
                e = e0 + tl.arange(0, BE)
                state_mask = (d[:, None] < D) & (e[None, :] < E)
                dnum = tl.load(DNUM + rows[:, None] * E + e[None, :], mask=e[None, :] < E, other=0.0)
                s = tl.load(S + ((state + j) * D + d[:, None]) * E + e[None, :], mask=state_mask, other=0.0)
                tl.store(DS + ((state + j) * D + d[:, None]) * E + e[None, :],
                         tl.dot(tl.trans(scaled_q), dnum, input_precision="ieee"), mask=state_mask)
                dscaled += tl.dot(dnum, tl.trans(s), input_precision="ieee")
            dq += dscaled * scale[:, None]
            dscale += tl.where(levels[None, :] == j, tl.sum(dscaled * q, 1)[:, None], 0.0)
        tl.store(DQ + rows[:, None] * D + d[None, :], dq, mask=d[None, :] < D)
    tl.store(DSCALE + rows[:, None] * J + levels[None, :], dscale, mask=levels[None, :] < J)


class _Intra(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, level_weights, gates, chunk_size):
        batch, heads, n, dim = q.shape
        value_dim = v.shape[-1]
        num = q.new_empty(batch, heads, n, value_dim)
        den = q.new_empty(batch, heads, n)
        has_gates = gates is not None
        grid = (n // chunk_size, batch * heads)
        _intra_forward[grid](
            q, k, v, level_weights, gates if has_gates else q, num, den, n, dim, value_dim,
            HAS_GATES=has_gates, C=chunk_size, NUM_LEVELS=level_weights.shape[-1],
            **launch_options(chunk_size, dim, value_dim),
        )
        ctx.save_for_backward(q, k, v, level_weights, gates)
        ctx.chunk_size = chunk_size
        return num, den

    @staticmethod
    def backward(ctx, dnum, dden):
        q, k, v, level_weights, gates = ctx.saved_tensors
        batch, heads, n, dim = q.shape
        value_dim = v.shape[-1]
        dq, dk, dv, dlam = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
                            torch.empty_like(level_weights))
        has_gates = gates is not None
        dg = torch.empty_like(gates) if has_gates else None
        grid = (n // ctx.chunk_size, batch * heads)
        _intra_backward[grid](
            q, k, v, level_weights, gates if has_gates else q, dnum.contiguous(), dden.contiguous(),
            dq, dk, dv, dlam, dg if has_gates else q, n, dim, value_dim,
            HAS_GATES=has_gates, C=ctx.chunk_size, NUM_LEVELS=level_weights.shape[-1],
            **launch_options(ctx.chunk_size, dim, value_dim),
        )
        return dq, dk, dv, dlam, dg, None


class _Inter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, states, normalisers, scale):
        batch, heads, n, dim = q.shape
        chunks, levels, value_dim = states.shape[2], states.shape[3], states.shape[-1]
        num = q.new_empty(batch, heads, n, value_dim)
        den = q.new_empty(batch, heads, n)
        grid = (chunks, batch * heads)
        _inter_forward[grid](
            q, states, normalisers, scale, num, den, n, dim, value_dim, levels,
            C=n // chunks, **launch_options(n // chunks, dim, value_dim),
        )
        ctx.save_for_backward(q, states, normalisers, scale)
        return num, den

    @staticmethod
    def backward(ctx, dnum, dden):
        q, states, normalisers, scale = ctx.saved_tensors
        batch, heads, n, dim = q.shape
        chunks, levels, value_dim = states.shape[2], states.shape[3], states.shape[-1]
        dq, dstates, dnormalisers, dscale = (torch.empty_like(t) for t in (q, states, normalisers, scale))
        grid = (chunks, batch * heads)
        _inter_backward[grid](
            q, states, normalisers, scale, dnum.contiguous(), dden.contiguous(), dq, dstates, dnormalisers, dscale,
            n, dim, value_dim, levels, C=n // chunks, BJ=triton.next_power_of_2(levels),
            **launch_options(n // chunks, dim, value_dim),
        )
        return dq, dstates, dnormalisers, dscale


def triton_intra(phi_q, phi_k, v, level_weights, cumulative_gates, chunk_size):
    """``chunk.torch_intra`` as a Triton kernel: numerator and denominator as (B, H, N, E + 1)."""
    gates = None if cumulative_gates is None else cumulative_gates.contiguous()
    num, den = _Intra.apply(phi_q.contiguous(), phi_k.contiguous(), v.contiguous(), level_weights.contiguous(),
                            gates, chunk_size)
    return torch.cat([num, den[..., None]], -1)


def per_chunk_levels(
    tree: FenwickTree, level_weights: torch.Tensor, cumulative_gates: torch.Tensor | None, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each chunk's bucket state per chunk level (B,H,chunks,J,F,E+1), zero where absent, and the
    per-query scale (B,H,N,J): lambda_t[level] * exp(G_t - G_end of the bucket), zero where absent."""
    batch, heads, n = level_weights.shape[:3]
    chunks = n // chunk_size
    index = torch.arange(chunks, device=level_weights.device)
    states, scales = [], []
    for j, blocks in enumerate(tree.blocks):
        # Chunk i's block at level j is i >> j; when odd, its bucket is the block just before.
        present = ((index >> j) & 1).bool()
        before = ((index >> j) - 1).clamp_min(0)
        states.append(blocks[:, :, before] * present.view(-1, 1, 1))
        scale = level_weights[..., j].view(batch, heads, chunks, chunk_size) * present.view(-1, 1)
        if cumulative_gates is not None:
            gates = cumulative_gates.view(batch, heads, chunks, chunk_size)
            # Gates are <= 0, so G_t <= G_end for a present bucket; the clamp only keeps absent
            # ones (scale already 0, end of an unrelated block) from overflowing.
            scale = scale * torch.exp((gates - tree.ends[j][:, :, before, None]).clamp_max(0))
        scales.append(scale.view(batch, heads, n))
    return torch.stack(states, 3), torch.stack(scales, -1)


def triton_inter(phi_q, tree, level_weights, cumulative_gates, chunk_size):
    """``chunk.torch_inter`` as a Triton kernel over per-chunk gathered states; the key sums go apart."""
    states, scale = per_chunk_levels(tree, level_weights, cumulative_gates, chunk_size)
    num, den = _Inter.apply(phi_q.contiguous(), states[..., :-1].contiguous(), states[..., -1].contiguous(),
                            scale.contiguous())
    return torch.cat([num, den[..., None]], -1)


# -- the PyTorch around the kernels ------------------------------------------------------------
def fenwick_tree(phi_k: torch.Tensor, v: torch.Tensor, cumulative_gates: torch.Tensor | None,
                 chunk_size: int) -> FenwickTree:
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


def causal_parts(inputs: LogLinearInputs, chunk_size: int) -> torch.Tensor:
    """Causal numerator and denominator (B, H, N, E + 1) in float32."""
    phi_q, phi_k, v, level_weights, log_gates = inputs
    n = phi_q.shape[2]
    pad = -n % chunk_size
    # Zero rows past the end: padded keys add nothing, padded queries are cut off below.
    phi_q, phi_k, v, level_weights = (F.pad(t.float(), (0, 0, 0, pad)) for t in (phi_q, phi_k, v, level_weights))
    in_chunk_levels = chunk_size.bit_length()  # levels 0..c
    needed = max(in_chunk_levels, (n + pad - 1).bit_length() + 1)
    # Levels beyond the given ones only ever pair padding with padding: weight them 0.
    level_weights = F.pad(level_weights, (0, max(0, needed - level_weights.shape[-1])))
    cumulative = None if log_gates is None else F.pad(log_gates.float(), (0, pad)).cumsum(-1)

    out = triton_intra(phi_q, phi_k, v, level_weights[..., :in_chunk_levels].contiguous(), cumulative, chunk_size)
    if n + pad > chunk_size:
        tree = fenwick_tree(phi_k, v, cumulative, chunk_size)
        between = level_weights[..., in_chunk_levels : in_chunk_levels + len(tree.blocks)]
        out = out + triton_inter(phi_q, tree, between, cumulative, chunk_size)
    return out[:, :, :n]


def loglinear_attention_triton(inputs: LogLinearInputs, causal: bool = True, eps: float = DENOMINATOR_EPS,
                               chunk_size: int = 64) -> torch.Tensor:
    """``chunk.loglinear_attention_chunk``'s result with the per-query products in Triton; returns float32."""
    check_chunk_size(chunk_size)
    both = causal_parts(inputs, chunk_size)
    if not causal:
        reversed_pass = causal_parts(inputs.reversed(), chunk_size)
        # The diagonal is in both passes; count it once (its decay factor is exp(0) = 1).
        phi_q, phi_k, v, level_weights, _ = inputs
        diagonal = level_weights[..., 0].float() * (phi_q.float() * phi_k.float()).sum(-1)
        both = both + reversed_pass.flip(2) - diagonal[..., None] * F.pad(v.float(), (0, 1), value=1.0)
    return divide_by_denominator(both[..., :-1], both[..., -1], eps)
