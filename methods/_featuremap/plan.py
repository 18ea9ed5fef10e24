"""How both chunked cores (_featuremap/chunk.py, loglinear/chunk.py) cut (heads, N) into blocks of chunks.

The cores work block by block so that everything a block touches stays in cache: about
SEGMENT_TOKENS tokens, several whole heads at once or a run of one head's chunks. A block's rows
of a (heads, N, X) tensor are a view that flattens to (heads in block * chunks, length, X) without
a copy, so a block's products are batched matrix products over its chunks. A length that is not a
multiple of the chunk ends in one shorter chunk, a block of its own, never in padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# About 2048 tokens handled together: every tensor a block touches (about 4 MiB at 64 features)
# stays in cache, so time grows linearly with N, and short sequences still come in few, large
# products (several heads at once).
SEGMENT_TOKENS = 2048


@dataclass(frozen=True)
class ChunkRun:
    """Tokens [start, stop) of the heads ``heads``, cut into chunks of ``length`` tokens (the
    shorter last chunk of a sequence is a run of its own); its first chunk is chunk number
    ``first_chunk`` of the sequence."""

    heads: slice
    start: int
    stop: int
    length: int
    first_chunk: int

    @property
    def chunks(self) -> int:
        return (self.stop - self.start) // self.length

    @property
    def matrices(self) -> int:
        """Heads in the run times chunks: the batch of the run's flattened rows."""
        return (self.heads.stop - self.heads.start) * self.chunks


def plan_blocks(heads: int, n: int, chunk_size: int, aligned: bool = False) -> list[list[ChunkRun]]:
    """Groups of runs; a group's runs share their heads and are visited in order, carrying what
    the earlier chunks sum to. Several heads share a run only when whole heads flatten (no shorter
    last chunk; with ``aligned`` also a power of two of chunks), else each of their chunks is a
    run. One head's chunks go in runs of up to SEGMENT_TOKENS tokens; with ``aligned`` each run is
    2^b chunks starting at a multiple of 2^b, as log-linear attention's Fenwick nodes need."""
    length = min(chunk_size, n)
    full, tail = divmod(n, length)
    most = max(1, SEGMENT_TOKENS // length)  # chunks in a run
    group = max(1, SEGMENT_TOKENS // n) if n <= SEGMENT_TOKENS else 1
    whole_heads = tail == 0 and (not aligned or full & (full - 1) == 0)
    plans = []
    for h in range(0, heads, group):
        hs = slice(h, min(h + group, heads))
        if whole_heads or n > SEGMENT_TOKENS or (aligned and hs.stop - hs.start == 1):
            runs = _aligned_runs(full, most) if aligned else [(c, min(most, full - c)) for c in range(0, full, most)]
        else:  # whole heads would not flatten: one chunk of every head at a time
            runs = [(c, 1) for c in range(full)]
        blocks = [ChunkRun(hs, c * length, (c + size) * length, length, c) for c, size in runs]
        if tail:
            blocks.append(ChunkRun(hs, full * length, n, tail, full))
        plans.append(blocks)
    return plans


def _aligned_runs(full: int, most: int) -> list[tuple[int, int]]:
    """(first chunk, chunks) of aligned dyadic runs of at most ``most`` (a power of two) chunks
    covering chunks [0, full), the largest first."""
    runs, c = [], 0
    while c < full:
        size = min(most, 1 << ((full - c).bit_length() - 1))
        while c % size:
            size //= 2
        runs.append((c, size))
        c += size
    return runs


def rows(x: torch.Tensor, run: ChunkRun) -> torch.Tensor:
    """The run's rows of a (heads, N, X) tensor as (heads in run * chunks, length, X): a view."""
    return x[run.heads, run.start : run.stop].view(-1, run.length, x.shape[-1])


def token_rows(x: torch.Tensor, run: ChunkRun) -> torch.Tensor:
    """The run's entries of a (heads, N) tensor as (heads in run * chunks, length): a view."""
    return x[run.heads, run.start : run.stop].view(-1, run.length)


def chunk_slots(x: torch.Tensor, run: ChunkRun) -> torch.Tensor:
    """The run's slots of a per-chunk (heads, chunks, ...) tensor: (heads in run, chunks, ...)."""
    return x[run.heads, run.first_chunk : run.first_chunk + run.chunks]
