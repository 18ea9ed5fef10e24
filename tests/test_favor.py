"""FAVOR+: unbiased positive random features of exp(q.k/sqrt(D)), stabilised without leaking."""

from __future__ import annotations

import math

import pytest
import torch

import methods
from methods._featuremap.common import DENOMINATOR_EPS
from methods._featuremap.naive import feature_attention
from methods.base import MethodError
from tests.utils import assert_close


def exact_kernel(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.exp((q.double() * k.double()).sum(-1) / math.sqrt(q.shape[-1]))


def estimate(module, q, k) -> torch.Tensor:
    return (module.feature_map(q, "query").double() * module.feature_map(k, "key").double()).sum(-1)


def test_default_num_features_is_d_log_d():
    default = methods.build("favor", head_dim=64)
    assert default.num_features == round(64 * math.log(64)) == 266
    assert default.options["num_features"] is None and default.resolved_options()["num_features"] == 266
    module = methods.build("favor", head_dim=16, num_features=40)
    assert module.projection.shape == (40, 16)
    assert module.feature_map(torch.randn(1, 2, 3, 16), "key").shape == (1, 2, 3, 40)


def test_projection_is_orthogonal_in_blocks_with_varied_norms():
    projection = methods.build("favor", head_dim=8, num_features=20).projection
    norms = projection.norm(dim=-1, keepdim=True)
    for start in (0, 8, 16):
        block = (projection / norms)[start : start + 8]
        assert_close(f"gram {start}", torch.eye(len(block)), block @ block.T, 1e-5)
    # chi(8) norms, not a constant: the rows must look Gaussian one at a time.
    assert norms.std() > 0.1


def test_features_are_unbiased_over_independent_draws():
    torch.manual_seed(0)
    q, k = 0.7 * torch.randn(1, 1, 5, 8), 0.7 * torch.randn(1, 1, 5, 8)
    # 16000 orthogonal blocks of 8 rows, each drawn independently: 16000 independent estimates
    # by an 8-feature map, read off one wide projection.
    draws, block = 16000, 8
    module = methods.build("favor", head_dim=8, num_features=draws * block)
    products = module.feature_map(q, "query").double() * module.feature_map(k, "key").double()
    estimates = products.unflatten(-1, (draws, block)).sum(-1) * draws  # undo 1/sqrt(m) for m = 8
    mean, standard_error = estimates.mean(-1), estimates.std(-1) / math.sqrt(draws)
    exact = exact_kernel(q, k)
    assert (standard_error < 0.05 * exact).all()  # enough draws for the test to have power
    assert ((mean - exact).abs() < 4 * standard_error).all(), (mean, exact, standard_error)


def test_error_falls_as_num_features_grows():
    torch.manual_seed(0)
    q, k = 0.7 * torch.randn(1, 4, 32, 16), 0.7 * torch.randn(1, 4, 32, 16)
    errors = []
    for m in (16, 64, 256):
        per_seed = [
            ((estimate(methods.build("favor", head_dim=16, num_features=m, seed=seed), q, k) / exact_kernel(q, k)) - 1)
            .abs()
            .mean()
            for seed in range(8)
        ]
        errors.append(float(torch.stack(per_seed).mean()))
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < errors[0] / 2.5, errors  # about 1/sqrt(m): 4x from 16 to 256


@pytest.mark.parametrize("causal", [False, True])
def test_stabilising_factors_cancel_exactly(causal):
    module = methods.build("favor", head_dim=16, impl="naive")
    q, k, v = torch.randn(2, 3, 50, 16), torch.randn(2, 3, 50, 16), torch.randn(2, 3, 50, 6)
    plain_q, plain_k = module.feature_map(q, "query").double(), module.feature_map(k, "key").double()
    stable_q, stable_k, _ = (t.double() for t in module.features(q, k, causal))
    # One factor per query row, one per (batch, head) for all keys; eps is scaled by both.
    query_factor, key_factor = stable_q / plain_q, stable_k / plain_k
    assert_close("query factor", query_factor[..., :1].expand_as(query_factor), query_factor, 1e-5)
    assert_close("key factor", key_factor[..., :1, :1].expand_as(key_factor), key_factor, 1e-5)
    unstabilised = feature_attention(plain_q, plain_k, v, causal)
    assert_close("o", unstabilised, module(q, k, v, causal), 1e-5)


def float64_definition(module, q, k, v, causal):
    """o = A v / (A 1 + eps) with the plain features, all in float64 (whose range exp needs here)."""
    def plain(x):
        x = x.double() * module.head_dim**-0.25
        w = module.projection.double()
        return torch.exp(x @ w.T - 0.5 * x.square().sum(-1, keepdim=True)) / math.sqrt(module.num_features)

    scores = plain(q) @ plain(k).transpose(-1, -2)
    if causal:
        scores = scores.tril()
    return (scores @ v.double()) / (scores.sum(-1, keepdim=True) + DENOMINATOR_EPS)


@pytest.mark.parametrize("causal", [False, True])
def test_logits_past_float32_range_stay_finite_and_exact(causal):
    torch.manual_seed(0)
    module = methods.build("favor", head_dim=64)
    # Queries and keys along the longest projection row: logits near |w|^2/2, products near e^90.
    longest = module.projection[module.projection.norm(dim=-1).argmax()]
    q = longest * 64**0.25 + 0.1 * torch.randn(1, 2, 32, 64)
    k = longest * 64**0.25 + 0.1 * torch.randn(1, 2, 32, 64)
    v = torch.randn(1, 2, 32, 4)
    plain = feature_attention(module.feature_map(q, "query"), module.feature_map(k, "key"), v, causal)
    assert not torch.isfinite(plain).all()  # the plain features overflow in float32
    for impl in ("naive", "chunk"):
        module.impl = impl
        assert_close(impl, float64_definition(module, q, k, v, causal), module(q, k, v, causal), 1e-4)


@pytest.mark.parametrize("impl", ["naive", "chunk", "step"])
def test_huge_future_keys_do_not_reach_earlier_outputs(impl):
    torch.manual_seed(0)
    module = methods.build("favor", head_dim=16, impl="naive" if impl == "step" else impl, chunk_size=16)
    q, k, v = torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 4)
    changed = k.clone()
    changed[:, :, 25:] = 1e4 * torch.randn(1, 2, 15, 16)

    def attend(keys):
        if impl != "step":
            return module(q, keys, v, causal=True)
        state, outputs = module.init_state(1, 2, 16, 4), []
        for t in range(40):
            o_t, state = module.step(q[:, :, t], keys[:, :, t], v[:, :, t], state)
            outputs.append(o_t)
        return torch.stack(outputs, dim=2)

    before, after = attend(k), attend(changed)
    assert torch.equal(before[:, :, :25], after[:, :, :25])
    assert not torch.equal(before[:, :, 25:], after[:, :, 25:])


def test_redraw_every_interval_training_calls_never_in_eval():
    module = methods.build("favor", head_dim=8, redraw_interval=2, seed=3)
    q = torch.randn(1, 1, 4, 8)
    first = module.projection.clone()
    seen = []
    for _ in range(5):
        module(q, q, q)
        seen.append(module.projection.clone())
    assert torch.equal(seen[0], first) and torch.equal(seen[1], first)
    assert not torch.equal(seen[2], first) and torch.equal(seen[2], seen[3])
    assert not torch.equal(seen[4], seen[2])
    module.eval()
    for _ in range(4):
        module(q, q, q)
    assert torch.equal(module.projection, seen[4])


def test_no_redraw_when_interval_is_zero():
    module = methods.build("favor", head_dim=8)
    first = module.projection.clone()
    for _ in range(3):
        module(torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8))
    assert torch.equal(module.projection, first)


def test_seed_fixes_the_projection_and_state_dict_carries_it():
    same = methods.build("favor", head_dim=8, seed=5), methods.build("favor", head_dim=8, seed=5)
    other = methods.build("favor", head_dim=8, seed=6)
    assert torch.equal(same[0].projection, same[1].projection)
    assert not torch.equal(same[0].projection, other.projection)
    assert "projection" in other.state_dict()
    other.load_state_dict(same[0].state_dict())
    q = torch.randn(1, 1, 6, 8)
    assert torch.equal(other(q, q, q), same[0](q, q, q))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_features": 0}, "num_features must be an integer >= 1, got 0"),
        ({"redraw_interval": -1}, "redraw_interval must be an integer >= 0, got -1"),
        ({"seed": "a"}, "seed must be an integer >= 0, got 'a'"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(MethodError, match=message):
        methods.build("favor", head_dim=8, **options)
