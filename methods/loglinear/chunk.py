"""Log-linear attention in O(N log N): dense inside chunks, one float32 state per Fenwick level between them.

With a chunk size C = 2^c, a key s in an earlier chunk than query t has level
``l(t, s) = c + 1 + j`` with ``j + 1 = bit_length(chunk(t) XOR chunk(s))``, so earlier chunks fall
into whole-chunk Fenwick buckets: at chunk level j, chunk i reads the node (i >> j) - 1 of level j
(the 2^j chunks just before its own aligned block of 2^j) when bit j of i is set. Nodes are sums
over their chunks of phi_k [v, 1]^T (decayed to their last key), each level the pairwise sums of
the level below: O(N) to build, and each query reads at most one node per level: O(N log N).

Per chunk, with A = tril(phi_q phi_k^T) * lambda_t[level] * exp(G_t - G_s):
    num = A v + sum_j s_tj phi_q N_j,   den = A 1 + sum_j s_tj phi_q Z_j + eps,   o = num / den,
    s_tj = lambda_t[c + 1 + j] exp(G_t - G_end(node)),
where [N_j | Z_j] (F, E + 1) is the node read at level j (its key sums ride as one more column of
the small node states, never as a column of ones beside the (B, H, N, E) values).

As in _featuremap/chunk.py, the work goes block by block (_featuremap/plan.py) so that a block's
tensors stay in cache: the feature map is applied to a block's rows there, the weights of a chunk
are gathered from the bit pattern of positions, and the division happens on the block just
computed. Blocks are aligned runs of 2^b chunks, so that inside a block the queries reading level
j < b are strided views (the odd halves of its pairs of 2^j chunks) and for j >= b the whole block
reads one node or none. The backward is written out: queries first (their gradient, the in-chunk
keys' and values', and what each node receives), then the tree from the top level down, then the
keys' share through the chunk states. Not causal: a forward and a reversed causal pass, the diagonal counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import torch

from methods._featuremap.common import DENOMINATOR_EPS
from methods._featuremap.maps import Identity
from methods._featuremap.plan import ChunkRun, chunk_slots, plan_blocks, rows, token_rows
from methods.base import MethodError
from methods.loglinear.inputs import LogLinearInputs
from methods.loglinear.levels import level_matrix, levels_used

IDENTITY = Identity()


def check_chunk_size(chunk_size: int) -> None:
    """Chunks must be a power of two (so levels split into in-chunk and whole-chunk bits), at least 16."""
    if not isinstance(chunk_size, int) or chunk_size < 16 or chunk_size & (chunk_size - 1):
        raise MethodError(f"loglinear: chunk_size must be a power of two >= 16, got {chunk_size!r}")


@dataclass(frozen=True)
class Reader:
    """The queries of a block that read level j, and the nodes they read: ``rows(x)`` views a
    (heads, N, ...) tensor as (R, S, ...), one node per leading index; ``nodes`` indexes the level."""

    level: int
    block: ChunkRun
    pairs: int  # > 0: odd halves of pairs of 2^j chunks; 0: the whole block reads one node
    node: int  # the first node read

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        b = self.block
        span = x[b.heads, b.start : b.stop]
        if not self.pairs:
            return span
        size = b.length << self.level
        odd = span.unflatten(1, (self.pairs, 2, size))[:, :, 1]
        return odd.view(-1, size, *x.shape[2:])

    def nodes(self, level: torch.Tensor) -> torch.Tensor:
        """The nodes read, from a (heads, nodes, ...) tensor: (R, ...), a view."""
        b = self.block
        if not self.pairs:
            return level[b.heads, self.node]
        picked = level[b.heads, self.node : self.node + 2 * self.pairs : 2]
        return picked.view(-1, *level.shape[2:])


def readers(block: ChunkRun, num_levels: int) -> list[Reader]:
    """For each chunk level j, the block's queries that read it (none when no chunk has bit j)."""
    found = []
    for j in range(num_levels):
        if (1 << j) < block.chunks:
            found.append(Reader(j, block, block.chunks >> (j + 1), 2 * (block.first_chunk >> (j + 1))))
        elif block.first_chunk >> j & 1:
            found.append(Reader(j, block, 0, (block.first_chunk >> j) - 1))
    return found


# -- the public entry points ----------------------------------------------------------------------
def loglinear_attention_chunk(inputs: LogLinearInputs, causal: bool = True, eps: float = DENOMINATOR_EPS,
                              chunk_size: int = 64, feature_map=None) -> torch.Tensor:
    """Same result as ``naive.loglinear_attention`` in O(N log N) time; returns float32.

    ``inputs.phi_q``, ``inputs.phi_k`` are features, or with ``feature_map`` (a map of
    _featuremap/maps.py) the inputs that map turns into features block by block."""
    check_chunk_size(chunk_size)
    phi_q, phi_k, v, level_weights, log_gates = inputs
    batch, heads, n, _ = phi_q.shape
    if feature_map is None:
        feature_map = IDENTITY
        phi_q, phi_k = phi_q.float(), phi_k.float()
    cumulative = None if log_gates is None else log_gates.float().cumsum(-1)
    level_weights = level_weights.float()
    flat = lambda t: None if t is None else t.reshape(batch * heads, n, *t.shape[3:])  # noqa: E731
    args = (feature_map, chunk_size, eps)
    if causal:
        out, _ = _CausalLogLinear.apply(flat(phi_q), flat(phi_k), flat(v), flat(level_weights), flat(cumulative),
                                         True, *args)
        return out.view(batch, heads, n, -1)
    num, den = _CausalLogLinear.apply(flat(phi_q), flat(phi_k), flat(v), flat(level_weights), flat(cumulative),
                                      False, *args)
    # The reversed pass: its gates are the reversed sequence's own cumulative sums.
    back = LogLinearInputs(*map(flat, (phi_q, phi_k, v, level_weights, log_gates))).reversed(dim=1)
    reversed_gates = None if log_gates is None else back.log_gates.float().cumsum(-1)
    num_r, den_r = _CausalLogLinear.apply(back.phi_q, back.phi_k, back.v, back.level_weights, reversed_gates,
                                          False, *args)
    # The diagonal is in both passes; count it once (its decay factor is exp(0) = 1).
    phi_q_full, phi_k_full = (feature_map.full(t) for t in (phi_q, phi_k))
    diagonal = flat(level_weights[..., :1])[..., 0] * torch.linalg.vecdot(flat(phi_q_full), flat(phi_k_full))
    num = num + num_r.flip(1) - diagonal.unsqueeze(-1) * flat(v).float()
    den = den + den_r.flip(1) - diagonal + eps
    return (num / den.unsqueeze(-1)).view(batch, heads, n, -1)


# -- the causal core ----------------------------------------------------------------------------
@cache
def _level_index(length: int, device: torch.device) -> torch.Tensor:
    """(length, length) in-chunk levels of key s for query t, 0 above the diagonal (masked later);
    made once per length and device."""
    return level_matrix(length, device=device).clamp_min_(0)


def _decay(gates: torch.Tensor) -> torch.Tensor:
    """exp(G_t - G_s) for s <= t, 0 above the diagonal; gates (M, L) -> (M, L, L). Masked before
    exp, so that s > t (positive exponents) cannot overflow."""
    exponent = gates.unsqueeze(-1) - gates.unsqueeze(-2)
    return exponent.masked_fill_(torch.ones_like(exponent[0], dtype=torch.bool).triu_(1), float("-inf")).exp_()


class _CausalLogLinear(torch.autograd.Function):
    """(out, den) over (BH, N, .) inputs: with ``normalize`` out = num / den and den includes eps;
    otherwise out = num and den without eps (the halves of the non-causal form)."""

    @staticmethod
    def forward(ctx, x_q, x_k, v, lam, gates, normalize, feature_map, chunk_size, eps):
        bh, n, _ = x_q.shape
        e = v.shape[-1]
        f32 = dict(device=x_q.device, dtype=torch.float32)
        features = x_q.shape[-1] if feature_map.identity else feature_map.num_features
        phi_q = x_q if feature_map.identity else torch.empty(bh, n, features, **f32)
        phi_k = x_k if feature_map.identity else torch.empty(bh, n, features, **f32)
        in_chunk = chunk_size.bit_length()  # levels 0..c inside a chunk of 2^c
        full = n // chunk_size
        num_levels = (-(-n // chunk_size) - 1).bit_length()  # chunk levels any query reads
        plans = plan_blocks(bh, n, chunk_size, aligned=True)
        out = torch.empty(bh, n, e, **f32)
        den = torch.empty(bh, n, **f32)
        scores = torch.empty(bh, n, min(chunk_size, n), **f32)
        if not feature_map.identity:
            for blocks in plans:
                for block in blocks:
                    feature_map.forward(rows(x_q, block), rows(phi_q, block))
                    feature_map.forward(rows(x_k, block), rows(phi_k, block))
        tree, ends = _build_tree(phi_k, v, gates, plans, full, num_levels, chunk_size)
        for blocks in plans:
            for block in blocks:
                q, k = rows(phi_q, block), rows(phi_k, block)
                values = rows(v, block).float()
                a = rows(scores, block)[..., : block.length]
                torch.bmm(q, k.transpose(1, 2), out=a)
                weights = _chunk_weights(rows(lam, block), gates, block, in_chunk)
                # tril_, not a 0/1 product: a huge later key may score inf, and inf * 0 is nan.
                weighted = (a * weights).tril_()
                o = rows(out, block)
                torch.bmm(weighted, values, out=o)
                d = token_rows(den, block)
                torch.sum(weighted, -1, out=d)
                for reader in readers(block, num_levels):
                    scale, _ = _reader_scale(reader, lam, gates, ends, in_chunk)
                    read = torch.bmm(reader.rows(phi_q), reader.nodes(tree[reader.level]))
                    reader.rows(out).addcmul_(read[..., :e], scale.unsqueeze(-1))
                    reader.rows(den).addcmul_(read[..., e], scale)
                if normalize:
                    d.add_(eps)
                    o.div_(d.unsqueeze(-1))
        ctx.save_for_backward(x_q, x_k, v, lam, gates, phi_q, phi_k, out, den, scores, *tree, *ends)
        ctx.setup = (normalize, feature_map, chunk_size, num_levels)
        if normalize:
            ctx.mark_non_differentiable(den)
        return out, den

    @staticmethod
    def backward(ctx, grad_out, grad_den):
        x_q, x_k, v, lam, gates, phi_q, phi_k, out, den, scores, *rest = ctx.saved_tensors
        normalize, feature_map, chunk_size, num_levels = ctx.setup
        tree, ends = rest[:num_levels], rest[num_levels:] if gates is not None else None
        bh, n, _ = out.shape
        full = n // chunk_size
        blocks = [block for group in plan_blocks(bh, n, chunk_size, aligned=True) for block in group]
        grad_out = grad_out.contiguous()
        if not normalize:
            grad_den = torch.zeros_like(den) if grad_den is None else grad_den.contiguous()
        grads = _Gradients(phi_q, phi_k, v, lam, gates, scores, tree, ends, chunk_size.bit_length(), num_levels)
        # Queries first: their gradient, the in-chunk keys' and values', and what each node receives.
        grad_q = torch.empty_like(x_q)
        for block in blocks:
            if normalize:
                g = rows(grad_out, block).float() / token_rows(den, block).unsqueeze(-1)
                r = torch.linalg.vecdot(g, rows(out, block)).neg_()
            else:
                g, r = rows(grad_out, block).float(), token_rows(grad_den, block)
            dq = grads.inside_chunks(block, g, r)
            # d [num | den], the gradient every node product sends back.
            grads.reads(block, torch.cat([g, r.unsqueeze(-1)], -1), dq)
            feature_map.backward(rows(x_q, block), rows(phi_q, block), dq, rows(grad_q, block))
        # Then the tree from the top level down, then the keys' share through the chunk states.
        grad_chunks, grad_chunk_ends = _tree_backward(tree, ends, grads.grad_tree, grads.grad_ends)
        grad_k = grads.grad_phi_k if feature_map.identity else torch.empty_like(x_k)
        for block in blocks:
            k, dk = rows(phi_k, block), rows(grads.grad_phi_k, block)
            if block.first_chunk < full and grad_chunks is not None:
                _chunk_state_backward(k, rows(v, block).float(), gates, block, grad_chunks, grad_chunk_ends,
                                      dk, rows(grads.grad_v, block), grads.grad_gates, v.shape[-1])
            if not feature_map.identity:
                feature_map.backward(rows(x_k, block), k, dk, rows(grad_k, block))
        if gates is not None and grad_chunk_ends is not None:
            # A chunk state's end is the gate at its last token.
            grads.grad_gates[:, chunk_size - 1 : full * chunk_size : chunk_size] += grad_chunk_ends
        return (grad_q, grad_k.to(x_k.dtype), grads.grad_v.to(v.dtype), grads.grad_lam, grads.grad_gates,
                None, None, None, None)


class _Gradients:
    """The gradients the backward fills block by block (float32), from the forward's saved tensors."""

    def __init__(self, phi_q, phi_k, v, lam, gates, scores, tree, ends, in_chunk: int, num_levels: int) -> None:
        self.saved = (phi_q, phi_k, v, lam, gates, scores, tree, ends)
        self.in_chunk, self.num_levels = in_chunk, num_levels
        # The keys' feature gradients, in float32 until the chunk states have added theirs.
        self.grad_phi_k = torch.empty(phi_k.shape, device=phi_k.device, dtype=torch.float32)
        self.grad_v = torch.empty(v.shape, device=v.device, dtype=torch.float32)
        self.grad_lam = torch.zeros_like(lam)
        self.grad_gates = None if gates is None else torch.zeros_like(gates)
        self.grad_tree = [torch.zeros_like(t) for t in tree]
        self.grad_ends = None if gates is None else [torch.zeros_like(t) for t in ends]

    def inside_chunks(self, block: ChunkRun, g: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """d phi_q of the block's queries from the keys of their own chunk (returned); the in-chunk
        shares of the keys, values, level weights and gates (written or added)."""
        phi_q, phi_k, v, lam, gates, scores, _, _ = self.saved
        q, k = rows(phi_q, block), rows(phi_k, block)
        values = rows(v, block).float()
        a = rows(scores, block)[..., : block.length]
        weights = _chunk_weights(rows(lam, block), gates, block, self.in_chunk)
        weighted = (a * weights).tril_()
        grad_weighted = torch.bmm(g, values.transpose(1, 2)).add_(r.unsqueeze(-1)).tril_()
        grad_scores = grad_weighted * weights
        dq = torch.bmm(grad_scores, k)
        torch.bmm(grad_scores.transpose(1, 2), q, out=rows(self.grad_phi_k, block))
        torch.bmm(weighted.transpose(1, 2), g, out=rows(self.grad_v, block))
        # weights = lambda_t[level] * decay: lambda's share sums over the keys of each level.
        through_weights = grad_weighted * a
        if gates is not None:
            through_weights.mul_(_decay(token_rows(gates, block)))
            # d/dG_t of exp(G_t - G_s) is +weighted, d/dG_s is -weighted.
            exponent = grad_weighted * weighted
            token_rows(self.grad_gates, block).add_(exponent.sum(-1)).sub_(exponent.sum(-2))
        index = _level_index(block.length, q.device).expand_as(through_weights)
        rows(self.grad_lam, block)[..., : levels_used(block.length)].scatter_add_(2, index, through_weights.tril_())
        return dq

    def reads(self, block: ChunkRun, both: torch.Tensor, dq: torch.Tensor) -> None:
        """The share of the nodes the block's queries read, given d [num | den] ``both``: added to
        dq (in place), to the nodes, the level weights and the gates."""
        phi_q, _, _, lam, gates, _, tree, ends = self.saved
        dq_rows = dq.view(-1, block.stop - block.start, dq.shape[-1])  # (heads, rows, F)
        for reader in readers(block, self.num_levels):
            scale, decay = _reader_scale(reader, lam, gates, ends, self.in_chunk)
            node = reader.nodes(tree[reader.level])
            back = torch.bmm(_reader_rows(reader, both), node.transpose(1, 2))  # (R, S, F)
            grad_scale = torch.linalg.vecdot(back, reader.rows(phi_q))
            _reader_rows(reader, dq_rows).addcmul_(back, scale.unsqueeze(-1))
            reader.nodes(self.grad_tree[reader.level]).baddbmm_(
                reader.rows(phi_q).transpose(1, 2), _reader_rows(reader, both) * scale.unsqueeze(-1))
            if gates is None:
                reader.rows(self.grad_lam)[..., self.in_chunk + reader.level].add_(grad_scale)
            else:
                reader.rows(self.grad_lam)[..., self.in_chunk + reader.level].addcmul_(grad_scale, decay)
                through = grad_scale * scale  # d/d(exponent G_t - G_end)
                reader.rows(self.grad_gates).add_(through)
                reader.nodes(self.grad_ends[reader.level]).sub_(through.sum(-1))


def _chunk_weights(lam_rows: torch.Tensor, gates: torch.Tensor | None, block: ChunkRun, in_chunk: int) -> torch.Tensor:
    """(M, L, L) weights lambda_t[level(t, s)] (times exp(G_t - G_s) with decay); not yet masked."""
    index = _level_index(block.length, lam_rows.device)
    weights = lam_rows[..., : levels_used(block.length)].gather(2, index.expand(lam_rows.shape[0], -1, -1))
    if gates is not None:
        weights.mul_(_decay(token_rows(gates, block)))
    return weights


def _reader_rows(reader: Reader, block_local: torch.Tensor) -> torch.Tensor:
    """``reader.rows`` of a block-local (heads in block * chunks, length, X) tensor."""
    b = reader.block
    as_heads = block_local.reshape(b.heads.stop - b.heads.start, b.stop - b.start, block_local.shape[-1])
    local = replace(b, heads=slice(None), start=0, stop=b.stop - b.start)
    return Reader(reader.level, local, reader.pairs, reader.node).rows(as_heads)


def _reader_scale(reader: Reader, lam, gates, ends, in_chunk: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(s_tj, exp(G_t - G_end(node))) of the reader's queries, (R, S) each:
    s_tj = lambda_t[c + 1 + j] * exp(G_t - G_end(node)); the decay is None without gates."""
    scale = reader.rows(lam)[..., in_chunk + reader.level]
    if gates is None:
        return scale, None
    # Gates are <= 0, so G_t <= G_end: never a positive exponent.
    decay = torch.exp(reader.rows(gates) - reader.nodes(ends[reader.level]).unsqueeze(-1))
    return scale * decay, decay


def _build_tree(phi_k, v, gates, plans, full: int, num_levels: int, chunk_size: int):
    """The nodes [N | Z] (BH, full >> j, F, E + 1) of every chunk level, and with decay the
    cumulative gate at each node's last key (BH, full >> j)."""
    bh, n, features = phi_k.shape
    e = v.shape[-1]
    if not num_levels:
        return [], []
    chunks = torch.empty(bh, full, features, e + 1, device=phi_k.device, dtype=torch.float32)
    chunk_ends = None if gates is None else gates[:, chunk_size - 1 : full * chunk_size : chunk_size]
    for blocks in plans:
        for block in blocks:
            if block.first_chunk >= full:  # the shorter last chunk: nothing reads it
                continue
            k = _chunk_keys(rows(phi_k, block), gates, block, chunk_ends)
            state = chunk_slots(chunks, block).view(-1, features, e + 1)
            torch.bmm(k.transpose(1, 2), rows(v, block).float(), out=state[..., :e])
            torch.sum(k, 1, out=state[..., e])
    tree, ends = [chunks], [] if gates is None else [chunk_ends]
    for _ in range(1, num_levels):
        below = tree[-1]
        pairs = below.shape[1] // 2
        first, second = below[:, 0 : 2 * pairs : 2], below[:, 1 : 2 * pairs : 2]
        if gates is not None:
            first_end, second_end = ends[-1][:, 0 : 2 * pairs : 2], ends[-1][:, 1 : 2 * pairs : 2]
            first = first * torch.exp(second_end - first_end)[..., None, None]
            ends.append(second_end)
        tree.append(first + second)
    return tree, ends


def _chunk_keys(k: torch.Tensor, gates, block: ChunkRun, chunk_ends) -> torch.Tensor:
    """A block's keys decayed to the end of their chunk: k_s exp(G_end - G_s) (or k as it is)."""
    if gates is None:
        return k
    g = token_rows(gates, block)
    end = chunk_slots(chunk_ends, block).reshape(-1, 1)
    return k * torch.exp(end - g).unsqueeze(-1)


def _tree_backward(tree, ends, grad_tree, grad_ends):
    """The nodes' gradients sent down to the chunk states (and to the nodes' ends with decay)."""
    if not tree:
        return None, None
    grad_tree = list(grad_tree)
    for j in range(len(tree) - 1, 0, -1):
        below, grad = tree[j - 1], grad_tree[j]
        pairs = grad.shape[1]
        grad_first, grad_second = grad_tree[j - 1][:, 0 : 2 * pairs : 2], grad_tree[j - 1][:, 1 : 2 * pairs : 2]
        grad_second += grad
        if ends is None:
            grad_first += grad
            continue
        first_end, second_end = ends[j - 1][:, 0 : 2 * pairs : 2], ends[j - 1][:, 1 : 2 * pairs : 2]
        factor = torch.exp(second_end - first_end)
        grad_first += grad * factor[..., None, None]
        through = (grad * below[:, 0 : 2 * pairs : 2]).sum((-2, -1)) * factor
        grad_ends[j - 1][:, 1 : 2 * pairs : 2] += through + grad_ends[j]  # a node's end is its second half's
        grad_ends[j - 1][:, 0 : 2 * pairs : 2] -= through
    return grad_tree[0], None if ends is None else grad_ends[0]


def _chunk_state_backward(k, values, gates, block, grad_chunks, grad_chunk_ends, dk, dv, grad_gates, e) -> None:
    """Add the chunk states' share to a block's key and value gradients (in place)."""
    features = k.shape[-1]
    grad_state = chunk_slots(grad_chunks, block).reshape(-1, features, e + 1)
    decayed = k
    if gates is not None:
        g = token_rows(gates, block)
        chunk_ends = gates[:, block.length - 1 :: block.length]
        end = chunk_slots(chunk_ends, block).reshape(-1, 1)
        weight = torch.exp(end - g)
        decayed = k * weight.unsqueeze(-1)
    # state = decayed^T [v, 1]: d decayed = [v, 1] d state^T, d v = decayed d N.
    grad_decayed = torch.baddbmm(grad_state[..., e].unsqueeze(1), values, grad_state[..., :e].transpose(1, 2))
    dv.baddbmm_(decayed, grad_state[..., :e])
    if gates is None:
        dk.add_(grad_decayed)
        return
    dk.addcmul_(grad_decayed, weight.unsqueeze(-1))
    through = torch.linalg.vecdot(grad_decayed, decayed)  # d/d(G_end - G_s)
    token_rows(grad_gates, block).sub_(through)
    chunk_slots(grad_chunk_ends, block).add_(through.sum(-1).view(-1, block.chunks))
