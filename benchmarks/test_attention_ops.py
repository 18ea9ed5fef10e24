"""Causal forward+backward of each method's fast path and of SDPA softmax across lengths
(D = 64, 4 heads, float32 on the CPU / bfloat16 on CUDA), plus a square matmul as the machine's
practical limit. Run with ``pytest benchmarks --benchmark-enable --benchmark-only``; the goal
ratios of the run are printed at the end (benchmarks/goals.py)."""

from __future__ import annotations

import pytest
import torch

import methods
from benchmarks.goals import SHAPE
from suite.modes.kernel.implementations import method_implementations
from suite.modes.kernel.sweep import make_inputs

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPE = torch.bfloat16 if DEVICE.type == "cuda" else torch.float32
LENGTHS = (2048, 4096, 8192)
FAST_PATH = {"softmax": "sdpa", "linear": "chunk", "favor": "chunk", "taylor": "chunk", "loglinear": "chunk"}
ROUNDS = 5


def synchronize() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("method", list(FAST_PATH))
def test_causal_forward_backward(benchmark, keep_median, method, n):
    module = methods.build(method, head_dim=SHAPE["head_dim"]).to(DEVICE).eval()
    impl = FAST_PATH[method]
    if impl == "chunk" and DEVICE.type == "cuda":
        impl = "triton"
    (implementation,) = method_implementations(module, [impl], DEVICE)
    q, k, v, grad_out = make_inputs(SHAPE["batch"], SHAPE["heads"], n, SHAPE["head_dim"], SHAPE["value_dim"],
                                    DTYPE, DEVICE, seed=0)

    def forward_backward():
        out = implementation.run(q, k, v, True)
        torch.autograd.grad(out, (q, k, v), grad_out)
        synchronize()

    benchmark.group = f"causal fwd+bwd N={n}"
    benchmark.extra_info.update(method=method, impl=impl, length=n, dtype=str(DTYPE), **SHAPE)
    benchmark.pedantic(forward_backward, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    keep_median((method, "chunk" if impl in ("chunk", "triton") else impl, n), benchmark)


MATMUL_SIZE = 2048 if DEVICE.type == "cpu" else 8192


def test_square_matmul(benchmark, keep_median):
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=DEVICE, dtype=DTYPE)

    def matmul():
        a @ a
        synchronize()

    benchmark.group = "matmul"
    benchmark.extra_info.update(size=MATMUL_SIZE, dtype=str(DTYPE), flops=2 * MATMUL_SIZE**3)
    benchmark.pedantic(matmul, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    keep_median(("matmul", MATMUL_SIZE), benchmark)
