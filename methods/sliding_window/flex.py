"""Sliding-window attention through PyTorch's FlexAttention, compiled (the path ``impl=auto`` takes on CUDA).

Eager ``flex_attention`` materialises the whole (N, N) score matrix; only under ``torch.compile``
does it become a fused kernel that visits just the tiles the block mask lists. The block mask is
built here from the window's geometry, O((N / tile)^2) small integers, because
``create_block_mask`` would first evaluate the mask at all N^2 pairs. On the CPU the compiled
kernel runs forward only (torch has no FlexAttention backward there), so training on the CPU takes
the band path (bands.py).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from methods.sliding_window.bands import window_mask

# FlexAttention's default tile: the kernels' own block sizes divide it on every device.
TILE = 128
# Triton's tl.dot needs head dims of at least 16; narrower q, k, v are zero-padded (exact: the
# padded coordinates add 0 to every score, the padded value columns are dropped).
MIN_HEAD_DIM = 16
# Each new (dtype, dims, causal, window) traces flex_attention again; past dynamo's default of 8
# recompiles it would run the eager flex_attention, which materialises N^2 scores.
RECOMPILE_LIMIT = 64


def tiles(n: int, window: int, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(touched, full, rows): which (query tile, key tile) pairs hold a pair the window sees,
    which hold only such pairs (the kernel skips the mask there), and the rows of each tile."""
    starts = torch.arange(0, n, TILE)
    ends = (starts + TILE).clamp(max=n) - 1  # inclusive
    nearest = starts[:, None] - ends[None, :]  # the smallest i - j over a tile pair
    farthest = ends[:, None] - starts[None, :]  # the largest
    low = 0 if causal else 1 - window  # the window is low <= i - j <= window - 1
    touched = (farthest >= low) & (nearest <= window - 1)
    full = (nearest >= low) & (farthest <= window - 1)
    if n % TILE:  # the ragged last tile goes through the mask, which also hides its padding
        full[-1, :] = False
        full[:, -1] = False
    return touched, full, ends - starts + 1


def tile_pairs(n: int, window: int, causal: bool) -> int:
    """The (query, key) pairs in the tiles the kernel visits: what it computes."""
    touched, _, rows = tiles(n, window, causal)
    return int((touched.long() * rows[:, None] * rows[None, :]).sum())


@functools.lru_cache(maxsize=64)
def mask_mod(window: int, causal: bool):
    """The window as FlexAttention's mask_mod; one function per (window, causal), so compiled
    graphs are reused (dynamo guards on the function)."""
    def seen(batch, head, q_idx, kv_idx):
        return window_mask(q_idx, kv_idx, window, causal)
    return seen


def _listed(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (query tiles, key tiles) bool matrix as FlexAttention's counts and indices (listed first)."""
    counts = blocks.sum(-1, dtype=torch.int32)
    indices = torch.argsort((~blocks).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts[None, None], indices[None, None]


@functools.lru_cache(maxsize=4)  # a training loop asks for one length; each holds (N / TILE)^2 indices
def block_mask(n: int, window: int, causal: bool, device: torch.device):
    """The BlockMask of the window over a sequence of ``n``, on ``device``."""
    from torch.nn.attention.flex_attention import BlockMask

    touched, full, _ = tiles(n, window, causal)
    partial_counts, partial_indices = _listed(touched & ~full)
    full_counts, full_indices = _listed(full)
    return BlockMask.from_kv_blocks(
        partial_counts.to(device), partial_indices.to(device), full_counts.to(device), full_indices.to(device),
        BLOCK_SIZE=TILE, mask_mod=mask_mod(window, causal), seq_lengths=(n, n))


@functools.cache
def compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def _widen(x: torch.Tensor) -> torch.Tensor:
    return F.pad(x, (0, MIN_HEAD_DIM - x.shape[-1])) if x.shape[-1] < MIN_HEAD_DIM else x


def flex_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, causal: bool) -> torch.Tensor:
    """Sliding-window attention by compiled FlexAttention with the window's block mask; q's dtype."""
    mask = block_mask(q.shape[2], window, causal, q.device)
    with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT, specialize_int=True):
        out = compiled_flex()(_widen(q), _widen(k), _widen(v), block_mask=mask, scale=1.0 / math.sqrt(q.shape[-1]))
    return out[..., : v.shape[-1]]
