"""The feature-map attention core, fla-style: the chunked core against the float32 naive definition on
raw features, outputs and gradients; each feature map's block form against its full form; and what
the kernelized methods built on the core share beyond the contract every method honours
(tests/test_methods.py holds that: each method's paths against its naive one, and its stepping)."""

from __future__ import annotations

import pytest
import torch

import methods
from methods._featuremap.chunk import feature_attention_chunk
from methods._featuremap.maps import EluPlusOne, PositiveRandomFeatures, SecondOrderTaylor
from methods._featuremap.module import FeatureMapAttention
from methods._featuremap.naive import feature_attention, feature_attention_parts
from methods.base import MethodError
from methods.favor.projection import draw_generator, orthogonal_gaussian_projection
from tests.utils import assert_close

LENGTHS = (1, 7, 63, 64, 65, 200)  # chunk_size 64: below, at and across chunk boundaries
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


# -- the two forms of each feature map (maps.py) ---------------------------------------------------
PROJECTION = orthogonal_gaussian_projection(11, 6, draw_generator(0, 0))
BLOCK_MAPS = {
    "elu": EluPlusOne(6),
    "taylor": SecondOrderTaylor(6, symmetric_half=False),
    "taylor-half": SecondOrderTaylor(6, symmetric_half=True),
    "favor-queries": PositiveRandomFeatures(PROJECTION, 6, key_shift=None),
    "favor-keys": PositiveRandomFeatures(PROJECTION, 6, key_shift=torch.tensor(0.75)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", BLOCK_MAPS)
def test_block_form_of_each_map_matches_its_full_form(name, dtype):
    """A block's features (and the factor pulled out of them) and the written-out d x, against
    ``full`` and autograd on it, on a block of 3 chunks of 37 rows viewed as (1, 3, 37, D)."""
    phi_map = BLOCK_MAPS[name]
    gen = torch.Generator().manual_seed(1)
    x = (2 * torch.randn(3, 37, 6, generator=gen)).to(dtype)
    ref_x = x.float().clone().requires_grad_()
    ref = phi_map.full(ref_x.view(1, 3, 37, 6))
    ref_phi, ref_factor = ref if isinstance(ref, tuple) else (ref, None)
    phi = torch.empty(3, 37, phi_map.num_features)
    factor = phi_map.forward(x, phi)
    assert_close("phi", ref_phi[0], phi, 1e-5)
    if ref_factor is None:
        assert factor is None
    else:
        assert_close("log factor", ref_factor[0].expand(3, 37), torch.as_tensor(factor).expand(3, 37), 1e-5)
    grad_phi = torch.randn(phi.shape, generator=gen)
    (ref_grad,) = torch.autograd.grad(ref_phi[0], ref_x, grad_phi)
    grad = torch.empty_like(x)
    phi_map.backward(x, phi, grad_phi.clone(), grad)
    # d x is computed in float32 and rounded once to the input's dtype: half a bf16 ulp, 2^-9.
    assert_close("dx", ref_grad, grad.float(), 1e-5 if dtype == torch.float32 else 2**-8)


# -- the methods built on the core (the contract over every method: tests/test_methods.py) ----------
FEATURE_METHODS = [name for name in methods.available() if issubclass(methods.get(name), FeatureMapAttention)]


@pytest.mark.parametrize("name", FEATURE_METHODS)
def test_stepping_keeps_float32_running_sums(name):
    module = methods.build(name, head_dim=16)
    q, k, v = (t.detach() for t in random_qkv(2, 3, 5, 16))
    state = module.init_state(2, 3, 16, value_dim(16))
    for t in range(5):
        _, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
    assert state["kv"].dtype == state["z"].dtype == torch.float32


@pytest.mark.parametrize("name", FEATURE_METHODS)
def test_step_rejects_a_state_of_another_shape_or_method_naming_init_state(name):
    module = methods.build(name, head_dim=16)
    q_t, k_t, v_t = (torch.randn(2, 3, d) for d in (16, 16, 8))
    softmax_state = methods.build("softmax", head_dim=16).init_state(2, 3, 16, 8)
    others = (methods.build(other, head_dim=16) for other in FEATURE_METHODS)
    other_features = next(other for other in others if other.num_features != module.num_features)
    for state in (softmax_state, other_features.init_state(2, 3, 16, 8), module.init_state(2, 4, 16, 8),
                  module.init_state(2, 3, 16, 9)):
        with pytest.raises(MethodError, match=f"{name}.init_state"):
            module.step(q_t, k_t, v_t, state)


# -- long sequences in bf16 ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("linear", {}),
        ("favor", {}),
        ("taylor", {"feature_dim": 16}),  # Based's setting
        pytest.param("taylor", {}, marks=pytest.mark.slow),  # 4161 features: about a minute
    ],
)
def test_no_nan_or_inf_in_bf16_at_16k_tokens(name, options):
    module = methods.build(name, head_dim=64, **options)
    q, k, v = random_qkv(1, 2, 16384, 64, torch.bfloat16)
    q, k = (t[..., :module.query_key_dim].detach().requires_grad_() for t in (q, k))  # Based's 16 of 64
    out = module(q, k, v, causal=True)
    out.float().square().sum().backward()
    for label, t in (("o", out), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        assert torch.isfinite(t).all(), label
    assert out.abs().max() > 0
