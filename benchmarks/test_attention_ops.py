"""Causal forward+backward of each method's fast path and of SDPA softmax across lengths
(D = 64, 4 heads, float32 on the CPU / bfloat16 on CUDA), a square matmul as the machine's
practical limit, the batched products the chunked path is made of, and the board's training
shapes. Run with ``pytest benchmarks --benchmark-enable --benchmark-only``; the goal ratios of the
run are printed at the end (benchmarks/goals.py)."""

from __future__ import annotations

import pytest
import torch

import methods
from benchmarks.goals import (
    BOARD_LENGTHS,
    BOARD_SHAPE,
    FAST_PATH,
    LENGTHS,
    LONG_LENGTHS,
    LONG_TOKENS,
    SHAPE,
    build,
    method_options,
    whole_step_flops,
)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPE = torch.bfloat16 if DEVICE.type == "cuda" else torch.float32
ROUNDS = 5


def synchronize() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def inputs(shape: dict, n: int, query_key_dim: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """q, k (at the width the method reads them: Taylor's 16), v (leaves requiring grad) and the
    output gradient."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed + n)
    sizes = [(shape["batch"], shape["heads"], n, width)
             for width in (query_key_dim, query_key_dim, shape["value_dim"], shape["value_dim"])]
    q, k, v, grad_out = (torch.randn(s, generator=generator, device=DEVICE, dtype=DTYPE) for s in sizes)
    return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), grad_out


def time_forward_backward(benchmark, method: str, shape: dict, n: int, rounds: int = ROUNDS) -> None:
    impl = FAST_PATH[method]
    if impl == "chunk" and DEVICE.type == "cuda" and "triton" in build(method, shape["head_dim"]).impls:
        impl = "triton"
    module = build(method, shape["head_dim"], impl).to(DEVICE)
    q, k, v, grad_out = inputs(shape, n, module.query_key_dim)

    def forward_backward():
        out = module(q, k, v, causal=True)
        torch.autograd.grad(out, (q, k, v), grad_out)
        synchronize()

    benchmark.extra_info.update(method=method, impl=impl, length=n, dtype=str(DTYPE), **shape,
                                options=module.resolved_options())
    benchmark.pedantic(forward_backward, rounds=rounds, warmup_rounds=1, iterations=1)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("method", list(FAST_PATH))
def test_causal_forward_backward(benchmark, keep_median, method, n):
    benchmark.group = f"causal fwd+bwd N={n}"
    time_forward_backward(benchmark, method, SHAPE, n)
    keep_median(("module", method, n), benchmark)


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


# The batched products of the chunked path on one segment (2048 tokens = 32 chunks of 64, F = E = 64):
# scores q k^T, scores @ v, the chunk states k^T v, the queries against the states; and the
# same at chunks of 128. Label: (batch, m, k, n).
PRODUCTS = [(32, 64, 64, 64), (16, 128, 64, 128), (16, 128, 128, 64), (32, 64, 64, 266)]


@pytest.mark.parametrize("batch, m, k, n", PRODUCTS, ids=lambda x: str(x))
def test_batched_product(benchmark, keep_median, batch, m, k, n):
    a = torch.randn(batch, m, k, device=DEVICE, dtype=DTYPE)
    b = torch.randn(batch, k, n, device=DEVICE, dtype=DTYPE)
    out = torch.empty(batch, m, n, device=DEVICE, dtype=DTYPE)
    repeats = 64  # one product is microseconds: time a run of them

    def products():
        for _ in range(repeats):
            torch.bmm(a, b, out=out)
        synchronize()

    flops = 2.0 * batch * m * k * n * repeats
    benchmark.group = "batched products"
    benchmark.extra_info.update(shape=[batch, m, k, n], flops=flops)
    benchmark.pedantic(products, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    keep_median(("product", f"{batch}x({m}x{k} @ {k}x{n})", flops), benchmark)


# -- the board's shapes ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", BOARD_LENGTHS)
@pytest.mark.parametrize("method", list(FAST_PATH))
def test_board_attention(benchmark, keep_median, method, n):
    benchmark.group = f"board attention fwd+bwd N={n}"
    time_forward_backward(benchmark, method, BOARD_SHAPE, n, rounds=10)
    keep_median(("board", method, n), benchmark)


@pytest.mark.parametrize("n", BOARD_LENGTHS)
@pytest.mark.parametrize("method", list(FAST_PATH))
def test_board_training_step(benchmark, keep_median, method, n):
    """One AdamW step of the board's MQAR model (model=hybrid: a gated convolution, then the method
    in one head of 64; batch 64, vocabulary 512) on the CPU board's data."""
    from types import SimpleNamespace

    import yaml

    from suite.__main__ import CONF_DIR
    from suite.model import build_model, token_loss
    from tasks.recall.mqar import make

    model_config = yaml.safe_load((CONF_DIR / "model" / "hybrid.yaml").read_text())
    ids, labels = make(BOARD_SHAPE["batch"], n, n // 16, 512, seed=0)
    info = SimpleNamespace(vocab_size=513, seq_len=n, num_classes=513, extra={})
    torch.manual_seed(0)
    method_block = {"name": method, "impl": "auto", "options": method_options(method)}
    model = build_model("decoder", info, model_config, method_block).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {"input_ids": ids.to(DEVICE), "label": labels.to(DEVICE)}

    def step():
        logits, target = model(batch)
        optimizer.zero_grad(set_to_none=True)
        token_loss(logits, target).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        synchronize()

    benchmark.group = f"board training step N={n}"
    benchmark.extra_info.update(method=method, length=n, batch=BOARD_SHAPE["batch"], model="hybrid")
    benchmark.pedantic(step, rounds=10, warmup_rounds=2, iterations=1)
    keep_median(("train", method, n), benchmark)


# -- the long board's shapes -------------------------------------------------------------------------
@pytest.mark.parametrize("n", LONG_LENGTHS)
@pytest.mark.parametrize("method", list(FAST_PATH))
def test_long_training_step(benchmark, keep_median, method, n):
    """One AdamW step of the long board's MQAR model (point=cpu_mqar_256x64: model=hybrid, vocabulary
    8,192) at LONG_TOKENS tokens per step, with the FLOPs of the whole step (benchmarks/goals.py
    ``whole_step_flops``): the goal lines set its time over softmax's beside the ratio of the FLOPs."""
    from types import SimpleNamespace

    import yaml

    from suite.__main__ import CONF_DIR
    from suite.model import build_model, token_loss
    from tasks.recall.mqar import make

    model_config = yaml.safe_load((CONF_DIR / "model" / "hybrid.yaml").read_text())
    batch_size, vocab = LONG_TOKENS // n, 8192
    ids, labels = make(batch_size, n, n // 4, vocab, seed=0)
    info = SimpleNamespace(vocab_size=vocab + 1, seq_len=n, num_classes=vocab + 1, extra={})
    torch.manual_seed(0)
    method_block = {"name": method, "impl": "auto", "options": method_options(method)}
    model = build_model("decoder", info, model_config, method_block).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {"input_ids": ids.to(DEVICE), "label": labels.to(DEVICE)}

    def step():
        logits, target = model(batch)
        optimizer.zero_grad(set_to_none=True)
        token_loss(logits, target).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        synchronize()

    calls = [(m, batch_size, model_config["num_heads"], n, model_config["d_model"] // model_config["num_heads"])
             for m in model.modules() if isinstance(m, methods.AttentionMethod)]
    flops = whole_step_flops(model, step, calls)
    benchmark.group = f"long training step N={n}"
    benchmark.extra_info.update(method=method, length=n, batch=batch_size, model="hybrid", flops=flops)
    benchmark.pedantic(step, rounds=5, warmup_rounds=1, iterations=1)
    keep_median(("long", method, n, flops), benchmark)
