"""Attention from features with Triton kernels, forward and backward (see ``triton_kernels.py``).

Forward, with A = phi_q phi_k^T (lower triangular when causal): num = A v, den = A 1 + eps, o = num / den.
Backward, with g_i = do_i / den_i and r_i = -(do_i . o_i) / den_i (so that dA_ij = g_i . v_j + r_i):
    d phi_q = (g v^T + r 1^T) masked @ phi_k       prefix states of phi_k^T v and phi_k
    d phi_k = (v g^T + 1 r^T) masked @ phi_q       suffix states of phi_q^T g and r phi_q
    d v     = (phi_k phi_q^T) masked @ g           suffix state of phi_q^T g
Memory is O(N): per-chunk states of size (F, E), no (N, N) matrix.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from methods._featuremap import triton_kernels as kernels
from methods._featuremap.common import DENOMINATOR_EPS
from methods.base import MethodError, triton_unusable_reason

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# tl.dot needs every side of a tile to be at least 16 on the GPU.
MIN_BLOCK = 16
# batch * heads is the third grid axis, which CUDA caps at 2^16 - 1 programs.
MAX_BATCH_HEADS = 65535
# Chunks of 64 rows, and per precision of the products the largest tile of F and E, the warps and the
# stages that compile without spilling on sm_80, sm_90 and sm_100 (scripts/triton_compile.py checks
# them; docs/triton_compile.md has the table and the spills it accepts). float32 products in IEEE
# precision run on the FMA units, whose operands sit in registers, so their tiles are narrower than
# those of bfloat16 and TF32 products, which run on tensor cores; the wider tiles that spilled:
# docs/measurements.md.
# Narrower tiles cost recomputing the chunk's scores once per value tile (attend_over_features).
CHUNK = 64
LAUNCH_TABLE = {"ieee": (16, 8, 3), "tf32": (32, 8, 3)}


def feature_attention_triton(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    eps: float | torch.Tensor = DENOMINATOR_EPS,
    block_size: int | None = None,
) -> torch.Tensor:
    """Same result as ``naive.feature_attention`` in O(N) memory; returns the dtype of phi_q.

    ``eps`` is a number or a tensor broadcastable to (B, H, N) (then it gets a gradient too).
    ``block_size`` (a power of two, at least 16) is the largest chunk and the largest tile of F and E;
    None takes CHUNK and LAUNCH_TABLE's, which fit every GPU the suite targets.
    """
    _check_inputs(phi_q, phi_k, v, eps, block_size)
    eps = torch.as_tensor(eps, dtype=torch.float32, device=phi_q.device)
    return _FeatureAttention.apply(phi_q, phi_k, v, eps, bool(causal), block_size)


def _check_inputs(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, eps: object, block_size: int) -> None:
    """One clear error for anything the kernels cannot serve."""
    for label, t in (("phi_q", phi_q), ("phi_k", phi_k), ("v", v)):
        if t.dim() != 4:
            raise MethodError(f"feature attention: {label} must be (batch, heads, N, dim), got {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise MethodError(
                f"feature attention (triton): {label} has dtype {t.dtype}; supported: float32, bfloat16, float16"
            )
        if t.device != phi_q.device:
            raise MethodError(f"feature attention: {label} is on {t.device}, phi_q on {phi_q.device}")
    if phi_q.shape != phi_k.shape:
        raise MethodError(f"feature attention: phi_q {tuple(phi_q.shape)} and phi_k {tuple(phi_k.shape)} differ")
    if v.shape[:3] != phi_q.shape[:3]:
        raise MethodError(
            f"feature attention: v {tuple(v.shape)} must share (batch, heads, N) with phi_q {tuple(phi_q.shape)}"
        )
    if min(phi_q.shape[2], phi_q.shape[3], v.shape[3]) < 1:
        raise MethodError(
            f"feature attention: N, F and E must be at least 1, got {tuple(phi_q.shape)}, {tuple(v.shape)}"
        )
    if isinstance(eps, torch.Tensor):
        rows = phi_q.shape[:3]
        try:
            fits = torch.broadcast_shapes(eps.shape, rows) == rows
        except RuntimeError:
            fits = False
        if not fits:
            raise MethodError(
                f"feature attention: eps of shape {tuple(eps.shape)} does not broadcast to (B, H, N) = "
                f"{tuple(rows)}; pass a number or a tensor that does"
            )
    if phi_q.shape[0] * phi_q.shape[1] > MAX_BATCH_HEADS:
        raise MethodError(
            f"feature attention (triton): batch * heads = {phi_q.shape[0] * phi_q.shape[1]} exceeds "
            f"{MAX_BATCH_HEADS}, the most one CUDA grid axis takes; split the batch"
        )
    if block_size is not None and (
        not isinstance(block_size, int) or block_size < MIN_BLOCK or block_size & (block_size - 1)
    ):
        raise MethodError(
            f"feature attention (triton): block_size must be a power of two >= {MIN_BLOCK}, got {block_size}"
        )
    reason = triton_unusable_reason(phi_q.device)
    if reason:
        raise MethodError(f"feature attention (triton): {reason}")


def _dot_config(*dtypes: torch.dtype) -> tuple[tl.dtype, tl.dtype, str]:
    """(operand dtype, dot dtype, dot precision) of every tl.dot in the kernels.

    bfloat16 inputs multiply natively; float32 stays exact (no TF32); float16 is widened to float32
    (TF32 products) because do/den underflows float16's range. Under TRITON_INTERPRET=1 bfloat16
    operands are rounded as on the GPU but multiplied as float32: Triton's interpreter multiplies
    their raw bits.
    """
    if all(d == torch.bfloat16 for d in dtypes):
        dot_dtype = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16
        return tl.bfloat16, dot_dtype, "tf32"  # the precision only matters for float32 operands
    if torch.float32 in dtypes:
        return tl.float32, tl.float32, "ieee"
    return tl.float32, tl.float32, "tf32"


class _Launcher:
    """Shapes, tile sizes and dot settings of one call, shared by its forward and backward."""

    def __init__(self, phi_q: torch.Tensor, v: torch.Tensor, causal: bool, block_size: int | None, dot: tuple):
        batch, heads, self.n, self.f = phi_q.shape
        self.e = v.shape[-1]
        self.bh = batch * heads
        self.causal = causal
        self.operand_dtype, self.dot_dtype, self.dot_precision = dot
        self.bt, self.bf, self.be, self.num_warps, self.num_stages = launch_config(
            self.n, self.f, self.e, self.dot_precision, block_size)
        self.num_chunks = triton.cdiv(self.n, self.bt)
        self.num_states = self.num_chunks if causal else 1
        self.device = phi_q.device

    def states(self, key: torch.Tensor, value: torch.Tensor, weight: torch.Tensor | None, reverse: bool):
        """Per-chunk (or total) sums of key^T value (BH, S, F, E) and of weight * key (BH, S, F)."""
        state = torch.empty(self.bh, self.num_states, self.f, self.e, device=self.device, dtype=torch.float32)
        key_sum = torch.empty(self.bh, self.num_states, self.f, device=self.device, dtype=torch.float32)
        grid = (triton.cdiv(self.f, self.bf), triton.cdiv(self.e, self.be), self.bh)
        kernels.chunk_states_kernel[grid](
            key, value, key if weight is None else weight, state, key_sum,
            self.n, self.f, self.e, self.num_chunks,
            CAUSAL=self.causal, REVERSE=reverse, WEIGHTED=weight is not None, **self._tiles(),
        )  # fmt: skip
        return state, key_sum

    def over_features(self, query, key, value, state, key_sum, out, denominator, eps, reverse, normalize) -> None:
        """out = query @ state + mask(query key^T) @ value; if ``normalize``, divided by the
        denominator (written to ``denominator``) with ``eps`` (BH, N) added."""
        grid = (self.num_chunks, triton.cdiv(self.e, self.be), self.bh)
        kernels.attend_over_features_kernel[grid](
            query, key, value, state, key_sum, out, denominator, eps,
            self.n, self.f, self.e,
            CAUSAL=self.causal, REVERSE=reverse, NORMALIZE=normalize, **self._tiles(),
        )  # fmt: skip

    def over_values(self, a, b, c, weight, state, key_sum, out, reverse, weight_on_a) -> None:
        """out = a @ state^T + wa * key_sum + mask(a b^T + wa wb^T) @ c, with w on a or on b."""
        grid = (self.num_chunks, triton.cdiv(self.f, self.bf), self.bh)
        kernels.attend_over_values_kernel[grid](
            a, b, c, weight, state, key_sum, out,
            self.n, self.f, self.e,
            CAUSAL=self.causal, REVERSE=reverse, WEIGHT_ON_A=weight_on_a, **self._tiles(),
        )  # fmt: skip

    def _tiles(self) -> dict:
        return dict(
            BT=self.bt, BF=self.bf, BE=self.be,
            OPERAND_DTYPE=self.operand_dtype, DOT_DTYPE=self.dot_dtype, DOT_PRECISION=self.dot_precision,
            num_warps=self.num_warps, num_stages=self.num_stages,
        )  # fmt: skip


def launch_config(n: int, f: int, e: int, dot_precision: str, block_size: int | None = None) -> tuple:
    """(BT, BF, BE, num_warps, num_stages) of a call with N = n, F = f, E = e whose products have
    ``dot_precision`` (``_dot_config``): CHUNK and LAUNCH_TABLE's, or ``block_size`` (when given) as the
    largest chunk and tile."""
    tile, warps, stages = LAUNCH_TABLE[dot_precision]
    chunk = CHUNK
    if block_size is not None:
        chunk = tile = block_size
    return _tile(n, chunk), _tile(f, tile), _tile(e, tile), warps, stages


def _tile(size: int, block_size: int) -> int:
    """The tile covering ``size``: a power of two in [MIN_BLOCK, block_size]."""
    return min(block_size, max(MIN_BLOCK, triton.next_power_of_2(size)))


class _FeatureAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, phi_q, phi_k, v, eps, causal: bool, block_size: int):
        phi_q, phi_k, v = phi_q.contiguous(), phi_k.contiguous(), v.contiguous()
        eps_rows = eps.expand(phi_q.shape[:3]).contiguous()
        run = _Launcher(phi_q, v, causal, block_size, _dot_config(phi_q.dtype, phi_k.dtype, v.dtype))
        state, key_sum = run.states(phi_k, v, weight=None, reverse=False)
        out = torch.empty(v.shape, device=v.device, dtype=phi_q.dtype)
        denominator = torch.empty(phi_q.shape[:3], device=v.device, dtype=torch.float32)
        run.over_features(phi_q, phi_k, v, state, key_sum, out, denominator, eps_rows, reverse=False, normalize=True)
        ctx.save_for_backward(phi_q, phi_k, v, out, denominator)
        ctx.eps_shape = eps.shape
        ctx.run = run
        return out

    @staticmethod
    def backward(ctx, grad_out):
        phi_q, phi_k, v, out, denominator = ctx.saved_tensors
        run: _Launcher = ctx.run
        # o = num / den: d num = do / den (g), d den = -(do . o) / den (r); both float32.
        g = (grad_out.float() / denominator.unsqueeze(-1)).contiguous()
        r = -(grad_out.float() * out.float()).sum(-1) / denominator

        grad_q = torch.empty_like(phi_q)
        state, key_sum = run.states(phi_k, v, weight=None, reverse=False)
        run.over_values(g, v, phi_k, r, state, key_sum, grad_q, reverse=False, weight_on_a=True)

        state, key_sum = run.states(phi_q, g, weight=r, reverse=True)
        grad_k = torch.empty_like(phi_k)
        run.over_values(v, g, phi_q, r, state, key_sum, grad_k, reverse=True, weight_on_a=False)
        grad_v = torch.empty_like(v)
        # Without normalization the kernel reads neither denominator nor eps: r fills both places.
        run.over_features(phi_k, phi_q, g, state, key_sum, grad_v, r, r, reverse=True, normalize=False)
        # eps enters the denominator once per row: its gradient is r, summed over broadcast dims.
        grad_eps = r.sum_to_size(ctx.eps_shape) if ctx.needs_input_grad[3] else None
        return grad_q, grad_k, grad_v, grad_eps, None, None
