"""The method registry and the contract every method honours (DESIGN.md), softmax included."""

from __future__ import annotations

import pytest
import torch

import methods
from methods.base import MethodError
from tests.utils import assert_close


def test_methods_are_registered_in_canonical_order_then_alphabetically():
    names = methods.available()
    assert names[:5] == methods.CANONICAL_ORDER
    assert list(names[5:]) == sorted(names[5:])


def test_unknown_method_names_the_valid_ones():
    with pytest.raises(MethodError,
                       match="unknown method 'nope'; valid methods: softmax, linear, favor, taylor, loglinear"):
        methods.build("nope", head_dim=8)


@pytest.mark.parametrize("name", ["softmax", "linear", "favor", "taylor", "loglinear"])
def test_unknown_option_and_impl_are_named(name):
    with pytest.raises(MethodError, match=rf"{name}: unknown option\(s\) wibble; valid options: "):
        methods.build(name, head_dim=8, wibble=1)
    with pytest.raises(MethodError, match=f"unknown impl 'fast' for method '{name}'; valid: auto, "):
        methods.build(name, head_dim=8, impl="fast")


@pytest.mark.parametrize("name", ["softmax", "linear", "favor", "taylor", "loglinear"])
def test_shape_mismatches_are_named(name):
    module = methods.build(name, head_dim=8)
    q = torch.randn(2, 3, 5, 8)
    with pytest.raises(MethodError, match="built for head_dim=8, got inputs with D=4"):
        module(q[..., :4], q[..., :4], q)
    with pytest.raises(MethodError, match="v must share"):
        module(q, q, torch.randn(2, 3, 6, 8))
    with pytest.raises(MethodError, match="must have shape"):
        module(q[0], q[0], q[0])


@pytest.mark.parametrize("name", ["linear", "favor", "taylor", "loglinear"])
def test_triton_without_cuda_or_interpreter_is_a_clear_error(name, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = methods.build(name, head_dim=8, impl="triton")
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(MethodError, match="Triton kernels need a CUDA device, or TRITON_INTERPRET=1"):
        module(q, q, q)


@pytest.mark.parametrize("n", [1, 7, 64, 65])
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_sdpa_equals_the_definition(n, causal):
    torch.manual_seed(n)
    q, k = torch.randn(2, 3, n, 24, requires_grad=True), torch.randn(2, 3, n, 24, requires_grad=True)
    v = torch.randn(2, 3, n, 40, requires_grad=True)
    outs = {}
    for impl in ("naive", "sdpa"):
        o = methods.build("softmax", head_dim=24, impl=impl)(q, k, v, causal=causal)
        grads = torch.autograd.grad(o.square().sum(), (q, k, v))
        outs[impl] = (o, *grads)
    for label, ref, fast in zip(("o", "dq", "dk", "dv"), outs["naive"], outs["sdpa"]):
        assert_close(label, ref, fast, 1e-4)


@pytest.mark.parametrize("n", [1, 8, 13])
def test_softmax_stepping_equals_the_causal_form(n):
    torch.manual_seed(0)
    module = methods.build("softmax", head_dim=16, impl="naive")
    q, k, v = torch.randn(2, 2, n, 16), torch.randn(2, 2, n, 16), torch.randn(2, 2, n, 8)
    state = module.init_state(2, 2, 16, 8)
    steps = []
    for t in range(n):
        o_t, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        steps.append(o_t)
    assert_close("o", module(q, k, v, causal=True), torch.stack(steps, dim=2), 1e-4)
