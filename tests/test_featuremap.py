"""The feature-map attention core and the kernelized methods built on it, fla-style: every fast
path (chunk, recurrent step) against the float32 naive definition, outputs and gradients."""

from __future__ import annotations

import pytest
import torch

import methods
from methods._featuremap.chunk import feature_attention_chunk
from methods._featuremap.naive import feature_attention, feature_attention_parts
from methods.base import MethodError
from tests.utils import assert_close

LENGTHS = (1, 7, 63, 64, 65, 200)  # chunk_size 64: below, at and across chunk boundaries
HEAD_DIMS = (16, 24, 64)
# Every method, and taylor once more with its learned projection and the symmetric half.
CONFIGS = {
    "linear": ("linear", {}),
    "favor": ("favor", {}),
    "taylor": ("taylor", {}),
    "taylor-projected": ("taylor", {"feature_dim": 4, "symmetric_half": True}),
}
# bf16 inputs: features and sums are float32 inside, so the error is mostly the bf16 rounding of
# the output and of the input gradients (2^-8 relative), with room for a few roundings more.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1.5e-2}


def value_dim(head_dim: int) -> int:
    return head_dim // 2 + 5  # different from the key dim on purpose


def random_qkv(batch, heads, n, head_dim, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(batch, heads, n, head_dim, generator=gen) for _ in range(2))
    v = torch.randn(batch, heads, n, value_dim(head_dim), generator=gen)
    return tuple(t.to(dtype).requires_grad_() for t in (q, k, v))


def assert_all_close(ref: dict, out: dict, tol: float, n: int) -> None:
    """Every named tensor of ``out`` against ``ref``. With one token the output is v whatever the
    features are (up to eps), so the feature gradients are rounding noise of an eps-sized value:
    then only o and dv carry meaning."""
    for name in ("o", "dv") if n == 1 else ref:
        assert_close(name, ref[name], out[name].float(), tol)


def run(module, q, k, v, causal, grad_out):
    """Output and the gradients of q, k, v and of every learned parameter, by name."""
    out = module(q, k, v, causal)
    params = dict(module.named_parameters())
    grads = torch.autograd.grad(out, [q, k, v, *params.values()], grad_out.to(out.dtype))
    return {"o": out, **dict(zip(["dq", "dk", "dv", *(f"d{p}" for p in params)], grads))}


# -- the core on raw features --------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunk_matches_naive_on_features(n, causal, dtype):
    gen = torch.Generator().manual_seed(n)
    phi_q, phi_k = (torch.rand(2, 3, n, 12, generator=gen).to(dtype).requires_grad_() for _ in range(2))
    v = torch.randn(2, 3, n, 5, generator=gen).to(dtype).requires_grad_()
    ref_inputs = [t.detach().float().requires_grad_() for t in (phi_q, phi_k, v)]
    ref = feature_attention(*ref_inputs, causal=causal)
    out = feature_attention_chunk(phi_q, phi_k, v, causal=causal, chunk_size=64)
    assert out.dtype == torch.float32
    grad_out = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, ref_inputs, grad_out)
    grads = torch.autograd.grad(out, [phi_q, phi_k, v], grad_out)
    names = ["o", "dq", "dk", "dv"]
    assert_all_close(dict(zip(names, [ref, *ref_grads])), dict(zip(names, [out, *grads])), TOLERANCE[dtype], n)
    if n == 1:
        assert_close("o = v", v.detach().float(), out.detach(), TOLERANCE[dtype])


def test_denominator_is_query_features_dot_key_feature_sum():
    phi_q, phi_k = torch.rand(1, 2, 9, 4), torch.rand(1, 2, 9, 4)
    v = torch.randn(1, 2, 9, 3)
    _, full = feature_attention_parts(phi_q, phi_k, v, causal=False)
    _, causal = feature_attention_parts(phi_q, phi_k, v, causal=True)
    assert_close("full", (phi_q * phi_k.sum(2, keepdim=True)).sum(-1), full, 1e-6)
    assert_close("causal", (phi_q * phi_k.cumsum(2)).sum(-1), causal, 1e-6)


def test_per_query_eps_tensor_is_added_to_each_denominator():
    phi_q, phi_k, v = torch.rand(1, 1, 5, 3), torch.rand(1, 1, 5, 3), torch.randn(1, 1, 5, 2)
    eps = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0]).view(1, 1, 5)
    numerator, denominator = feature_attention_parts(phi_q, phi_k, v, causal=True)
    expected = numerator / (denominator + eps).unsqueeze(-1)
    assert_close("naive", expected, feature_attention(phi_q, phi_k, v, True, eps), 1e-6)
    assert_close("chunk", expected, feature_attention_chunk(phi_q, phi_k, v, True, eps, chunk_size=2), 1e-6)


@pytest.mark.parametrize("attend", [feature_attention, feature_attention_chunk])
def test_huge_future_keys_leave_earlier_outputs_unchanged(attend):
    phi_q, phi_k, v = torch.rand(1, 1, 40, 3), torch.rand(1, 1, 40, 3), torch.randn(1, 1, 40, 2)
    before = attend(phi_q, phi_k, v, causal=True)
    phi_k[:, :, 30:] = 1e30  # scores overflow to inf there; masking must not turn them into nan
    after = attend(phi_q, phi_k, v, causal=True)
    assert torch.equal(before[:, :, :30], after[:, :, :30])


# -- the methods: fast paths against the naive definition ----------------------------------------
def build_pair(config, head_dim):
    name, options = CONFIGS[config]
    torch.manual_seed(0)
    naive = methods.build(name, head_dim=head_dim, impl="naive", chunk_size=64, **options)
    chunk = methods.build(name, head_dim=head_dim, impl="chunk", chunk_size=64, **options)
    chunk.load_state_dict(naive.state_dict())
    return naive, chunk


# float32 on every length; bf16, which only rounds differently, on two lengths across chunk borders.
DTYPE_LENGTHS = [(torch.float32, n) for n in LENGTHS] + [(torch.bfloat16, n) for n in (65, 200)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("dtype", "n"), DTYPE_LENGTHS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("config", CONFIGS)
def test_chunk_matches_naive(config, head_dim, n, causal, dtype):
    naive, chunk = build_pair(config, head_dim)
    q, k, v = random_qkv(2, 3, n, head_dim, dtype)
    ref_inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    grad_out = torch.randn(2, 3, n, value_dim(head_dim))
    ref = run(naive, *ref_inputs, causal, grad_out)
    out = run(chunk, q, k, v, causal, grad_out)
    assert out["o"].dtype == dtype
    assert ref.keys() == out.keys()
    assert_all_close(ref, out, TOLERANCE[dtype], n)
    if n == 1:
        assert_close("o = v", v.detach().float(), out["o"].detach().float(), TOLERANCE[dtype])
