"""What each method declares about its cost (DESIGN.md): resolved options, FLOPs of each
implementation as computed, and the bytes of its decoding state; every registered method."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import methods
from methods.base import MethodError

BATCH, HEADS, DIM, VALUE_DIM = 2, 3, 16, 7  # an odd value dim on purpose
# Options that change the cost model: taylor's projection, loglinear's decay gates.
VARIANTS = [(name, {}) for name in methods.available()] + [
    ("taylor", {"feature_dim": 4}), ("taylor", {"feature_dim": 4, "symmetric_half": True}),
    ("loglinear", {"decay": True}),
]


def ids(variant) -> str:
    name, options = variant
    return name + "".join(f"-{k}={v}" for k, v in options.items())


def build(variant, impl="auto", **more):
    name, options = variant
    torch.manual_seed(0)
    return methods.build(name, head_dim=DIM, impl=impl, **options, **more)


@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_resolved_options_hold_every_option_with_nulls_resolved(variant):
    module = build(variant)
    resolved = module.resolved_options()
    assert set(module.method_options) <= set(resolved)
    json.dumps(resolved)  # a record stores it
    if "num_features" in resolved:
        assert isinstance(resolved["num_features"], int) and resolved["num_features"] > 0


def test_resolved_options_of_favor_give_the_feature_count_used():
    module = methods.build("favor", head_dim=64)
    assert module.options["num_features"] is None and module.resolved_options()["num_features"] == 266


@pytest.mark.parametrize("n", [1, 5, 64, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_state_bytes_are_the_bytes_prefill_state_holds(variant, n, dtype):
    module = build(variant)
    k, v = torch.randn(BATCH, HEADS, n, DIM, dtype=dtype), torch.randn(BATCH, HEADS, n, VALUE_DIM, dtype=dtype)
    state = module.prefill_state(k, v)
    held = sum(t.nbytes for t in (state.values() if isinstance(state, dict) else state))
    assert module.state_bytes(BATCH, HEADS, n, VALUE_DIM, dtype) == held


def product_flops(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """2 m n k of (..., m, k) @ (..., k, n), batched or not."""
    *batch, m, k = a_shape
    return 2 * m * k * b_shape[-1] * (batch[0] if batch else 1)


# torch's counter knows the out-of-place products only; the in-place ones are the same products.
IN_PLACE = {torch.ops.aten.baddbmm_: product_flops, torch.ops.aten.addmm_: product_flops}


def counted(module, impl, n, causal):
    """(forward, backward) FLOPs that torch's counter sees for one call of ``impl``."""
    gen = torch.Generator().manual_seed(n)
    q, k = (torch.randn(BATCH, HEADS, n, DIM, generator=gen, requires_grad=True) for _ in range(2))
    v = torch.randn(BATCH, HEADS, n, VALUE_DIM, generator=gen, requires_grad=True)
    module.impl = impl
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as forward:
        out = module(q, k, v, causal=causal)
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as backward:
        out.backward(torch.randn_like(out))
    return forward.get_total_flops(), backward.get_total_flops()


# N = 1 is left out: there a product over one key is an elementwise multiply to PyTorch, which
# the counter does not count.
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n", [7, 16, 65, 200])
@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_flops_count_the_products_each_cpu_impl_runs(variant, n, causal):
    # Chunks of 16: several chunks, several blocks of them and a shorter last chunk.
    module = build(variant, **({} if variant[0] == "softmax" else {"chunk_size": 16}))
    for impl in ("naive", "chunk"):  # sdpa is one fused op to the counter, which ignores the causal mask
        if impl not in module.impls:
            continue
        expected = (module.forward_flops(BATCH, HEADS, n, VALUE_DIM, causal, impl),
                    module.backward_flops(BATCH, HEADS, n, VALUE_DIM, causal, impl))
        assert counted(module, impl, n, causal) == pytest.approx(expected, rel=1e-9), impl


@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_flops_scale_with_batch_and_heads_and_name_the_impl(variant):
    module = build(variant)
    one = module.forward_flops(1, 1, 300, VALUE_DIM, causal=True)
    assert one > 0 and module.forward_flops(2, 3, 300, VALUE_DIM, causal=True) == pytest.approx(6 * one)
    assert module.backward_flops(1, 1, 300, VALUE_DIM, causal=True) > one
    assert module.flop_impl() == module.resolve_impl(torch.device("cpu"))
    for impl in module.impls:
        assert module.forward_flops(1, 1, 300, VALUE_DIM, True, impl) > 0
    with pytest.raises(MethodError, match="valid"):
        module.forward_flops(1, 1, 300, VALUE_DIM, True, impl="fast")


def test_linear_chunk_flops_grow_linearly_and_softmax_quadratically():
    linear, softmax = methods.build("linear", head_dim=64), methods.build("softmax", head_dim=64)
    ratio = lambda m: m.forward_flops(1, 1, 8192, 64, True) / m.forward_flops(1, 1, 2048, 64, True)  # noqa: E731
    assert ratio(linear) == pytest.approx(4.0, rel=0.01)
    assert ratio(softmax) == pytest.approx(16.0, rel=0.01)
