"""Triton kernels of attention from features, chunked as in flash-linear-attention's chunk ops.

The sequence is cut into chunks of BT rows. Three kernels, each used twice (forward and backward):

- ``chunk_states_kernel``: running sums over chunks of key^T value (F, E) and of weight * key (F),
  stored per chunk (the sum over chunks strictly before it, or strictly after it when REVERSE), or
  stored once as the total when not causal.
- ``attend_over_features_kernel``: out = query @ state + mask(query key^T) @ value, reducing over F;
  with NORMALIZE it also forms the denominator query . key_sum + rowsum(mask(query key^T)) + eps
  (eps one value per row).
- ``attend_over_values_kernel``: out = a @ state^T + wa * key_sum + mask(a b^T + wa wb^T) @ c,
  reducing over E, where one of wa, wb is a per-row weight and the other is 1.

Sums, states and denominators are float32. Every product is a ``tl.dot`` of operands rounded to
OPERAND_DTYPE, multiplied as DOT_DTYPE with DOT_PRECISION, accumulated in float32 (``triton.py``
chooses them). Every tile is masked, so F, E and N need not be multiples of the block sizes:
padded rows and columns load as zeros and add nothing. Grids are (chunks or F tiles, E or F tiles,
batch * heads). N is not specialised on (its divisibility matters only through F and E), so fewer
variants compile.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _dot(a, b, OPERAND_DTYPE: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """a @ b in float32 from operands rounded to OPERAND_DTYPE; DOT_DTYPE differs from it only
    where the hardware type cannot be used (the interpreter's bfloat16 dot is wrong)."""
    a = a.to(OPERAND_DTYPE).to(DOT_DTYPE)
    b = b.to(OPERAND_DTYPE).to(DOT_DTYPE)
    return tl.dot(a, b, input_precision=DOT_PRECISION)


@triton.jit
def _causal_mask(scores, BT: tl.constexpr, REVERSE: tl.constexpr):
    """Zero the scores of pairs outside the causal order: keep j <= i (or j >= i when REVERSE)."""
    rows = tl.arange(0, BT)[:, None]
    cols = tl.arange(0, BT)[None, :]
    if REVERSE:
        keep = rows <= cols
    else:
        keep = rows >= cols
    return tl.where(keep, scores, 0.0)


@triton.jit
def _load_tile(ptr, rows, cols, stride, mask_rows, mask_cols):
    """The (rows, cols) tile of a row-major matrix of ``stride`` columns at ``ptr``; zeros where a
    row or column is masked off."""
    return tl.load(
        ptr + rows[:, None] * stride + cols[None, :], mask=mask_rows[:, None] & mask_cols[None, :], other=0.0
    )


@triton.jit
def _store_tile(ptr, rows, cols, stride, mask_rows, mask_cols, tile):
    """Write ``tile`` at the (rows, cols) tile of a row-major matrix of ``stride`` columns, where unmasked."""
    tl.store(ptr + rows[:, None] * stride + cols[None, :], tile, mask=mask_rows[:, None] & mask_cols[None, :])


@triton.jit
def _chunk_program(N, CAUSAL: tl.constexpr, BT: tl.constexpr, BX: tl.constexpr):
    """What a program of the attend kernels works on: its batch x head ``bh``, the row of the state
    it reads in the (BH, S) states (S = the chunks when causal, else 1), its chunk's rows, its tile
    of the second grid axis (BX wide), and which of its rows exist."""
    chunk, tile, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    num_states = tl.num_programs(0) if CAUSAL else 1
    state_index = chunk if CAUSAL else 0
    offs_t = chunk * BT + tl.arange(0, BT)
    offs_x = tile * BX + tl.arange(0, BX)
    return bh, bh * num_states + state_index, offs_t, offs_x, offs_t < N


@triton.jit
def _reduce_tile(acc, scores, x_ptr, y_ptr, state_tile, state_mask, offs_t, offs_c, mask_t, mask_c, C,
                 CAUSAL: tl.constexpr, OPERAND_DTYPE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                 DOT_PRECISION: tl.constexpr):
    """One tile ``offs_c`` of the reduced columns of two (N, C) matrices x and y: acc += x @ state
    (the tile at ``state_tile``) and, when causal, scores += x y^T over the chunk's rows. x and y
    share one tile of offsets. Returns (acc, scores, the x tile)."""
    rows_c = offs_t[:, None] * C + offs_c[None, :]
    mask_rows_c = mask_t[:, None] & mask_c[None, :]
    x = tl.load(x_ptr + rows_c, mask=mask_rows_c, other=0.0)
    state = tl.load(state_tile, mask=state_mask, other=0.0)
    acc += _dot(x, state, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION)
    if CAUSAL:
        y = tl.load(y_ptr + rows_c, mask=mask_rows_c, other=0.0)
        scores += _dot(x, tl.trans(y), OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION)
    return acc, scores, x


@triton.jit(do_not_specialize=["N", "NUM_CHUNKS"])
def chunk_states_kernel(
    key_ptr,  # (BH, N, F)
    value_ptr,  # (BH, N, E)
    weight_ptr,  # (BH, N) float32, read only when WEIGHTED
    state_ptr,  # (BH, S, F, E) float32 out; S = NUM_CHUNKS when causal, else 1
    key_sum_ptr,  # (BH, S, F) float32 out
    N,
    F,
    E,
    NUM_CHUNKS,
    CAUSAL: tl.constexpr,
    REVERSE: tl.constexpr,
    WEIGHTED: tl.constexpr,
    BT: tl.constexpr,
    BF: tl.constexpr,
    BE: tl.constexpr,
    OPERAND_DTYPE: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid_f, pid_e, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    offs_f = pid_f * BF + tl.arange(0, BF)
    offs_e = pid_e * BE + tl.arange(0, BE)
    mask_f, mask_e = offs_f < F, offs_e < E
    num_states = NUM_CHUNKS if CAUSAL else 1
    key_ptr += bh * N * F
    value_ptr += bh * N * E
    weight_ptr += bh * N
    state_ptr += bh * num_states * F * E
    key_sum_ptr += bh * num_states * F
    state_tile = offs_f[:, None] * E + offs_e[None, :]
    mask_tile = mask_f[:, None] & mask_e[None, :]
    # Every E tile computes the key sum (it is cheap); only the first one writes it.
    mask_key_sum = mask_f & (pid_e + 0 * offs_f == 0)

    state = tl.zeros((BF, BE), dtype=tl.float32)
    key_sum = tl.zeros((BF,), dtype=tl.float32)
    for i in range(NUM_CHUNKS):
        if REVERSE:
            chunk = NUM_CHUNKS - 1 - i
        else:
            chunk = i
        if CAUSAL:
            tl.store(state_ptr + chunk * F * E + state_tile, state, mask=mask_tile)
            tl.store(key_sum_ptr + chunk * F + offs_f, key_sum, mask=mask_key_sum)
        offs_t = chunk * BT + tl.arange(0, BT)
        mask_t = offs_t < N
        keys = _load_tile(key_ptr, offs_t, offs_f, F, mask_t, mask_f)
        values = _load_tile(value_ptr, offs_t, offs_e, E, mask_t, mask_e)
        state += _dot(tl.trans(keys), values, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION)
        keys = keys.to(tl.float32)
        if WEIGHTED:
            keys = keys * tl.load(weight_ptr + offs_t, mask=mask_t, other=0.0)[:, None]
        key_sum += tl.sum(keys, axis=0)
    if not CAUSAL:
        tl.store(state_ptr + state_tile, state, mask=mask_tile)
        tl.store(key_sum_ptr + offs_f, key_sum, mask=mask_key_sum)


@triton.jit(do_not_specialize=["N"])
def attend_over_features_kernel(
    query_ptr,  # (BH, N, F)
    key_ptr,  # (BH, N, F)
    value_ptr,  # (BH, N, E)
    state_ptr,  # (BH, S, F, E) float32, from chunk_states_kernel over (key, value)
    key_sum_ptr,  # (BH, S, F) float32, read only when NORMALIZE
    out_ptr,  # (BH, N, E)
    denominator_ptr,  # (BH, N) float32 out, written only when NORMALIZE
    eps_ptr,  # (BH, N) float32, read only when NORMALIZE
    N,
    F,
    E,
    CAUSAL: tl.constexpr,
    REVERSE: tl.constexpr,
    NORMALIZE: tl.constexpr,
    BT: tl.constexpr,
    BF: tl.constexpr,
    BE: tl.constexpr,
    OPERAND_DTYPE: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    bh, state_row, offs_t, offs_e, mask_t = _chunk_program(N, CAUSAL, BT, BE)
    mask_e = offs_e < E
    query_ptr += bh * N * F
    key_ptr += bh * N * F
    state_ptr += state_row * F * E
    key_sum_ptr += state_row * F

    acc = tl.zeros((BT, BE), dtype=tl.float32)
    scores = tl.zeros((BT, BT), dtype=tl.float32)
    denominator = tl.zeros((BT,), dtype=tl.float32)
    for f0 in range(0, F, BF):
        offs_f = f0 + tl.arange(0, BF)
        mask_f = offs_f < F
        state_tile = state_ptr + offs_f[:, None] * E + offs_e[None, :]
        acc, scores, query = _reduce_tile(
            acc, scores, query_ptr, key_ptr, state_tile, mask_f[:, None] & mask_e[None, :], offs_t, offs_f, mask_t,
            mask_f, F, CAUSAL, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION,
        )
        if NORMALIZE:
            key_sum = tl.load(key_sum_ptr + offs_f, mask=mask_f, other=0.0)
            denominator += tl.sum(query.to(tl.float32) * key_sum[None, :], axis=1)
    if CAUSAL:
        scores = _causal_mask(scores, BT, REVERSE)
        value = _load_tile(value_ptr + bh * N * E, offs_t, offs_e, E, mask_t, mask_e)
        acc += _dot(scores, value, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION)
        if NORMALIZE:
            denominator += tl.sum(scores, axis=1)
    if NORMALIZE:
        denominator += tl.load(eps_ptr + bh * N + offs_t, mask=mask_t, other=1.0)
        acc = acc / denominator[:, None]
        tl.store(denominator_ptr + bh * N + offs_t, denominator, mask=mask_t & (tl.program_id(1) + 0 * offs_t == 0))
    _store_tile(out_ptr + bh * N * E, offs_t, offs_e, E, mask_t, mask_e, acc)


@triton.jit(do_not_specialize=["N"])
def attend_over_values_kernel(
    a_ptr,  # (BH, N, E)
    b_ptr,  # (BH, N, E)
    c_ptr,  # (BH, N, F)
    weight_ptr,  # (BH, N) float32
    state_ptr,  # (BH, S, F, E) float32, read transposed
    key_sum_ptr,  # (BH, S, F) float32
    out_ptr,  # (BH, N, F)
    N,
    F,
    E,
    CAUSAL: tl.constexpr,
    REVERSE: tl.constexpr,
    WEIGHT_ON_A: tl.constexpr,
    BT: tl.constexpr,
    BF: tl.constexpr,
    BE: tl.constexpr,
    OPERAND_DTYPE: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    bh, state_row, offs_t, offs_f, mask_t = _chunk_program(N, CAUSAL, BT, BF)
    mask_f = offs_f < F
    a_ptr += bh * N * E
    b_ptr += bh * N * E
    state_ptr += state_row * F * E

    acc = tl.zeros((BT, BF), dtype=tl.float32)
    scores = tl.zeros((BT, BT), dtype=tl.float32)
    for e0 in range(0, E, BE):
        offs_e = e0 + tl.arange(0, BE)
        mask_e = offs_e < E
        state_tile = state_ptr + offs_f[None, :] * E + offs_e[:, None]  # transposed: (E tile, F tile)
        acc, scores, _ = _reduce_tile(
            acc, scores, a_ptr, b_ptr, state_tile, mask_e[:, None] & mask_f[None, :], offs_t, offs_e, mask_t,
            mask_e, E, CAUSAL, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION,
        )
    weight = tl.load(weight_ptr + bh * N + offs_t, mask=mask_t, other=0.0)
    key_sum = tl.load(key_sum_ptr + state_row * F + offs_f, mask=mask_f, other=0.0)
    if WEIGHT_ON_A:
        acc += weight[:, None] * key_sum[None, :]
    else:
        acc += key_sum[None, :]
    if CAUSAL:
        if WEIGHT_ON_A:
            scores += weight[:, None]
        else:
            scores += weight[None, :]
        scores = _causal_mask(scores, BT, REVERSE)
        c = _load_tile(c_ptr + bh * N * F, offs_t, offs_f, F, mask_t, mask_f)
        acc += _dot(scores, c, OPERAND_DTYPE, DOT_DTYPE, DOT_PRECISION)
    _store_tile(out_ptr + bh * N * F, offs_t, offs_f, F, mask_t, mask_f, acc)
