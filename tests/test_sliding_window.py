"""Sliding-window attention: the band plan, FlexAttention's block mask and kernel, what the window
means (a window of one, of N or more), the ring buffer, and its costs. The band path against the
masked-softmax definition, stepping against the causal parallel form and FLOPs against torch's
counter are the contract's (tests/test_methods.py), at windows of 1, 5, 17 and 64."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import methods
from methods.base import MethodError
from methods.sliding_window import bands, flex, ring
from tests.utils import assert_close

# Stated tolerances: float32 paths agree to rounding (observed <= 1e-6); bfloat16 inputs and
# outputs carry ~3 significant digits (observed up to 7e-3 against the float32 definition on the
# same rounded inputs, gradients included).
FP32_TOL = 1e-4
BF16_TOL = 2e-2
CHUNK = 16  # bands of 16 queries: several bands, and a short last one, at these lengths


def build(impl: str, window: int, head_dim: int, chunk_size: int = CHUNK) -> methods.AttentionMethod:
    return methods.build("sliding_window", head_dim=head_dim, impl=impl, window=window, chunk_size=chunk_size)


def inputs(batch: int, n: int, d: int, e: int, dtype=torch.float32, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(batch, 2, n, d), (batch, 2, n, d), (batch, 2, n, e)]
    return [torch.randn(shape, generator=generator).to(dtype).requires_grad_() for shape in shapes]


def output_and_grads(module, q, k, v, causal: bool) -> dict[str, torch.Tensor]:
    """The output and the gradients of a fixed random projection of it w.r.t. q, k, v."""
    out = module(q, k, v, causal=causal)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.dtype)
    return dict(zip(("o", "dq", "dk", "dv"), (out, *torch.autograd.grad(out, (q, k, v), upstream))))


def compare(reference: dict, fast: dict, tol: float) -> None:
    for name, ref in reference.items():
        if name in fast:
            assert_close(name, ref.float(), fast[name].float(), tol)


# -- the band path ------------------------------------------------------------------------------------
def test_chunk_takes_bands_where_they_are_shorter_than_the_sequence():
    # The contract's cases (tests/test_methods.py: windows 1, 5, 17 and 64 against the naive
    # definition) run both branches: one SDPA call over the sequence, and bands.
    assert bands.band_plan(100, 5, True, CHUNK) == bands.Bands(blocks=7, block=16, left=4, right=0)
    assert bands.band_plan(100, 17, False, CHUNK).width == 16 + 2 * 16
    assert bands.band_plan(37, 17, False, CHUNK) is None  # a band of 48 keys covers all 37
    assert bands.band_plan(1, 1, True, CHUNK) is None


def test_the_band_path_holds_no_n_by_n_tensor():
    seen = []
    n, window = 300, 4
    module = build("chunk", window, 8)
    q, k, v = inputs(1, n, 8, 8)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t.numel()) or t, lambda t: t):
        module(q, k, v, causal=True).sum().backward()
    assert max(seen) < n * n / 4  # the bands of 16 queries hold 300 * 19 scores, not 300^2


# -- FlexAttention: the block mask on every device, the kernel where it compiles ----------------------
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("window", [1, 3, 64, 130, 255, 500])  # 255: a tile pair just past full
@pytest.mark.parametrize("n", [1, 5, 128, 200, 300])
def test_flex_block_mask_lists_exactly_the_tiles_the_window_touches(n, window, causal):
    from torch.nn.attention.flex_attention import create_block_mask

    ours = flex.block_mask(n, window, causal, torch.device("cpu"))
    # torch's own construction from the mask at all N^2 pairs: what ours computes from the geometry.
    theirs = create_block_mask(flex.mask_mod(window, causal), None, None, n, n, device="cpu")
    assert torch.equal(ours.to_dense(), theirs.to_dense())
    positions = torch.arange(n)
    seen = bands.window_mask(positions[:, None], positions[None, :], window, causal)
    touched, full, rows = flex.tiles(n, window, causal)
    starts = torch.cat([torch.zeros(1, dtype=torch.long), rows.cumsum(0)])
    for a in range(len(rows)):
        for b in range(len(rows)):
            tile = seen[starts[a]:starts[a + 1], starts[b]:starts[b + 1]]
            assert bool(touched[a, b]) == bool(tile.any()) and (not full[a, b] or bool(tile.all()))
    assert int(seen.sum()) <= flex.tile_pairs(n, window, causal) <= n * n


def test_flex_on_the_cpu_refuses_a_backward_with_a_clear_error():
    q, k, v = inputs(1, 8, 16, 16)
    with pytest.raises(MethodError, match="impl=flex has no backward on the CPU.*use impl=chunk"):
        build("flex", 4, 16)(q, k, v)


def test_auto_is_flex_on_cuda_and_the_band_path_on_the_cpu():
    module = build("auto", 8, 16)
    assert module.resolve_impl(torch.device("cpu")) == "chunk"
    assert module.flop_impl() == "chunk"
    pytest.importorskip("triton")
    assert module.resolve_impl(torch.device("cuda")) == "flex"


FLEX_CASES = [((1, 1, 16, 16), 1, True, torch.float32), ((2, 200, 7, 5), 5, False, torch.float32),
              ((1, 300, 16, 24), 130, True, torch.bfloat16)]


def check_flex(device: str, backward: bool) -> None:
    for (batch, n, d, e), window, causal, dtype in FLEX_CASES:
        q, k, v = (t.to(device) for t in inputs(batch, n, d, e, dtype))
        reference = output_and_grads(build("naive", window, d), q, k, v, causal)
        if backward:
            fast = output_and_grads(build("flex", window, d), q, k, v, causal)
        else:
            with torch.no_grad():
                fast = {"o": build("flex", window, d)(q, k, v, causal=causal)}
        compare(reference, fast, FP32_TOL if dtype == torch.float32 else BF16_TOL)


@pytest.mark.slow  # each case compiles a C++ kernel (seconds each)
def test_compiled_flex_forward_on_the_cpu_equals_naive():
    check_flex("cpu", backward=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_flex_on_cuda_equals_naive_forward_and_backward():
    check_flex("cuda", backward=True)


# -- what the window means ----------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("impl", ["naive", "chunk"])
def test_a_window_of_n_or_more_is_softmax_attention(impl, causal):
    q, k, v = inputs(2, 23, 8, 6)
    softmax = methods.build("softmax", head_dim=8, impl="naive")(q, k, v, causal=causal)
    for window in (23, 24, 1000):
        assert_close(f"window {window}", softmax, build(impl, window, 8)(q, k, v, causal=causal), FP32_TOL)


def test_a_window_of_one_returns_each_tokens_own_value():
    q, k, v = inputs(1, 9, 4, 3)
    for causal in (True, False):
        assert_close("o", v, build("chunk", 1, 4)(q, k, v, causal=causal), FP32_TOL)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64", None])
@pytest.mark.parametrize("option", ["window", "chunk_size"])
def test_a_bad_window_or_chunk_is_a_clear_error(option, bad):
    with pytest.raises(MethodError, match=rf"sliding_window: option {option} must be an integer >= 1, got "):
        methods.build("sliding_window", head_dim=8, **{option: bad})


def test_log_weights_are_softmax_scores_inside_the_window_and_minus_inf_outside():
    q, k, _ = inputs(2, 30, 8, 8)
    positions = torch.tensor([0, 7, 29])
    ours = build("naive", 4, 8).log_weights(q[..., positions, :], k, positions=positions)
    softmax = methods.build("softmax", head_dim=8).log_weights(q[..., positions, :], k, positions=positions)
    inside = (positions[:, None] - torch.arange(30)[None, :]).abs() < 4
    assert torch.equal(torch.isfinite(ours), inside.expand_as(ours))
    assert torch.equal(ours[..., inside], softmax[..., inside])


# -- the ring buffer ----------------------------------------------------------------------------------
def step_through(module, q, k, v, state):
    outputs = []
    for t in range(q.shape[2]):
        o_t, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("window", [1, 3, 8])
@pytest.mark.parametrize("n", [2, 7, 9, 16])
def test_the_ring_built_from_a_prompt_is_the_stepped_ring(n, window, dtype):
    module = build("chunk", window, 8)
    q, k, v = (t.detach().to(dtype) for t in inputs(1, n + 4, 8, 5))
    _, stepped = step_through(module, q[:, :, :n], k[:, :, :n], v[:, :, :n], module.init_state(1, 2, 8, 5, dtype=dtype))
    built = module.prefill_state(k[:, :, :n], v[:, :, :n])
    assert stepped["keys"].shape[2] == min(n, window)  # the ring's bytes are its window's, never more
    for part in ring.PARTS:
        assert torch.equal(stepped[part], built[part]), part  # the same slots, bit for bit
    assert module.state_bytes(1, 2, n, 5, dtype) == sum(t.nbytes for t in built.values())
    # Decoding on from the built ring is decoding on from the stepped one, and the parallel form.
    after, _ = step_through(module, q[:, :, n:], k[:, :, n:], v[:, :, n:], built)
    whole = build("naive", window, 8)(q.float(), k.float(), v.float(), causal=True)
    assert_close("o", whole[:, :, n:], after.float(), FP32_TOL if dtype == torch.float32 else BF16_TOL)


def test_a_ring_of_another_window_is_a_clear_error():
    module = build("chunk", 8, 8)
    state = build("chunk", 3, 8).prefill_state(torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 4))
    with pytest.raises(MethodError, match="ring holds 3 slots after 5 tokens, a window of 8 holds 5"):
        module.step(torch.randn(1, 2, 8), torch.randn(1, 2, 8), torch.randn(1, 2, 4), state)


# -- costs --------------------------------------------------------------------------------------------
def counted_flops(module, n: int, d: int, e: int, causal: bool) -> tuple[int, int]:
    q, k, v = inputs(1, n, d, e)
    with FlopCounterMode(display=False) as forward:
        out = module(q, k, v, causal=causal)
    with FlopCounterMode(display=False) as backward:
        out.backward(torch.ones_like(out))
    return forward.get_total_flops(), backward.get_total_flops()


@pytest.mark.parametrize("impl", ["chunk", "flex"])
def test_fast_path_flops_grow_as_n_times_window_not_n_squared(impl):
    module = build(impl, 64, 64, chunk_size=64)
    flops = lambda n, m=module: m.forward_flops(1, 1, n, 64, causal=True, impl=impl)  # noqa: E731
    assert flops(32768) / flops(8192) == pytest.approx(4.0, rel=0.01)  # linear in N
    wider = build(impl, 512, 64, chunk_size=64)
    ratio = wider.forward_flops(1, 1, 32768, 64, True, impl=impl) / flops(32768)
    band = {"chunk": (64 + 511) / (64 + 63), "flex": 5 / 2}[impl]  # keys a query block scores
    assert ratio == pytest.approx(band, rel=0.02)
    softmax = methods.build("softmax", head_dim=64)
    assert flops(32768) < softmax.forward_flops(1, 1, 32768, 64, True) / 50


def test_naive_flops_are_the_whole_matrix():
    module = build("naive", 4, 8)
    n, e = 50, 6
    assert module.forward_flops(1, 1, n, e, True) == 2 * n * n * (8 + e)
    assert counted_flops(module, n, 8, e, True) == (2 * 2 * n * n * (8 + e), 2 * 2 * 2 * n * n * (8 + e))


def test_state_bytes_stop_growing_at_the_window():
    module = build("chunk", 16, 8)
    per_token = 2 * 3 * (8 + 5) * 4
    assert [module.state_bytes(2, 3, n, 5) - 8 for n in (1, 15, 16, 17, 10_000)] == [
        per_token * s for s in (1, 15, 16, 16, 16)]
    assert math.isclose(module.resolved_options()["num_features"], 8)


def test_the_mqar_window_ceiling_counts_the_queries_whose_pair_is_in_view():
    # scripts/mqar_window_reach.py backs the board's note on sliding window at MQAR: checked here
    # against a per-query count of the positions that hold a key and its value after the conv.
    from scripts.mqar_window_reach import ceiling
    from tasks.base import IGNORE_LABEL
    from tasks.recall import mqar

    seq_len, pairs, examples, values = 32, 4, 50, 256
    inputs, labels = mqar.make(examples, seq_len, pairs, 512, seed=0)
    for window, kernel in ((1, 3), (3, 3), (8, 3), (16, 3), (3, 2), (3, 4)):
        seen = total = 0
        for row in range(examples):
            for q in (labels[row] != IGNORE_LABEL).nonzero().flatten().tolist():
                i = inputs[row, : 2 * pairs : 2].tolist().index(inputs[row, q].item())
                seen += any(q - p < window for p in range(2 * i + 1, 2 * i + kernel) if p <= q)
                total += 1
        expected = seen / total + (1 - seen / total) / values
        assert ceiling(seq_len, pairs, window, examples=examples, conv_kernel=kernel) == pytest.approx(expected)
    # The board's hybrid (kernel 3) is the default, and a window of the whole sequence sees every pair.
    assert ceiling(seq_len, pairs, 3, examples=examples) == ceiling(seq_len, pairs, 3, examples=examples, conv_kernel=3)
    assert ceiling(seq_len, pairs, seq_len, examples=examples) == 1.0
