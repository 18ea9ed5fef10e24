"""The random projection of FAVOR+: orthogonal blocks of Gaussian directions with chi row norms."""

from __future__ import annotations

import numpy as np
import torch


def draw_generator(seed: int, draw_index: int) -> torch.Generator:
    """A CPU generator for draw number ``draw_index`` of a run seeded ``seed``, independent of others."""
    mixed = np.random.SeedSequence([seed, draw_index]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(mixed[0]) << 32 | int(mixed[1]))


def orthogonal_gaussian_projection(num_features: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """(num_features, dim) rows, orthogonal within each block of ``dim`` rows, each row marginally
    N(0, I): a Haar-random direction times an independent chi(dim) norm (Choromanski et al. 2021)."""
    blocks = -(-num_features // dim)
    q, r = torch.linalg.qr(torch.randn(blocks, dim, dim, generator=generator))
    # Fixing the signs by diag(r) makes q Haar-distributed, so every row is a uniform direction.
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    directions = q.transpose(-1, -2).reshape(blocks * dim, dim)[:num_features]
    norms = torch.randn(num_features, dim, generator=generator).norm(dim=-1, keepdim=True)
    return directions * norms
