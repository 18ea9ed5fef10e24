"""Log-linear attention: the Fenwick levels, the naive definition, the fast paths beyond the
contract's shapes (tests/test_methods.py holds every path against the naive one, and stepping), its
limits, and its recurrent states (levels, the fixed layout)."""

from __future__ import annotations

import os

# Triton decides at import whether to interpret; kernels run on the CPU only when interpreted.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
import torch.nn.functional as F

import methods
from methods.base import MethodError
from methods.loglinear import level_matrix
from methods.loglinear.naive import causal_weights
from tests.utils import assert_close

BATCH, HEADS = 2, 3
# Stated tolerances: float32 paths agree to rounding (observed ~1e-6); bfloat16 inputs carry ~3
# significant digits (observed up to 8e-3 against the float32 reference of the unrounded inputs).
FP32_TOL = 1e-4
BF16_TOL = 2e-2


def build(impl: str, head_dim: int, decay: bool = True, chunk_size: int = 16, seed: int = 0,
          **options) -> methods.AttentionMethod:
    """A loglinear module with perturbed parameters, so level weights differ per level and token."""
    module = methods.build("loglinear", head_dim=head_dim, impl=impl, decay=decay, chunk_size=chunk_size,
                           num_heads=HEADS, **options)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.add_(noise * (0.5 if "bias" in name else 0.3))
    return module


def inputs(n: int, dim: int, value_dim: int, dtype=torch.float32, seed: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(BATCH, HEADS, n, dim), (BATCH, HEADS, n, dim), (BATCH, HEADS, n, value_dim)]
    return [torch.randn(shape, generator=generator).to(dtype).requires_grad_() for shape in shapes]


def output_and_grads(module, q, k, v, causal: bool) -> dict[str, torch.Tensor]:
    """The output and the gradients of a fixed random projection of it w.r.t. inputs and parameters."""
    out = module(q, k, v, causal=causal)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.dtype)
    named = {"dq": q, "dk": k, "dv": v, **{f"d{name}": p for name, p in module.named_parameters()}}
    grads = torch.autograd.grad(out, list(named.values()), upstream)
    return {"o": out, **dict(zip(named, grads))}


# With a single token the output is v * w / (w + eps): gradients other than dv are of order eps,
# pure rounding, so there only their smallness is checked.
VANISHING = 1e-5


def compare(reference: dict[str, torch.Tensor], fast: dict[str, torch.Tensor], tol: float) -> None:
    for name in reference:
        ref, out = reference[name].float(), fast[name].float()
        if ref.abs().max() < VANISHING:
            assert out.abs().max() < VANISHING, f"{name}: {out.abs().max():.1e} where the reference vanishes"
        else:
            assert_close(name, ref, out, tol)


# -- the levels ----------------------------------------------------------------------------------
def fenwick_levels_by_buckets(n: int) -> torch.Tensor:
    """Levels from the bucket construction: [0, t) split by the set bits of t, high to low."""
    levels = torch.full((n, n), -1, dtype=torch.int64)
    for t in range(n):
        levels[t, t] = 0
        start = 0
        for bit in reversed(range(t.bit_length())):
            if t >> bit & 1:
                levels[t, start : start + (1 << bit)] = bit + 1
                start += 1 << bit
    return levels


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33, 100])
def test_level_matrix_matches_fenwick_buckets(n):
    assert torch.equal(level_matrix(n), fenwick_levels_by_buckets(n))


def test_naive_weights_follow_the_definition():
    """Each causal weight, written out: lambda_t[l(t,s)] * phi_q.phi_k * prod of the gates after s up to t."""
    n, dim, levels = 9, 4, 5
    generator = torch.Generator().manual_seed(0)
    phi_q, phi_k = (torch.rand(1, 1, n, dim, generator=generator) for _ in range(2))
    lam = torch.rand(1, 1, n, levels, generator=generator) + 0.5
    log_gates = -torch.rand(1, 1, n, generator=generator)
    weights = causal_weights(phi_q, phi_k, lam, log_gates)[0, 0]
    for t in range(n):
        for s in range(n):
            expected = 0.0
            if s <= t:
                decay = torch.exp(log_gates[0, 0, s + 1 : t + 1].sum())
                expected = lam[0, 0, t, (t ^ s).bit_length()] * (phi_q[0, 0, t] @ phi_k[0, 0, s]) * decay
            assert abs(float(weights[t, s]) - float(expected)) <= 1e-6, (t, s)


# -- the starting point: causal linear attention ------------------------------------------------
def linear_attention(q, k, v, causal: bool, eps: float = 1e-6) -> torch.Tensor:
    """elu+1 linear attention from running sums (causal) or global sums."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    kv = phi_k[..., :, None] * v[..., None, :]
    if causal:
        kv_sums, k_sums = kv.cumsum(2), phi_k.cumsum(2)
    else:
        kv_sums, k_sums = kv.sum(2, keepdim=True), phi_k.sum(2, keepdim=True)
    numerator = torch.einsum("bhnd,bhnde->bhne", phi_q, kv_sums.expand(*kv.shape))
    return numerator / ((phi_q * k_sums).sum(-1, keepdim=True) + eps)


def test_level_weights_start_at_one():
    module = methods.build("loglinear", head_dim=8)
    lam = module.level_weights(torch.randn(BATCH, HEADS, 5, 8))
    assert lam.shape == (BATCH, HEADS, 5, 21)
    assert (lam - 1).abs().max() <= 1e-7


@pytest.mark.parametrize("impl", ["naive", "chunk", "triton"])
@pytest.mark.parametrize("causal", [True, False])
def test_untrained_module_is_linear_attention(impl, causal):
    q, k, v = inputs(37, 16, 8)
    module = methods.build("loglinear", head_dim=16, impl=impl, chunk_size=16)
    assert_close("o", linear_attention(q, k, v, causal), module(q, k, v, causal=causal), FP32_TOL)


# -- fast paths against the naive definition: beyond the contract's shapes (tests/test_methods.py) ---
def check_chunk(n, chunk_size, dim, value_dim, causal, decay):
    q, k, v = inputs(n, dim, value_dim)
    reference = output_and_grads(build("naive", dim, decay, chunk_size), q, k, v, causal)
    fast = output_and_grads(build("chunk", dim, decay, chunk_size), q, k, v, causal)
    compare(reference, fast, FP32_TOL)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 63, 64, 65, 200, 513])
@pytest.mark.parametrize("chunk_size", [16, 64])
@pytest.mark.parametrize("dim,value_dim", [(16, 24), (24, 16), (64, 32)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("decay", [True, False])
def test_chunk_matches_naive_all_shapes(n, chunk_size, dim, value_dim, causal, decay):
    check_chunk(n, chunk_size, dim, value_dim, causal, decay)


# The kernels' own launches (the contract runs Triton at N = 1 and 19 with chunks of 16): chunks of
# 64, several chunks of 16, tiles split in two. (n, chunk_size, dim, value_dim, causal, decay):
# small, the interpreter is slow.
TRITON_CASES = [
    (65, 16, 24, 16, True, True),
    (40, 16, 16, 24, False, False),
    (7, 64, 16, 24, True, True),
    (40, 16, 40, 36, True, True),  # chunks of 16 read tiles of 32: features and values in two each
]
TRITON_SLOW_CASES = [
    (n, chunk_size, dim, value_dim, causal, True)
    for n in (1, 63, 64, 200)
    for chunk_size in (16, 64)
    for dim, value_dim in ((16, 24), (64, 32))
    for causal in (True, False)
] + [(40, 16, 33, 48, False, False)]


def check_triton(n, chunk_size, dim, value_dim, causal, decay):
    q, k, v = inputs(n, dim, value_dim)
    reference = output_and_grads(build("naive", dim, decay, chunk_size), q, k, v, causal)
    fast = output_and_grads(build("triton", dim, decay, chunk_size), q, k, v, causal)
    compare(reference, fast, FP32_TOL)


@pytest.mark.parametrize("case", TRITON_CASES)
def test_triton_matches_naive(case):
    check_triton(*case)


@pytest.mark.slow
@pytest.mark.parametrize("case", TRITON_SLOW_CASES)
def test_triton_matches_naive_more_shapes(case):
    check_triton(*case)


@pytest.mark.parametrize("causal", [True, False])
def test_triton_with_gates_in_bf16_against_the_float32_reference(causal):
    # The contract's bfloat16 Triton cases run loglinear's defaults, without the gates.
    q, k, v = inputs(33, 16, 24)
    reference = output_and_grads(build("naive", 16), q, k, v, causal)
    low = [t.detach().to(torch.bfloat16).requires_grad_() for t in (q, k, v)]
    fast = output_and_grads(build("triton", 16), *low, causal)
    assert fast["o"].dtype == torch.bfloat16 and fast["dq"].dtype == torch.bfloat16
    compare(reference, fast, BF16_TOL)


@pytest.mark.slow
def test_bf16_long_sequence_is_finite():
    q, k, v = (t.detach()[:1].bfloat16().requires_grad_() for t in inputs(16384, 64, 64))
    results = output_and_grads(build("chunk", 64, chunk_size=64), q, k, v, causal=True)
    for name, tensor in results.items():
        assert torch.isfinite(tensor).all(), name


# -- limits and user mistakes -------------------------------------------------------------------
def test_length_beyond_the_levels_is_an_error():
    module = methods.build("loglinear", head_dim=4, impl="chunk", num_levels=4)
    q, k, v = (torch.randn(1, 1, 8, 4) for _ in range(3))
    assert module(q, k, v, causal=True).shape == (1, 1, 8, 4)  # 2^(4-1) tokens fit in 4 levels
    with pytest.raises(MethodError, match="num_levels=4"):
        module(*(torch.randn(1, 1, 9, 4) for _ in range(3)))


def test_default_levels_cover_two_to_the_twenty_tokens():
    module = methods.build("loglinear", head_dim=1)
    assert module.num_levels == 21 and module.max_length == 2**20
    too_long = torch.zeros(1, 1, 2**20 + 1, 1)
    with pytest.raises(MethodError, match="1048577"):
        module(too_long, too_long, too_long, causal=True)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"feature_map": "relu"}, "valid: elu"),
        ({"chunk_size": 48}, "power of two"),
        ({"num_levels": 0}, "num_levels"),
        ({"decay": "yes"}, "decay"),
    ],
)
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(MethodError, match=message):
        methods.build("loglinear", head_dim=8, **options)


def test_triton_refuses_a_chunk_size_without_a_checked_launch():
    q, k, v = inputs(20, 8, 8)
    with pytest.raises(MethodError, match="chunk_size 32 has no checked launch configuration; valid: 16, 64"):
        build("triton", 8, chunk_size=32)(q, k, v, causal=True)


def test_per_head_projection_checks_the_head_count():
    module = methods.build("loglinear", head_dim=8, num_heads=3)
    with pytest.raises(MethodError, match="num_heads=3"):
        module(*(torch.randn(1, 2, 5, 8) for _ in range(3)))


# -- the recurrent form (stepping equals the causal parallel form: tests/test_methods.py) -----------
@pytest.mark.parametrize("decay", [True, False])
def test_stepping_occupies_the_levels_of_a_binary_counter(decay):
    q, k, v = (t.detach() for t in inputs(100, 16, 8))
    module = build("naive", 16, decay)
    state = module.init_state(BATCH, HEADS, 16, 8)
    for t in range(100):
        _, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        # The occupied levels are the set bits of the tokens read.
        assert module.live_states(state) == bin(t + 1).count("1") <= (t + 1).bit_length()


def test_state_memory_grows_logarithmically():
    module = methods.build("loglinear", head_dim=4)
    state = module.init_state(1, 1, 4, 4)
    state_bytes = {}
    for t in range(1, 1024):
        x = torch.randn(1, 1, 4)
        _, state = module.step(x, x, x, state)
        state_bytes[t] = sum(tensor.numel() * tensor.element_size() for tensor in state.values())
    per_level = (4 * 4 + 4) * 4  # one float32 (kv, z) pair
    assert module.live_states(state) == 10  # 1023 tokens = ten set bits
    assert max(state_bytes.values()) <= 10 * per_level + 64  # plus position and sizes
    assert state_bytes[512] < state_bytes[511]  # 511 = 0b111111111 merges into one level at 512


def test_foreign_or_misfitting_state_is_a_clear_error():
    module = methods.build("loglinear", head_dim=4)
    x = torch.randn(2, 3, 4)
    softmax_state = methods.build("softmax", head_dim=4).init_state(2, 3, 4, 4)
    with pytest.raises(MethodError, match="init_state"):
        module.step(x, x, x, softmax_state)
    with pytest.raises(MethodError, match=r"\(2, 3, 4, 4\)"):
        module.step(x, x, x, module.init_state(5, 3, 4, 4))
    state = module.init_state(2, 3, 4, 4)
    _, state = module.step(x, x, x, state)
    del state["kv_level1"]
    with pytest.raises(MethodError, match="do not match"):
        module.step(x, x, x, state)


def test_stepping_past_the_levels_is_an_error():
    module = methods.build("loglinear", head_dim=4, num_levels=2)  # two tokens at most
    state = module.init_state(1, 1, 4, 4)
    x = torch.randn(1, 1, 4)
    for _ in range(2):
        _, state = module.step(x, x, x, state)
    with pytest.raises(MethodError, match="num_levels=2"):
        module.step(x, x, x, state)


# -- the fixed layout: a step without host syncs ---------------------------------------------------
@pytest.mark.parametrize("n", [1, 37, 100])
@pytest.mark.parametrize("decay", [True, False])
def test_fixed_step_equals_the_levels_step(n, decay):
    q, k, v = (t.detach() for t in inputs(n, 16, 8))
    module = build("chunk", 16, decay)
    levels, fixed = module.init_state(BATCH, HEADS, 16, 8), module.init_state(BATCH, HEADS, 16, 8, max_length=n)
    for t in range(n):
        out_levels, levels = module.step(q[:, :, t], k[:, :, t], v[:, :, t], levels)
        out_fixed, fixed = module.step(q[:, :, t], k[:, :, t], v[:, :, t], fixed)
        assert_close(f"o at {t}", out_levels, out_fixed, 1e-6)
    expected = methods.loglinear.recurrent.to_fixed(levels, n)
    assert int(fixed["position"]) == n
    for key in ("kv", "z"):  # the same sums in the same slots, empty slots exactly zero
        assert_close(key, expected[key], fixed[key], 1e-6)
        assert torch.equal(expected[key] == 0, fixed[key] == 0)


def test_fixed_prefill_then_steps_equal_the_parallel_form():
    q, k, v = (t.detach() for t in inputs(50, 16, 8))
    module = build("chunk", 16)
    state = module.prefill_state(k[:, :, :29], v[:, :, :29], max_length=50)
    assert set(state) == {"position", "kv", "z"} and state["kv"].shape[2] == 6  # 50 < 2^6
    outputs = []
    for t in range(29, 50):
        out, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outputs.append(out)
    assert_close("o", module(q, k, v, causal=True)[:, :, 29:], torch.stack(outputs, 2), FP32_TOL)


def test_fixed_step_is_one_graph_without_host_syncs():
    """torch.compile with fullgraph=True refuses a graph break: a read of a tensor's value on the
    host (.item(), int(), bool()) or a loop whose length depends on one. What it traces is the
    sequence of operations a CUDA graph captures."""
    q, k, v = (t.detach() for t in inputs(9, 16, 8))
    module = build("chunk", 16, decay=True)
    compiled = torch.compile(module.step, fullgraph=True, backend="eager")
    eager, traced = (module.init_state(BATCH, HEADS, 16, 8, max_length=9),
                     module.init_state(BATCH, HEADS, 16, 8, max_length=9))
    with torch.no_grad():
        for t in range(9):
            expected, eager = module.step(q[:, :, t], k[:, :, t], v[:, :, t], eager)
            out, traced = compiled(q[:, :, t], k[:, :, t], v[:, :, t], traced)
            assert torch.equal(expected, out)


def test_fixed_state_past_its_slots_is_an_error():
    module = methods.build("loglinear", head_dim=4)
    state = module.init_state(1, 1, 4, 4, max_length=3)  # two slots: up to 3 tokens
    x = torch.randn(1, 1, 4)
    for _ in range(3):
        _, state = module.step(x, x, x, state)
    with pytest.raises(RuntimeError, match="fixed state full; raise max_length"):
        module.step(x, x, x, state)
    with pytest.raises(MethodError, match="num_levels=4"):
        methods.build("loglinear", head_dim=4, num_levels=4).init_state(1, 1, 4, 4, max_length=9)
