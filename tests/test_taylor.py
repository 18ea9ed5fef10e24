"""Taylor attention (Based): the feature inner product is exactly 1 + s + s^2/2."""

from __future__ import annotations

import math

import pytest
import torch

import methods
from methods.base import MethodError
from tests.utils import assert_close


def taylor_kernel(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    s = (q.double() * k.double()).sum(-1) / math.sqrt(q.shape[-1])
    return 1 + s + s.square() / 2


@pytest.mark.parametrize("symmetric_half", [False, True])
@pytest.mark.parametrize("head_dim", [1, 16, 24, 64])
def test_inner_product_is_second_order_taylor_of_exp(head_dim, symmetric_half):
    module = methods.build("taylor", head_dim=head_dim, symmetric_half=symmetric_half)
    q, k = 2 * torch.randn(2, 3, 50, head_dim), 2 * torch.randn(2, 3, 50, head_dim)
    inner = (module.feature_map(q, "query").double() * module.feature_map(k, "key").double()).sum(-1)
    assert_close("phi(q).phi(k)", taylor_kernel(q, k), inner, 1e-6)
    quadratic = head_dim * (head_dim + 1) // 2 if symmetric_half else head_dim**2
    assert module.num_features == module.feature_map(q, "query").shape[-1] == 1 + head_dim + quadratic


def test_feature_dim_projects_queries_and_keys_with_learned_maps():
    module = methods.build("taylor", head_dim=32, feature_dim=16)
    q, k = torch.randn(1, 2, 10, 32), torch.randn(1, 2, 10, 32)
    with torch.no_grad():
        projected_q, projected_k = module.query_projection(q), module.key_projection(k)
        inner = (module.feature_map(q, "query").double() * module.feature_map(k, "key").double()).sum(-1)
    # s uses the projected dimension: (W_q q).(W_k k) / sqrt(16).
    assert_close("phi(q).phi(k)", taylor_kernel(projected_q, projected_k), inner, 1e-6)
    assert module.num_features == 1 + 16 + 256
    assert {name for name, _ in module.named_parameters()} == {"query_projection.weight", "key_projection.weight"}
    assert module.query_projection.weight.shape == (16, 32)


def test_projection_is_trained_through_forward():
    module = methods.build("taylor", head_dim=8, feature_dim=4)
    q, k, v = torch.randn(1, 2, 20, 8), torch.randn(1, 2, 20, 8), torch.randn(1, 2, 20, 8)
    module(q, k, v, causal=True).square().sum().backward()
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().max() > 0, name


def test_symmetric_half_gives_the_same_attention():
    full = methods.build("taylor", head_dim=16)
    half = methods.build("taylor", head_dim=16, symmetric_half=True)
    q, k, v = torch.randn(2, 2, 40, 16), torch.randn(2, 2, 40, 16), torch.randn(2, 2, 40, 7)
    for causal in (False, True):
        assert_close(f"causal={causal}", full(q, k, v, causal), half(q, k, v, causal), 1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"feature_dim": 0}, "feature_dim must be an integer >= 1, got 0"),
        ({"feature_dim": "16"}, "feature_dim must be an integer >= 1, got '16'"),
        ({"symmetric_half": "yes"}, "symmetric_half must be true or false, got 'yes'"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(MethodError, match=message):
        methods.build("taylor", head_dim=8, **options)
