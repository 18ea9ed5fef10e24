"""Sliding-window attention on the CPU (and anywhere): the masked-softmax definition and SDPA over bands.

A query i sees key j when the window holds it: causal, i - window < j <= i; non-causal,
|i - j| < window. The band path cuts the queries into blocks of ``chunk`` and gives each block
the keys its rows can see, ``window - 1`` before the block (and after it, non-causal), so one
batched SDPA call does O(N * (chunk + window)) work and holds that much memory, never N^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


def window_mask(rows: torch.Tensor, cols: torch.Tensor, window: int, causal: bool) -> torch.Tensor:
    """Whether query position ``rows`` sees key position ``cols`` (broadcast against each other)."""
    offset = rows - cols
    if causal:
        return (offset >= 0) & (offset < window)
    return (offset < window) & (offset > -window)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, causal: bool) -> torch.Tensor:
    """The definition, in float32 over the whole (N, N) score matrix: softmax(q k^T / sqrt(D)) v
    with every pair outside the window at -inf. Returns the dtype of q."""
    positions = torch.arange(q.shape[2], device=q.device)
    seen = window_mask(positions[:, None], positions[None, :], window, causal)
    scores = torch.einsum("bhnd,bhmd->bhnm", q.float(), k.float()) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(~seen, float("-inf")).softmax(dim=-1)
    return torch.einsum("bhnm,bhme->bhne", weights, v.float()).to(q.dtype)


@dataclass(frozen=True)
class Bands:
    """How the band path cuts a sequence: ``blocks`` query blocks of ``block`` rows, each seeing
    ``left`` keys before its first row and ``right`` after its last (``width`` keys in all)."""

    blocks: int
    block: int
    left: int
    right: int

    @property
    def width(self) -> int:
        return self.block + self.left + self.right


def band_plan(n: int, window: int, causal: bool, chunk: int) -> Bands | None:
    """The bands for a sequence of ``n``, or None when a band would be no shorter than the
    sequence: then one SDPA call over all N keys, window-masked, does no more work."""
    reach = min(window, n) - 1
    block = min(chunk, n)
    bands = Bands(blocks=-(-n // block), block=block, left=reach, right=0 if causal else reach)
    return None if bands.width >= n else bands


def band_pairs(n: int, window: int, causal: bool, chunk: int) -> int:
    """The (query, key) pairs the band path scores, masked ones included: what it computes."""
    bands = band_plan(n, window, causal, chunk)
    return n * n if bands is None else bands.blocks * bands.block * bands.width


def _band_keys(x: torch.Tensor, bands: Bands) -> torch.Tensor:
    """(B, H, N, D) -> (B * H, blocks, width, D): each block's keys, zero where off the sequence."""
    batch, heads, n, dim = x.shape
    padded = F.pad(x, (0, 0, bands.left, bands.blocks * bands.block - n + bands.right))
    windows = padded.unfold(2, bands.width, bands.block).transpose(-1, -2)  # (B, H, blocks, width, D)
    return windows.reshape(batch * heads, bands.blocks, bands.width, dim)


def _band_mask(n: int, window: int, causal: bool, bands: Bands, device: torch.device) -> torch.Tensor:
    """(blocks, block, width) bool: which keys of its band each query row sees. Keys off the
    sequence are hidden from real queries; the padding rows past N keep their own padded key,
    so that no row is empty (an empty row's softmax is NaN, and NaN reaches the gradients)."""
    block_start = torch.arange(bands.blocks, device=device).view(-1, 1, 1) * bands.block
    rows = block_start + torch.arange(bands.block, device=device).view(1, -1, 1)
    cols = block_start - bands.left + torch.arange(bands.width, device=device).view(1, 1, -1)
    return window_mask(rows, cols, window, causal) & (cols >= 0) & ((cols < n) | (rows >= n))


def band_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, causal: bool,
                   chunk: int) -> torch.Tensor:
    """Sliding-window attention as one SDPA call over the bands of ``band_plan``; q's dtype.
    PyTorch picks SDPA's backend (on the CPU its fused flash kernel, which takes the mask)."""
    batch, heads, n, _ = q.shape
    bands = band_plan(n, window, causal, chunk)
    if bands is None:
        positions = torch.arange(n, device=q.device)
        seen = window_mask(positions[:, None], positions[None, :], window, causal)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=seen)
    padded = bands.blocks * bands.block
    queries = F.pad(q, (0, 0, 0, padded - n)).reshape(batch * heads, bands.blocks, bands.block, q.shape[-1])
    out = F.scaled_dot_product_attention(queries, _band_keys(k, bands), _band_keys(v, bands),
                                         attn_mask=_band_mask(n, window, causal, bands, q.device))
    return out.reshape(batch, heads, padded, v.shape[-1])[:, :, :n]
