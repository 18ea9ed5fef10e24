"""What the approximation costs beside what it gets wrong: FLOPs and memory per (batch, head), non-causal.

Counts are analytic (multiply and add counted apart), for the definition of each form:
- exact attention: scores 2N^2 D, softmax 5N^2 (max, subtract, exp, sum, divide), weights times
  values 2N^2 E; memory: the N x N float32 score matrix of the definition (fused kernels avoid that
  memory but not those FLOPs);
- a feature map: 2 ops per feature per token (the map's own elementwise work), plus 2 D F when it
  projects its input on F random directions (FAVOR+);
- attention from features: phi_k^T v and its read 4NFE, the key sum and its read 3NF, the division
  NE; memory: phi_q, phi_k and the state (F x E + F), in float32. Log-linear attention repeats the
  state work once per Fenwick level (ceil(log2 N) + 1) in each of its two passes (non-causal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FLOAT32_BYTES = 4


@dataclass(frozen=True)
class CostModel:
    """How a method's linear form scales: ``projects`` (a D x F projection in its feature map) and
    ``hierarchical`` (log-linear attention's per-level states)."""

    projects: bool = False
    hierarchical: bool = False

    @classmethod
    def of(cls, module: torch.nn.Module) -> CostModel:
        return cls(projects=hasattr(module, "projection"), hierarchical=hasattr(module, "level_weights"))

    def state_passes(self, n: int) -> int:
        """How many times the state work is done: once, or per level in each of two passes."""
        if not self.hierarchical:
            return 1
        levels = math.ceil(math.log2(n)) + 1 if n > 1 else 1
        return 2 * levels

    def feature_map_flops(self, n: int, d: int, f: int) -> int:
        """Both feature maps (queries and keys) over n tokens."""
        return 2 * n * (2 * f + (2 * d * f if self.projects else 0))

    def kernelized_flops(self, n: int, d: int, e: int, f: int) -> int:
        """The whole linear form: both feature maps, then attention from the features."""
        return self.feature_map_flops(n, d, f) + self.state_passes(n) * n * (4 * f * e + 3 * f) + n * e

    def kernelized_memory_bytes(self, n: int, e: int, f: int) -> int:
        """Query and key features plus the state(s), float32."""
        states = self.state_passes(n) // 2 if self.hierarchical else 1
        return FLOAT32_BYTES * (2 * n * f + states * (f * e + f))

    def break_even_features(self, n: int, d: int, e: int) -> float:
        """The feature count at which the linear form costs as many FLOPs as exact attention
        (cost is affine in F); at or above it, more features save nothing at this N."""
        fixed = self.kernelized_flops(n, d, e, 0)
        per_feature = self.kernelized_flops(n, d, e, 1) - fixed
        return (exact_flops(n, d, e) - fixed) / per_feature


def exact_flops(n: int, d: int, e: int) -> int:
    """Exact softmax attention over n queries and n keys."""
    return n * n * (2 * d + 2 * e + 5)


def exact_memory_bytes(n: int) -> int:
    """The N x N float32 score matrix the definition materialises."""
    return FLOAT32_BYTES * n * n
