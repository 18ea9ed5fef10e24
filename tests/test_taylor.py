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


def test_feature_dim_is_the_width_of_the_queries_and_keys_it_reads():
    """Based's feature_dim is the width the model projects q and k to, once: the map reads them as
    they are (no learned projection of its own), and values keep the head's width."""
    module = methods.build("taylor", head_dim=32, feature_dim=16)
    assert module.query_key_dim == 16 == methods.get("taylor").query_key_width(32, {"feature_dim": 16})
    assert list(module.parameters()) == []
    q, k, v = torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 32)
    inner = (module.feature_map(q, "query").double() * module.feature_map(k, "key").double()).sum(-1)
    assert_close("phi(q).phi(k)", taylor_kernel(q, k), inner, 1e-6)
    assert module.num_features == 1 + 16 + 256
    assert module(q, k, v, causal=True).shape == (1, 2, 10, 32)
    with pytest.raises(MethodError, match="queries and keys of width 16, got D=32"):
        module(v, v, v)


def test_the_model_projects_the_hidden_state_once_to_feature_dim():
    """The attention layer's one projection makes q and k at the method's width (here 8 per head)
    and v at the head's; no second projection sits between it and the map."""
    from suite.model import MultiHeadAttention

    layer = MultiHeadAttention(64, 2, {"name": "taylor", "impl": "naive", "options": {"feature_dim": 8}})
    assert layer.qkv.weight.shape == (2 * 8 + 2 * 8 + 64, 64)
    assert layer(torch.randn(3, 11, 64), causal=True).shape == (3, 11, 64)
    assert [name for name, _ in layer.named_parameters()] == ["qkv.weight", "qkv.bias", "out.weight", "out.bias"]


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
