"""Linear attention: elu(x)+1 features, and the output against a plain loop in float64."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import methods
from tests.utils import assert_close


def loop_reference(q, k, v, causal):
    """o_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j), one query at a time, in float64."""
    phi_q, phi_k, v = F.elu(q.double()) + 1, F.elu(k.double()) + 1, v.double()
    n = q.shape[2]
    outputs = []
    for i in range(n):
        keys = slice(0, i + 1) if causal else slice(0, n)
        weights = torch.einsum("bhf,bhmf->bhm", phi_q[:, :, i], phi_k[:, :, keys])
        outputs.append(torch.einsum("bhm,bhme->bhe", weights, v[:, :, keys]) / weights.sum(-1, keepdim=True))
    return torch.stack(outputs, dim=2)


def test_feature_map_is_elu_plus_one():
    module = methods.build("linear", head_dim=4)
    x = torch.tensor([-30.0, -1.0, 0.0, 2.5]).view(1, 1, 1, 4)
    expected = torch.tensor([torch.exp(torch.tensor(-30.0)), torch.exp(torch.tensor(-1.0)), 1.0, 3.5])
    assert_close("phi", expected.view(1, 1, 1, 4), module.feature_map(x, "query"), 1e-6)
    assert torch.equal(module.feature_map(x, "query"), module.feature_map(x, "key"))
    assert module.num_features == 4


def test_every_impl_matches_the_loop_definition():
    q, k, v = torch.randn(2, 2, 37, 8), torch.randn(2, 2, 37, 8), torch.randn(2, 2, 37, 5)
    for impl in ("naive", "chunk"):
        module = methods.build("linear", head_dim=8, impl=impl, chunk_size=16)
        for causal in (False, True):
            assert_close(f"{impl} causal={causal}", loop_reference(q, k, v, causal), module(q, k, v, causal), 1e-5)


def test_has_no_parameters_or_buffers():
    module = methods.build("linear", head_dim=8)
    assert list(module.parameters()) == [] and list(module.buffers()) == []
