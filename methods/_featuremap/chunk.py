"""Attention from features in O(N) memory: dense inside chunks, float32 running sums between them.

Causal (``causal_feature_attention``): the sequence is cut into chunks of ``chunk_size``. Inside a
chunk the (L, L) score block A = tril(phi_q phi_k^T) is dense; keys of earlier chunks enter
through the running sums S = sum_j phi_k_j v_j^T (F, E) and z = sum_j phi_k_j (F) before each
chunk. Per chunk: num = A v + phi_q S, den = A 1 + phi_q z + eps, o = num / den.

The work goes block by block (plan.py: about SEGMENT_TOKENS tokens of a few heads, or a run of one
long head's chunks), so that everything one block touches stays in cache: the feature maps (maps.py)
are applied to the block's rows there and written once into the features saved for the backward,
the denominator is a row sum of the score block and a matrix-vector product (no value column of
ones, no padded copy of v), and the division happens on the block just computed. A length that is
not a multiple of the chunk ends in one shorter chunk, never in padding. The backward is written
out (autograd's would add a pass over every (L, L) block for each add and mask, and make d phi
tensors of the full size): with g = do / den and r = -(do . o) / den per row,

    dA = tril(g v^T + r 1^T)            d phi_q = dA phi_k + g S^T + r z^T
    d phi_k = dA^T phi_q + v T^T + u    d v = A^T g + phi_k T

where T, u are the sums over later chunks of phi_q^T g and phi_q^T r.

Not causal (``full_feature_attention``): o = phi_q (phi_k^T v) / (phi_q . sum phi_k + eps) on whole
tensors, its backward the same formulas without the chunks.
"""

from __future__ import annotations

import torch

from methods._featuremap.common import DENOMINATOR_EPS, scaled_eps
from methods._featuremap.maps import Identity
from methods._featuremap.plan import ChunkRun, chunk_slots, plan_blocks, rows, token_rows

IDENTITY = Identity()


def feature_attention_chunk(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    eps: float | torch.Tensor = DENOMINATOR_EPS,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Same result as ``naive.feature_attention`` in O(N) memory; inputs of any float dtype, returns float32."""
    phi_q, phi_k = phi_q.float(), phi_k.float()
    if causal:
        return causal_feature_attention(phi_q, phi_k, v, IDENTITY, IDENTITY, eps, chunk_size)
    return full_feature_attention(phi_q, phi_k, v, eps)


# -- causal: blocks of chunks (plan.py) --------------------------------------------------------------
def causal_feature_attention(
    x_q: torch.Tensor,
    x_k: torch.Tensor,
    v: torch.Tensor,
    query_map,
    key_map,
    eps: float | torch.Tensor = DENOMINATOR_EPS,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Causal attention of the features ``query_map(x_q)``, ``key_map(x_k)`` (maps.py) with v,
    (B, H, N, .) each, the maps applied block by block; eps a number or broadcastable to (B, H, N),
    scaled by the factors the maps pull out. Returns float32 (B, H, N, E)."""
    batch, heads, n, _ = x_q.shape
    flat = lambda t: t.reshape(batch * heads, n, t.shape[-1])  # noqa: E731  (a view when it can be)
    eps_rows = None
    if isinstance(eps, torch.Tensor):
        eps_rows, eps = eps.float().expand(batch, heads, n).reshape(batch * heads, n), 1.0
    out = _CausalFeatureAttention.apply(flat(x_q), flat(x_k), flat(v), eps_rows, eps, query_map, key_map, chunk_size)
    return out.view(batch, heads, n, -1)


def _strict_triangle(chunks: int, upper: bool, device: torch.device) -> torch.Tensor:
    """(chunks, chunks) ones strictly below (or above) the diagonal."""
    ones = torch.ones(chunks, chunks, device=device)
    return ones.triu(1) if upper else ones.tril(-1)


def _exclusive_sums(per_chunk: torch.Tensor, out: torch.Tensor, carry: torch.Tensor | None,
                    reverse: bool) -> torch.Tensor:
    """out[:, c] = carry + the sum of per_chunk[:, c'] over the block's chunks c' < c (c' > c when
    ``reverse``), over dim 1 of (heads, chunks, ...) tensors; returns the carry past the block.
    One product with a triangle of ones: a loop of adds costs a call per chunk, and torch.cumsum
    over this dim is several times slower still."""
    heads, chunks = per_chunk.shape[:2]
    triangle = _strict_triangle(chunks, reverse, per_chunk.device).expand(heads, chunks, chunks)
    flat_out = out.view(heads, chunks, -1)
    torch.bmm(triangle, per_chunk.reshape(heads, chunks, -1), out=flat_out)
    edge = 0 if reverse else -1
    if carry is not None:
        flat_out.add_(carry.reshape(heads, 1, -1))
    return out[:, edge] + per_chunk[:, edge]


class _CausalFeatureAttention(torch.autograd.Function):
    """o (BH, N, E) from x_q, x_k (BH, N, D) and v (BH, N, E); see the module docstring."""

    @staticmethod
    def forward(ctx, x_q, x_k, v, eps_rows, eps, query_map, key_map, chunk_size):
        bh, n, _ = x_q.shape
        e = v.shape[-1]
        plans = plan_blocks(bh, n, chunk_size)
        length = plans[0][0].length
        num_chunks = -(-n // length)
        f32 = dict(device=x_q.device, dtype=torch.float32)
        phi_q = x_q if query_map.identity else torch.empty(bh, n, query_map.num_features, **f32)
        phi_k = x_k if key_map.identity else torch.empty(bh, n, key_map.num_features, **f32)
        features = phi_q.shape[-1]
        out = torch.empty(bh, n, e, **f32)
        den = torch.empty(bh, n, **f32)
        scores = torch.empty(bh, n, length, **f32)
        # The sums before each chunk; a single chunk has none.
        states = torch.empty(bh, num_chunks, features, e, **f32) if num_chunks > 1 else None
        key_sums = torch.empty(bh, num_chunks, features, **f32) if num_chunks > 1 else None
        for blocks in plans:
            carry_state = carry_sum = None
            for i, block in enumerate(blocks):
                q, k = rows(phi_q, block), rows(phi_k, block)
                log_factor = None
                if not query_map.identity:
                    log_factor = query_map.forward(rows(x_q, block), q)
                if not key_map.identity:
                    key_factor = key_map.forward(rows(x_k, block), k)
                    if key_factor is not None:
                        log_factor = key_factor if log_factor is None else log_factor + key_factor
                values = rows(v, block).float()
                a = rows(scores, block)[..., : block.length]
                # tril_, not a 0/1 product: a huge later key may score inf, and inf * 0 is nan.
                torch.bmm(q, k.transpose(1, 2), out=a).tril_()
                o = rows(out, block)
                torch.bmm(a, values, out=o)
                d = token_rows(den, block)
                torch.sum(a, -1, out=d)
                if states is not None:
                    before = chunk_slots(states, block)
                    sums_before = chunk_slots(key_sums, block)
                    chunk_states = torch.bmm(k.transpose(1, 2), values).view(before.shape)
                    chunk_sums = k.sum(1).view(sums_before.shape)
                    last = i == len(blocks) - 1
                    carry_state = _exclusive_sums(chunk_states, before, None if i == 0 else carry_state, reverse=False)
                    carry_sum = _exclusive_sums(chunk_sums, sums_before, None if i == 0 else carry_sum, reverse=False)
                    if last:
                        carry_state = carry_sum = None
                    o.baddbmm_(q, before.view(-1, features, e))
                    d.unsqueeze(-1).baddbmm_(q, sums_before.reshape(-1, features, 1))
                base = eps if eps_rows is None else token_rows(eps_rows, block)
                # eps scaled by the factors pulled out of the features
                d.add_(base if log_factor is None else scaled_eps(log_factor.expand(d.shape), base))
                o.div_(d.unsqueeze(-1))
        ctx.save_for_backward(x_q, x_k, v, phi_q, phi_k, out, den, scores, states, key_sums)
        ctx.maps, ctx.chunk_size = (query_map, key_map), chunk_size
        ctx.eps_needs_grad = eps_rows is not None and ctx.needs_input_grad[3]
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x_q, x_k, v, phi_q, phi_k, out, den, scores, states, key_sums = ctx.saved_tensors
        query_map, key_map = ctx.maps
        bh, n, e = out.shape
        features = phi_q.shape[-1]
        grad_out = grad_out.contiguous()
        grad_q, grad_k, grad_v = torch.empty_like(x_q), torch.empty_like(x_k), torch.empty_like(v)
        grad_den = torch.empty_like(den) if ctx.eps_needs_grad else None
        for blocks in plan_blocks(bh, n, ctx.chunk_size):
            carry_state = carry_sum = None
            for i in range(len(blocks) - 1, -1, -1):
                block = blocks[i]
                q, k, o = rows(phi_q, block), rows(phi_k, block), rows(out, block)
                values = rows(v, block).float()
                a = rows(scores, block)[..., : block.length]
                d = token_rows(den, block).unsqueeze(-1)
                g = rows(grad_out, block).float() / d
                r = torch.linalg.vecdot(g, o).neg_()  # d den, per row
                if grad_den is not None:
                    token_rows(grad_den, block).copy_(r)
                grad_scores = torch.bmm(g, values.transpose(1, 2)).add_(r.unsqueeze(-1)).tril_()
                # Gradients go straight into the outputs' rows where no map or cast follows.
                dq = _scratch_or_rows(grad_q, block, query_map, features)
                dk = _scratch_or_rows(grad_k, block, key_map, features)
                dv = rows(grad_v, block) if grad_v.dtype == torch.float32 else torch.empty_like(values)
                torch.bmm(grad_scores, k, out=dq)
                torch.bmm(grad_scores.transpose(1, 2), q, out=dk)
                torch.bmm(a.transpose(1, 2), g, out=dv)
                if states is not None:
                    before = chunk_slots(states, block)
                    sums_before = chunk_slots(key_sums, block)
                    dq.baddbmm_(g, before.view(-1, features, e).transpose(1, 2))
                    dq.addcmul_(r.unsqueeze(-1), sums_before.reshape(-1, 1, features))
                    # What each chunk's state sends back: the sums over the later chunks that read it.
                    reached = torch.bmm(q.transpose(1, 2), g).view(before.shape)
                    reached_sums = torch.bmm(q.transpose(1, 2), r.unsqueeze(-1)).view(sums_before.shape)
                    after, sums_after = torch.empty_like(reached), torch.empty_like(reached_sums)
                    first = i == 0
                    carry_state = _exclusive_sums(reached, after, carry_state, reverse=True)
                    carry_sum = _exclusive_sums(reached_sums, sums_after, carry_sum, reverse=True)
                    if first:
                        carry_state = carry_sum = None
                    after = after.view(-1, features, e)
                    dk.baddbmm_(values, after.transpose(1, 2)).add_(sums_after.view(-1, 1, features))
                    dv.baddbmm_(k, after)
                for x, phi, grad, grad_x, phi_map in ((x_q, q, dq, grad_q, query_map), (x_k, k, dk, grad_k, key_map)):
                    if not _direct(grad_x, phi_map):
                        phi_map.backward(rows(x, block), phi, grad, rows(grad_x, block))
                if grad_v.dtype != torch.float32:
                    rows(grad_v, block).copy_(dv)
        return grad_q, grad_k, grad_v, grad_den, None, None, None, None


def _direct(out: torch.Tensor, feature_map) -> bool:
    """Whether a feature gradient can be written into the input's gradient as it is computed."""
    return feature_map.identity and out.dtype == torch.float32


def _scratch_or_rows(out: torch.Tensor, block: ChunkRun, feature_map, features: int) -> torch.Tensor:
    """Where a block's feature gradient goes: the input gradient's rows (given features in
    float32) or scratch for the map's backward."""
    if _direct(out, feature_map):
        return rows(out, block)
    return torch.empty(block.matrices, block.length, features, device=out.device, dtype=torch.float32)


# -- not causal: whole tensors -------------------------------------------------------------------
def full_feature_attention(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, eps: float | torch.Tensor = DENOMINATOR_EPS
) -> torch.Tensor:
    """o = phi_q (phi_k^T v) / (phi_q . sum_j phi_k_j + eps); phi float32 (B,H,N,F), v (B,H,N,E);
    eps a number or broadcastable to (B,H,N). Returns float32."""
    eps_rows = None
    if isinstance(eps, torch.Tensor):
        eps_rows, eps = eps.float().expand(phi_q.shape[:3]), 0.0
    return _FullFeatureAttention.apply(phi_q, phi_k, v, eps_rows, eps)


class _FullFeatureAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, phi_q, phi_k, v, eps_rows, eps):
        values = v.float()
        state = phi_k.transpose(-1, -2) @ values  # (B, H, F, E)
        key_sum = phi_k.sum(-2, keepdim=True).transpose(-1, -2)  # (B, H, F, 1)
        out = phi_q @ state
        den = (phi_q @ key_sum).squeeze(-1)
        den.add_(eps if eps_rows is None else eps_rows)
        out.div_(den.unsqueeze(-1))
        ctx.save_for_backward(phi_q, phi_k, v, state, key_sum, out, den)
        ctx.eps_needs_grad = eps_rows is not None and ctx.needs_input_grad[3]
        return out

    @staticmethod
    def backward(ctx, grad_out):
        phi_q, phi_k, v, state, key_sum, out, den = ctx.saved_tensors
        g = grad_out.float() / den.unsqueeze(-1)
        r = torch.linalg.vecdot(g, out).neg_()
        grad_q = (g @ state.transpose(-1, -2)).addcmul_(r.unsqueeze(-1), key_sum.transpose(-1, -2))
        grad_state = phi_q.transpose(-1, -2) @ g  # (B, H, F, E)
        grad_key_sum = (phi_q.transpose(-1, -2) @ r.unsqueeze(-1)).transpose(-1, -2)  # (B, H, 1, F)
        grad_k = (v.float() @ grad_state.transpose(-1, -2)).add_(grad_key_sum)
        grad_v = (phi_k @ grad_state).to(v.dtype)
        grad_eps = r if ctx.eps_needs_grad else None
        return grad_q.to(phi_q.dtype), grad_k.to(phi_k.dtype), grad_v, grad_eps, None
