"""Floating-point operations of the attention core from features, as each implementation computes it.

Counted: the matrix products an implementation runs, 2 m n k for an (m, k) @ (k, n) product
(batched ones summed, matrix-vector products included): what a matmul's rate is measured in, and
what ``torch.utils.flop_counter.FlopCounterMode`` counts (tests/test_methods.py holds the CPU
paths to it). Not counted: elementwise work and reductions (masks, sums, the division, exp or elu
of feature maps, casts), bound by memory rather than by the multiply rate: the gap between a
measured rate and a matmul's is what they cost. Counts are per (batch, head); F features, E values.

Causal chunked (chunk.py), per chunk of l tokens (the last one may be shorter):
    forward   2 l^2 F (scores) + 2 l^2 E (scores @ v), and with more than one chunk
              4 l F E + 2 l F (its state; the queries against the sums before it, with the
              denominator's matrix-vector product) + 2 C_b^2 F (E + 1) per block of C_b chunks
              (the prefix sums over the block's chunks, done as a product with a triangle of ones)
    backward  4 l^2 (F + E) (d scores, d phi_q, d phi_k, d v inside the chunk), and with more
              than one chunk 8 l F E + 2 l F + the same prefix products.
Not causal (whole tensors): forward 4 N F E + 2 N F, backward 8 N F E + 2 N F.
Naive (quadratic, masked after the fact): forward 2 N^2 (F + E), backward 4 N^2 (F + E).
Triton (triton_kernels.py, chunks of BT = 16..64 tokens, counted from the kernels' tl.dot calls):
forward per chunk 4 l F E + 2 l^2 (F + E) (the states, then the queries against them and inside
the chunk); backward three state passes and three attend passes, 10 l F E + 6 l^2 (F + E); not
causal 4 N F E forward, 10 N F E backward.
"""

from __future__ import annotations

from methods._featuremap.plan import plan_blocks


def chunk_lengths(n: int, chunk_size: int) -> list[int]:
    """The chunk lengths of a sequence of n tokens."""
    length = min(chunk_size, n)
    full, tail = divmod(n, length)
    return [length] * full + ([tail] if tail else [])


def chunk_flops(n: int, features: int, value_dim: int, chunk_size: int, causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``chunk.py`` per (batch, head)."""
    f, e = features, value_dim
    if not causal:
        return 4.0 * n * f * e + 2.0 * n * f, 8.0 * n * f * e + 2.0 * n * f
    lengths = chunk_lengths(n, chunk_size)
    forward = sum(2.0 * m * m * (f + e) for m in lengths)
    backward = 2 * forward
    if len(lengths) > 1:
        prefix = sum(2.0 * b.chunks**2 * f * (e + 1) for b in plan_blocks(1, n, chunk_size)[0])
        forward += 4.0 * n * f * e + 2.0 * n * f + prefix
        backward += 8.0 * n * f * e + 2.0 * n * f + prefix
    return forward, backward


def naive_flops(n: int, features: int, value_dim: int) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``naive.py`` per (batch, head): the whole (N, N) matrix, causal or not."""
    forward = 2.0 * n * n * (features + value_dim)
    return forward, 2 * forward


def triton_flops(n: int, features: int, value_dim: int, causal: bool, block_size: int = 64) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``triton.py`` per (batch, head)."""
    f, e = features, value_dim
    if not causal:
        return 4.0 * n * f * e, 10.0 * n * f * e
    tile = min(block_size, max(16, 1 << (n - 1).bit_length()))
    lengths = chunk_lengths(n, tile)
    forward = sum(4.0 * m * f * e + 2.0 * m * m * (f + e) for m in lengths)
    backward = sum(10.0 * m * f * e + 6.0 * m * m * (f + e) for m in lengths)
    return forward, backward
