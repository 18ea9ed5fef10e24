"""The Triton kernels of attention from features against the naive definition, forward and backward.

Runs on the CPU under TRITON_INTERPRET=1 (set here unless the environment says otherwise; with
TRITON_INTERPRET=0 the same tests run on CUDA). The interpreter is slow, so shapes are small and the
block is 16: N = 33 spans three chunks, F = 24 two feature tiles, E = 20 two value tiles.
"""

from __future__ import annotations

import itertools
import os

# Triton decides at @triton.jit whether a kernel is interpreted, so this precedes importing kernels.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
import triton.language as tl  # a test dependency: fail, do not skip, when it is missing
from triton.runtime.jit import JITFunction

from methods._featuremap import triton_kernels
from methods._featuremap.common import DENOMINATOR_EPS
from methods._featuremap.naive import feature_attention
from methods._featuremap.triton import feature_attention_triton
from methods.base import MethodError
from tests.utils import assert_close

INTERPRET = os.environ["TRITON_INTERPRET"] == "1"
DEVICE = "cpu" if INTERPRET else "cuda"
if INTERPRET and any(isinstance(f, JITFunction) for f in (tl.zeros, triton_kernels.chunk_states_kernel)):
    # Triton fixes at import whether a @triton.jit function (its own, like tl.zeros, too) is
    # interpreted; nothing in this module can undo that.
    pytest.fail(
        "triton was imported before TRITON_INTERPRET=1 was set (by an earlier test module?); "
        "set TRITON_INTERPRET=1 in the environment",
        pytrace=False,
    )

BLOCK = 16
# float32 products are exact (no TF32). bfloat16 keeps 8 mantissa bits (2^-8 = 3.9e-3 per
# rounding): inputs, scores, states, g = do/den, do and o are each rounded once, and the gradients
# of phi carry v_j - o_i, a difference that amplifies those roundings where few keys are seen
# (worst over the slow full grid: 4.1e-2 at N = 1, F = 24).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def expected_score(f: int) -> float:
    """E[phi_q . phi_k] for features uniform in [0, 1): the eps the tests use. An eps comparable to
    one score keeps the N = 1 gradients well-conditioned (as eps -> 0 they vanish, o_i -> v_i, and
    only rounding is left) and makes eps's share of the backward visible."""
    return 0.25 * f


# (N, F, E): every length, feature and value size of the full grid (marked slow) appears once.
SHAPES = [(1, 8, 4), (5, 12, 8), (16, 24, 12), (33, 24, 20)]
FULL_GRID = list(itertools.product((1, 5, 16, 33), (8, 12, 24), (4, 8, 12, 20)))


def make_inputs(n: int, f: int, e: int, dtype: torch.dtype, seed: int = 0):
    """Non-negative features (as every feature map gives), values of both signs, an output gradient."""
    gen = torch.Generator().manual_seed(seed)
    phi_q = torch.rand(2, 2, n, f, generator=gen)
    phi_k = torch.rand(2, 2, n, f, generator=gen)
    v = torch.randn(2, 2, n, e, generator=gen)
    grad_out = torch.randn(2, 2, n, e, generator=gen)
    leaves = [t.to(DEVICE, dtype).requires_grad_() for t in (phi_q, phi_k, v)]
    return leaves, grad_out.to(DEVICE)


def check_against_naive(n, f, e, dtype, causal, eps=None, block_size=BLOCK, layout=None) -> None:
    (phi_q, phi_k, v), grad_out = make_inputs(n, f, e, dtype)
    eps = expected_score(f) if eps is None else eps
    ref = feature_attention(phi_q, phi_k, v, causal=causal, eps=eps)
    ref_grads = torch.autograd.grad(ref, (phi_q, phi_k, v), grad_out)
    inputs = (phi_q, phi_k, v) if layout is None else tuple(layout(t) for t in (phi_q, phi_k, v))
    out = feature_attention_triton(*inputs, causal=causal, eps=eps, block_size=block_size)
    assert out.dtype == dtype
    grads = torch.autograd.grad(out, (phi_q, phi_k, v), grad_out.to(dtype))
    tol = TOLERANCE[dtype]
    assert_close("o", ref, out, tol)
    for name, r, g in zip(("dphi_q", "dphi_k", "dv"), ref_grads, grads):
        assert_close(name, r, g, tol)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("n, f, e", SHAPES)
def test_matches_naive(n, f, e, dtype, causal):
    check_against_naive(n, f, e, dtype, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_default_eps_and_block(causal):
    # The launch table's float32 tiles: one chunk of 64 rows holds all 33, F = 40 takes three tiles
    # of 16 and E = 20 two; the tiny default eps leaves the denominator as the sum.
    check_against_naive(33, 40, 20, torch.float32, causal, eps=DENOMINATOR_EPS, block_size=None)


@pytest.mark.parametrize("eps_shape", [(2, 2, 20), (2, 2, 1), ()], ids=["per-row", "per-head", "scalar"])
def test_tensor_eps_and_its_gradient(eps_shape):
    # As favor passes it: an eps per row that cancels the shifts pulled out of its feature maps.
    (phi_q, phi_k, v), grad_out = make_inputs(20, 12, 8, torch.float32)
    eps = (0.1 + torch.rand(eps_shape, generator=torch.Generator().manual_seed(1))).to(DEVICE).requires_grad_()
    ref = feature_attention(phi_q, phi_k, v, causal=True, eps=eps)
    out = feature_attention_triton(phi_q, phi_k, v, causal=True, eps=eps, block_size=BLOCK)
    assert_close("o", ref, out, TOLERANCE[torch.float32])
    for name, r, g in zip(
        ("dphi_q", "dphi_k", "dv", "deps"),
        torch.autograd.grad(ref, (phi_q, phi_k, v, eps), grad_out),
        torch.autograd.grad(out, (phi_q, phi_k, v, eps), grad_out),
    ):
        assert_close(name, r, g, TOLERANCE[torch.float32])


def test_float16_inputs():
    check_against_naive(20, 12, 8, torch.float16, causal=True)


def test_strided_inputs():
    # (B, N, H, dim) memory seen as (B, H, N, dim), as a model's projection gives it.
    check_against_naive(20, 12, 8, torch.float32, causal=True,
                        layout=lambda t: t.transpose(1, 2).contiguous().transpose(1, 2))


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("n, f, e", FULL_GRID)
def test_matches_naive_full_grid(n, f, e, dtype, causal):
    check_against_naive(n, f, e, dtype, causal)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(block_size=24), "block_size must be a power of two >= 16, got 24"),
        (dict(block_size=8), "block_size must be a power of two >= 16, got 8"),
        (dict(dtype=torch.float64), "dtype torch.float64; supported: float32, bfloat16, float16"),
        (dict(value_length=4), "must share (batch, heads, N)"),
        (dict(eps=torch.ones(2)), "eps of shape (2,) does not broadcast to (B, H, N) = (1, 1, 5)"),
    ],
)
def test_clear_errors(change, message):
    phi = torch.rand(1, 1, 5, 8, dtype=change.get("dtype", torch.float32), device=DEVICE)
    v = torch.randn(1, 1, change.get("value_length", 5), 4, dtype=phi.dtype, device=DEVICE)
    with pytest.raises(MethodError) as info:
        feature_attention_triton(phi, phi, v, eps=change.get("eps", 1.0), block_size=change.get("block_size", BLOCK))
    assert message in str(info.value)


def test_too_many_batch_heads_is_a_clear_error():
    phi = torch.rand(256, 257, 1, 1, device=DEVICE)
    with pytest.raises(MethodError, match="batch \\* heads = 65792 exceeds 65535"):
        feature_attention_triton(phi, phi, phi)
