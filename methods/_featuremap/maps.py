"""Parameter-free feature maps shared by several methods."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """Katharopoulos et al. 2020: phi(x) = elu(x) + 1, positive so the denominator is too."""
    return F.elu(x) + 1.0
