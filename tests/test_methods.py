"""The contract every registered method honours (DESIGN.md, "A method"), tested over
methods.available(): every implementation against the method's naive definition on awkward shapes,
outputs and the gradients of q, k, v and of every learned parameter, in float32 and bfloat16; the
recurrent form against the causal parallel form; options; and the costs it declares (FLOPs as
computed, the bytes of its decoding state, how its time grows with N).

A new method is tested here by registering it. OPTION_VARIANTS may add the option settings that
take another path through it; what is specific to one method stays in tests/test_<method>.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import methods
from methods._featuremap.module import FeatureMapAttention
from methods.base import MethodError
from tests.utils import assert_close

HEADS = 2  # every case's head count: loglinear's per-head variant is built for it
# Option settings that take another path through a method, beside its defaults (with which every
# method is tested); a method absent here is tested with its defaults alone.
OPTION_VARIANTS = {
    "taylor": [{"feature_dim": 4}, {"feature_dim": 4, "symmetric_half": True}],  # q, k narrower than v
    "loglinear": [{"decay": True}, {"decay": True, "num_heads": HEADS}],  # the gates; one projection per head
    "hedgehog": [{"feature_dim": 7}],  # an odd feature_dim, above and below the head dims
    "sliding_window": [{"window": 1}, {"window": 5}, {"window": 17}],  # the token alone; not dividing N; a band
}
VARIANTS = [(name, {}) for name in methods.available()] + [
    (name, options) for name, settings in OPTION_VARIANTS.items() if name in methods.available() for options in settings
]
CHUNKED = [name for name in methods.available() if "chunk_size" in methods.get(name).method_options]
WITH_TRITON = [name for name in methods.available() if "triton" in methods.get(name).impls]
WITH_FEATURE_MAP = [name for name in methods.available() if hasattr(methods.get(name), "feature_map")]


def variant_id(variant) -> str:
    name, options = variant
    return name + "".join(f"-{key}={value}" for key, value in options.items())


# (batch, N, head dim, value dim, chunk): one token; below, at and across a chunk; N not a multiple
# of the chunk; odd head and value dims; batch > 1; the chunk the methods run at (64) at D = 64.
# bfloat16 takes the same paths and only rounds otherwise: one token, an odd shape, D = 64.
SHAPES = [(2, 1, 5, 3, 16), (1, 7, 16, 9, 16), (2, 16, 8, 8, 16), (2, 37, 9, 5, 16), (1, 64, 24, 13, 16),
          (1, 65, 24, 13, 64), (1, 200, 64, 37, 64)]
SHAPES_BY_DTYPE = {torch.float32: SHAPES, torch.bfloat16: [SHAPES[0], SHAPES[3], SHAPES[6]]}
# Triton runs under the interpreter on the CPU (tests/conftest.py), which is slow: small shapes, and
# each method's defaults only. Its options change what the kernels are handed (the feature maps run
# in PyTorch first), not the kernels, but for loglinear's gates: tests/test_loglinear.py runs those.
TRITON_SHAPES_BY_DTYPE = {torch.float32: [(2, 1, 5, 3, 16), (1, 19, 9, 8, 16)], torch.bfloat16: [(1, 19, 9, 8, 16)]}
# Float32 paths agree to rounding. bfloat16 inputs: the paths compute in float32 inside, so the
# error is mostly the rounding of the output and of the input gradients (2^-8 relative) and a few
# roundings more. The feature-map core's Triton path in bfloat16 also rounds the features and values
# it multiplies, and the gradients of phi carry v_j - o_i, a difference that amplifies those
# roundings where few keys are seen (tests/test_featuremap_triton.py; 2.5e-2 seen here).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1.5e-2}
ROUNDED_FEATURES_TOLERANCE = 5e-2
# Implementations the contract runs on CUDA only, each with why and where its CPU side is tested.
CUDA_ONLY = {"flex": "FlexAttention has no backward on the CPU (tests/test_sliding_window.py)"}
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build(variant, head_dim: int, impl: str = "naive", chunk_size: int = 16) -> methods.AttentionMethod:
    """The method with its learned parameters moved off their initial values (so that e.g.
    loglinear's level weights differ per level and hedgehog's biases are not zero)."""
    name, options = variant
    chunk = {"chunk_size": chunk_size} if "chunk_size" in methods.get(name).method_options else {}
    torch.manual_seed(0)
    module = methods.build(name, head_dim=head_dim, impl=impl, **chunk, **options)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    return module.eval()


def random_qkv(batch: int, n: int, d: int, e: int, dtype=torch.float32, device=DEVICE) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(n * 1000 + d)
    shapes = [(batch, HEADS, n, d), (batch, HEADS, n, d), (batch, HEADS, n, e)]
    return [torch.randn(shape, generator=generator).to(device, dtype).requires_grad_() for shape in shapes]


def outputs_and_grads(module, q, k, v, causal: bool) -> dict[str, torch.Tensor]:
    """The output and the gradients of a fixed random projection of it w.r.t. q, k, v and every
    learned parameter, by name."""
    out = module(q, k, v, causal=causal)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.device, out.dtype)
    named = {"dq": q, "dk": k, "dv": v, **{f"d{name}": p for name, p in module.named_parameters()}}
    return {"o": out, **dict(zip(named, torch.autograd.grad(out, list(named.values()), upstream)))}


# Where a query sees one key (one token, a window of one) its output is that key's value whatever
# the weights are (up to eps): the gradients of q, k and the weights' parameters vanish there, and
# what is left is rounding. A tensor whose reference vanishes must vanish too.
VANISHING = 1e-5


def compare(reference: dict, fast: dict, tol: float) -> None:
    """Every named tensor of ``fast`` against ``reference``."""
    assert fast.keys() == reference.keys()
    for name, ref in reference.items():
        ref, out = ref.float(), fast[name].float()
        if ref.abs().max() < VANISHING:
            assert out.abs().max() < VANISHING, f"{name}: {out.abs().max():.1e} where the reference vanishes"
        else:
            assert_close(name, ref, out, tol)


def runs_here(impl: str) -> bool:
    return impl not in CUDA_ONLY or DEVICE.type == "cuda"


def device_for(impl: str) -> torch.device:
    """Triton's and the CUDA-only paths' device: CUDA where there is one (else the interpreter's CPU)."""
    return DEVICE if impl == "triton" or impl in CUDA_ONLY else torch.device("cpu")


def path_cases() -> list:
    """(variant, impl, shape, dtype) for every implementation but the naive one it is compared with."""
    cases = []
    for variant in VARIANTS:
        for impl in methods.get(variant[0]).impls:
            if impl == "naive" or not runs_here(impl) or (impl == "triton" and variant[1]):
                continue
            by_dtype = TRITON_SHAPES_BY_DTYPE if impl == "triton" else SHAPES_BY_DTYPE
            cases += [pytest.param(variant, impl, shape, dtype, id=f"{variant_id(variant)}-{impl}-"
                                   f"{'x'.join(map(str, shape))}-{str(dtype)[6:]}")
                      for dtype, shapes in by_dtype.items() for shape in shapes]
    return cases


# -- the parallel form: every path against the naive definition --------------------------------------
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant, impl, shape, dtype", path_cases())
def test_every_path_matches_the_naive_definition(variant, impl, shape, dtype, causal):
    batch, n, d, e, chunk = shape
    device = device_for(impl)
    naive, fast = build(variant, d, "naive", chunk).to(device), build(variant, d, impl, chunk).to(device)
    q, k, v = random_qkv(batch, n, naive.query_key_dim, e, dtype, device)
    reference = outputs_and_grads(naive, *(t.detach().float().requires_grad_() for t in (q, k, v)), causal)
    out = outputs_and_grads(fast, q, k, v, causal)
    assert out["o"].dtype == out["dq"].dtype == out["dv"].dtype == dtype
    rounded_features = impl == "triton" and dtype == torch.bfloat16 and isinstance(fast, FeatureMapAttention)
    compare(reference, out, ROUNDED_FEATURES_TOLERANCE if rounded_features else TOLERANCE[dtype])


# -- the recurrent form: stepping is the causal parallel form, one token at a time ------------------
STEP_CASES = [pytest.param(variant, impl, id=f"{variant_id(variant)}-{impl}") for variant in VARIANTS
              for impl in methods.get(variant[0]).impls if runs_here(impl)]


@pytest.mark.parametrize("n", [1, 7, 16, 37, 100])  # powers of two and not; loglinear's levels merge at 64
@pytest.mark.parametrize("variant, impl", STEP_CASES)
def test_stepping_equals_the_causal_parallel_form(variant, impl, n):
    """With each impl, whose step may attend otherwise (softmax's and sliding_window's SDPA)."""
    d, e = 16, 5
    naive, module = build(variant, d), build(variant, d, impl)
    device = device_for(impl)
    q, k, v = (t.detach() for t in random_qkv(2, n, module.query_key_dim, e, device=device))
    state, outputs = module.to(device).init_state(2, HEADS, module.query_key_dim, e, device=device), []
    for t in range(n):
        o_t, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outputs.append(o_t)
    assert_close("o", naive.to(device)(q, k, v, causal=True), torch.stack(outputs, dim=2), 1e-4)


@pytest.mark.parametrize("name", methods.available())
def test_a_state_for_another_head_dim_or_head_count_is_refused(name):
    module = methods.build(name, head_dim=16)
    with pytest.raises(MethodError, match=rf"^{name}: built (for|with) (head_dim=16|queries and keys of width 16), "
                                             r"init_state got 32"):
        module.init_state(2, 3, 32, 8)
    q_t, k_t, v_t = (torch.randn(2, 3, d) for d in (16, 16, 8))
    with pytest.raises(MethodError, match=rf"^{name}: "):
        module.step(q_t, k_t, v_t, module.init_state(2, 4, 16, 8))


# -- options, implementations and input shapes -------------------------------------------------------
def test_methods_are_registered_in_canonical_order_then_alphabetically():
    names = methods.available()
    canonical = [name for name in methods.CANONICAL_ORDER if name in names]
    assert list(names[:len(canonical)]) == canonical
    assert list(names[len(canonical):]) == sorted(names[len(canonical):])


@pytest.mark.parametrize("name", methods.available())
def test_unknown_option_and_impl_are_named_with_the_valid_ones(name):
    method = methods.get(name)
    valid_options = ", ".join(sorted(method.method_options)) or "none"
    with pytest.raises(MethodError, match=rf"^{name}: unknown option\(s\) wibble; valid options: {valid_options}$"):
        methods.build(name, head_dim=8, wibble=1)
    with pytest.raises(MethodError, match=f"^unknown impl 'fast' for method '{name}'; valid: "
                                          f"{', '.join(('auto', *method.impls))}$"):
        methods.build(name, head_dim=8, impl="fast")


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_a_size_the_method_derives_is_no_option(variant):
    """num_features, map_dim, max_length...: resolved_options reports them, a config may not set them."""
    name, options = variant
    module = build(variant, 16)
    for key in sorted(set(module.resolved_options()) - set(module.method_options)):
        with pytest.raises(MethodError, match=rf"^{name}: unknown option\(s\) {key}; valid options: "):
            methods.build(name, head_dim=16, **options, **{key: 8})


@pytest.mark.parametrize("bad", [0, -4, 2.5, True])
@pytest.mark.parametrize("name", CHUNKED)
def test_a_bad_chunk_size_is_named(name, bad):
    with pytest.raises(MethodError, match=rf"^{name}: (option )?chunk_size must be .*, got {bad!r}$"):
        methods.build(name, head_dim=8, chunk_size=bad)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_resolved_options_hold_every_option_with_nulls_resolved(variant):
    module = build(variant, 16)
    resolved = module.resolved_options()
    assert set(module.method_options) <= set(resolved)
    json.dumps(resolved)  # a record stores it
    if "num_features" in resolved:
        assert isinstance(resolved["num_features"], int) and resolved["num_features"] > 0


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
# The method options as conf/method/<name>.yaml held them when the records under results/ ran (keys,
# values, order): the configs made from the classes must stay these, or the records' hashes move.
RECORDED_OPTIONS = {
    "softmax": {},
    "linear": {"chunk_size": 64},
    "favor": {"chunk_size": 64, "num_features": None, "redraw_interval": 0, "seed": 0},
    "taylor": {"chunk_size": 64, "symmetric_half": False, "feature_dim": 16},
    "loglinear": {"chunk_size": 64, "feature_map": "elu", "num_levels": 21, "decay": False, "num_heads": None},
    "hedgehog": {"chunk_size": 64, "feature_dim": None},
    "sliding_window": {"window": 64, "chunk_size": 64},
}


@pytest.mark.parametrize("name", methods.available())
def test_the_method_config_is_the_class_defaults(name):
    """``method=<name>`` composes the class's own defaults (suite/groups.py), with its
    ``run_defaults``: written once, they cannot drift apart as redraw_interval once did (1000 in
    conf, 0 in the module)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        block = OmegaConf.to_container(compose("config", overrides=[f"method={name}"]).method)
    cls = methods.get(name)
    assert block == {"name": name, "impl": "auto", "options": {**cls.method_options, **cls.run_defaults}}
    assert list(block["options"]) == list(cls.method_options)


@pytest.mark.parametrize("name", RECORDED_OPTIONS)
def test_the_built_in_configs_are_the_ones_the_records_ran(name):
    from suite.groups import method_config

    options = method_config(methods.get(name))["options"]
    assert list(options.items()) == list(RECORDED_OPTIONS[name].items())


@pytest.mark.parametrize("name", methods.available())
def test_every_run_default_is_an_option_that_differs(name):
    """A run default names an option of the method and changes it (else it is noise)."""
    cls = methods.get(name)
    for key, value in cls.run_defaults.items():
        assert key in cls.method_options and cls.method_options[key] != value, (name, key)


def test_a_run_default_for_no_option_is_refused(monkeypatch):
    from suite.groups import method_config

    monkeypatch.setattr(methods.get("taylor"), "run_defaults", {"feature_dims": 16})
    with pytest.raises(MethodError, match="taylor: run_defaults names option.s. feature_dims the method does not take"):
        method_config(methods.get("taylor"))


@pytest.mark.parametrize("name", methods.available())
def test_auto_on_the_cpu_is_a_fast_path_the_method_has(name):
    module = methods.build(name, head_dim=8)
    chosen = module.resolve_impl(torch.device("cpu"))
    assert chosen in module.impls and chosen not in ("naive", "triton") and chosen not in CUDA_ONLY


@pytest.mark.parametrize("name", methods.available())
def test_shape_mismatches_are_named(name):
    module = methods.build(name, head_dim=8)
    q = torch.randn(2, 3, 5, 8)
    with pytest.raises(MethodError, match="built for queries and keys of width 8, got D=4"):
        module(q[..., :4], q[..., :4], q)
    with pytest.raises(MethodError, match="v must share"):
        module(q, q, torch.randn(2, 3, 6, 8))
    with pytest.raises(MethodError, match="must have shape"):
        module(q[0], q[0], q[0])


@pytest.mark.parametrize("name", WITH_TRITON)
def test_triton_without_cuda_or_interpreter_is_a_clear_error(name, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = methods.build(name, head_dim=8, impl="triton")
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(MethodError, match="Triton kernels need a CUDA device, or TRITON_INTERPRET=1"):
        module(q, q, q)


@pytest.mark.parametrize("name", WITH_FEATURE_MAP)
def test_feature_map_kind_and_shape(name):
    module = methods.build(name, head_dim=8)
    x = torch.randn(2, 3, 5, 8)
    features = module.resolved_options()["num_features"]
    assert module.feature_map(x, "query").shape == module.feature_map(x, "key").shape == (2, 3, 5, features)
    with pytest.raises(MethodError, match="query, key, got 'value'"):
        module.feature_map(x, "value")


# -- costs: what the harness reads from the method ---------------------------------------------------
COST_DIM, COST_VALUE_DIM = 16, 7  # an odd value dim on purpose


@pytest.mark.parametrize("n", [1, 5, 64, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_state_bytes_are_the_bytes_prefill_state_holds(variant, n, dtype):
    module = build(variant, COST_DIM)
    k = torch.randn(2, HEADS, n, module.query_key_dim, dtype=dtype)
    v = torch.randn(2, HEADS, n, COST_VALUE_DIM, dtype=dtype)
    state = module.prefill_state(k, v)
    held = sum(t.nbytes for t in (state.values() if isinstance(state, dict) else state))
    assert module.state_bytes(2, HEADS, n, COST_VALUE_DIM, dtype) == held


def product_flops(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """2 m n k of (..., m, k) @ (..., k, n), batched or not."""
    *batch, m, k = a_shape
    return 2 * m * k * b_shape[-1] * (batch[0] if batch else 1)


# torch's counter knows the out-of-place products only; the in-place ones are the same products.
IN_PLACE = {torch.ops.aten.baddbmm_: product_flops, torch.ops.aten.addmm_: product_flops}


def counted_flops(module, n: int, causal: bool) -> tuple[int, int]:
    """(forward, backward) FLOPs that torch's counter sees for one call of the module's impl."""
    q, k, v = random_qkv(2, n, module.query_key_dim, COST_VALUE_DIM, device="cpu")
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as forward:
        out = module(q, k, v, causal=causal)
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as backward:
        out.backward(torch.randn_like(out))
    return forward.get_total_flops(), backward.get_total_flops()


# N = 1 is left out: there a product over one key is an elementwise multiply to PyTorch, which the
# counter does not count.
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("n", [7, 16, 65, 200])  # chunks of 16: several, blocks of them, a short last one
@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_flops_count_the_products_each_cpu_impl_runs(variant, n, causal):
    module = build(variant, COST_DIM)
    for impl in ("naive", "chunk"):  # sdpa is one fused op to the counter, which ignores the causal mask
        if impl not in module.impls:
            continue
        module.impl = impl
        declared = (module.forward_flops(2, HEADS, n, COST_VALUE_DIM, causal, impl),
                    module.backward_flops(2, HEADS, n, COST_VALUE_DIM, causal, impl))
        assert counted_flops(module, n, causal) == pytest.approx(declared, rel=1e-9), impl


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_flops_scale_with_batch_and_heads_and_name_the_impl(variant):
    module = build(variant, COST_DIM)
    one = module.forward_flops(1, 1, 300, COST_VALUE_DIM, causal=True)
    assert one > 0 and module.forward_flops(2, 3, 300, COST_VALUE_DIM, causal=True) == pytest.approx(6 * one)
    assert module.backward_flops(1, 1, 300, COST_VALUE_DIM, causal=True) > one
    assert module.flop_impl() == module.resolve_impl(torch.device("cpu"))
    for impl in module.impls:
        assert module.forward_flops(1, 1, 300, COST_VALUE_DIM, True, impl) > 0
    with pytest.raises(MethodError, match="valid"):
        module.forward_flops(1, 1, 300, COST_VALUE_DIM, True, impl="fast")


# How the FLOPs of the default path grow from N = 2048 to 4N for each declared time_in_length:
# 16x quadratic, 4x linear, and N log N in between, near 4 log 4N / log N = 4.7.
GROWTH = {"N^2": lambda ratio: ratio == pytest.approx(16.0, rel=0.01),
          "N": lambda ratio: ratio == pytest.approx(4.0, rel=0.01),
          "N log N": lambda ratio: 4.0 * 1.1 < ratio < 4.0 * 1.3}


@pytest.mark.parametrize("name", methods.available())
def test_flops_grow_with_n_as_the_declared_time_in_length(name):
    module = methods.build(name, head_dim=64)
    ratio = module.forward_flops(1, 1, 8192, 64, True) / module.forward_flops(1, 1, 2048, 64, True)
    assert GROWTH[module.time_in_length](ratio), (module.time_in_length, ratio)
