"""Floating-point operations of log-linear attention as each implementation computes it.

Counted as in methods/_featuremap/flops.py (the matrix products, 2 m n k, matrix-vector products
included; not elementwise work or reductions), per (batch, head), F features (= D for elu), E value dim,
L chunk size, C chunks, J = bit_length(C - 1) chunk levels:

chunk (chunk.py), causal, per chunk of l tokens:
    forward   2 l^2 (F + E) inside the chunk; 2 L F E per whole chunk for its state
              (when J > 0); 2 F (E + 1) per (query, level) read: popcount(i) levels for the
              queries of chunk i; 2 N D lv for the level weights (lv = levels N reads), 2 N D for
              the decay gates
    backward  4 l^2 (F + E) inside; 4 L F E per whole chunk; 4 F (E + 1) per read; twice the
              forward products of the level weights and gates (input and weight gradients)
naive (naive.py): forward 2 N^2 (F + E) (the scores twice when not causal), backward twice that.
triton (triton.py): the sequence padded to whole chunks; every chunk reads all J levels (absent
ones as zero states): forward 2 L^2 (F + E) + J (2 L F E + 2 L F) per chunk and 2 L F (E + 1) per
chunk state; backward 2 L^2 (3 F + 2 E) + 4 J L F (E + 1) per chunk and twice the states.
Not causal: the causal count twice (a forward and a reversed pass) for chunk and triton.
"""

from __future__ import annotations

from methods._featuremap.flops import chunk_lengths


def _projections(n: int, head_dim: int, levels: int, decay: bool) -> float:
    """Forward FLOPs of the level weights (and gates) projected from q (and k)."""
    return 2.0 * n * head_dim * (levels + (1 if decay else 0))


def chunk_flops(n: int, head_dim: int, value_dim: int, chunk_size: int, levels: int, decay: bool,
                causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``chunk.py`` per (batch, head)."""
    f, e = head_dim, value_dim
    lengths = chunk_lengths(n, chunk_size) if n >= chunk_size else [n]
    forward = sum(2.0 * m * m * (f + e) for m in lengths)
    backward = sum(4.0 * m * m * (f + e) for m in lengths)
    full = n // chunk_size
    if len(lengths) > 1:
        forward += full * 2.0 * chunk_size * f * e
        backward += full * 4.0 * chunk_size * f * e
        reads = sum(bin(i).count("1") * m for i, m in enumerate(lengths))
        forward += reads * 2.0 * f * (e + 1)
        backward += reads * 4.0 * f * (e + 1)
    passes = 1 if causal else 2
    projections = _projections(n, head_dim, levels, decay)
    return passes * forward + projections, passes * backward + 2 * projections


def naive_flops(n: int, head_dim: int, value_dim: int, levels: int, decay: bool, causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``naive.py`` per (batch, head)."""
    scores = 2.0 * n * n * head_dim * (1 if causal else 2)
    forward = scores + 2.0 * n * n * value_dim
    projections = _projections(n, head_dim, levels, decay)
    return forward + projections, 2 * forward + 2 * projections


def triton_flops(n: int, head_dim: int, value_dim: int, chunk_size: int, levels: int, decay: bool,
                 causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs of ``triton.py`` per (batch, head)."""
    f, e, c = head_dim, value_dim, chunk_size
    chunks = -(-n // c)
    tree_levels = (chunks - 1).bit_length() if chunks > 1 else 0
    forward = chunks * 2.0 * c * c * (f + e)
    backward = chunks * 2.0 * c * c * (3 * f + 2 * e)
    if tree_levels:
        forward += chunks * (tree_levels * (2.0 * c * f * e + 2.0 * c * f) + 2.0 * c * f * (e + 1))
        backward += chunks * (tree_levels * 4.0 * c * f * (e + 1) + 4.0 * c * f * (e + 1))
    passes = 1 if causal else 2
    projections = _projections(n, head_dim, levels, decay)
    return passes * forward + projections, passes * backward + 2 * projections
